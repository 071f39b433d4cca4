"""Messages (``rt.send`` / ``ctx.recv``) and published values (``ctx.publish``
/ ``rt.get_event``) on every backend, between a client and a worker.

The same scenario runs on memory and SQLite (tests/runtime/test_messages.py
covers them in depth), PostgreSQL, Redis (a client records through the
EventLog seam with the writer fencing a driver uses) and a Kafka worker
fleet (the client sends a command the run's owner applies): messages sent
before the run waits are kept in order and received once, a duplicate
idempotency key records nothing, a recv parks the run until a message wakes
it, and ``get_event`` waits for the value the run publishes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentlog.errors import LeaseHeldError, RunEndedError
from agentlog.eventlog.events import MessageSent, RunStatus
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end
from tests.support.fleet import until

WAIT_S = 120.0


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ]
)
def mailbox_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh log of each backend with a mailbox: a SQLite file, a PostgreSQL
    database, a Redis server's log."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'agentlog.db'}"
    return str(request.getfixturevalue(f"{request.param}_url"))


def inbox() -> Workflow:
    wf = Workflow("inbox", state={"got": "append"})

    @wf.step(then="take")
    async def ask(ctx: StepContext) -> Any:
        ctx.interrupt("go?")

    @wf.step
    async def take(ctx: StepContext) -> Any:
        first = await ctx.recv("orders")
        await ctx.publish("first", first)
        second = await ctx.recv("orders")  # parks: sent after the run waits for it
        return end(got=[first, second, await ctx.recv("audit")])

    return wf


@contextlib.asynccontextmanager
async def pair(worker_url: str, client_url: str) -> AsyncIterator[Runtime]:
    """A runtime whose worker drives the runs, and a client runtime (yielded)
    that only records requests, as another process would."""
    wf = inbox()
    async with contextlib.AsyncExitStack() as stack:
        worker = await Runtime.open(
            worker_url, workflows=[wf], config=RuntimeConfig("worker", poll_seconds=0.05)
        )
        await stack.enter_async_context(worker)  # runs its worker loop
        config = RuntimeConfig(owner="client", execute=False, worker=False)
        client = await Runtime.open(client_url, workflows=[wf], config=config)
        yield await stack.enter_async_context(client)


async def scenario(client: Runtime) -> None:
    await client.submit("inbox", run_id="m")
    assert (await client.wait("m", timeout=WAIT_S)).status == RunStatus.WAITING  # asks
    assert await client.send("m", "orders", {"id": 1}, idempotency_key="order-1") is True
    assert await client.send("m", "orders", {"id": 1}, idempotency_key="order-1") is False
    assert await client.send("m", "audit", "seen") is True
    await client.resume("m", "go")
    assert await client.get_event("m", "first", timeout=WAIT_S) == {"id": 1}

    async def parked_on_recv() -> bool:
        state = await client.get_state("m")
        return [i.get("kind") for i in state.interrupts] == ["message"]

    await until(parked_on_recv, "the run parks on its second recv", WAIT_S)
    assert await client.send("m", "orders", {"id": 2}) is True  # wakes it
    state = await client.wait("m", timeout=WAIT_S)
    assert state.status == RunStatus.COMPLETED, (state.status, state.error)
    assert state.values["got"] == [{"id": 1}, {"id": 2}, "seen"]
    assert state.published == {"first": {"id": 1}}
    sent = [e.data async for e in client.log.read("m") if isinstance(e.data, MessageSent)]
    assert [m.topic for m in sent] == ["orders", "audit", "orders"]  # the duplicate: not stored
    assert sent[-1].wakes is not None
    with pytest.raises(RunEndedError):
        await client.send("m", "orders", {"id": 3})


async def test_messages_on_sqlite_between_two_runtimes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'agentlog.db'}"
    async with pair(url, url) as client:
        await scenario(client)


async def test_messages_on_postgres(postgres_url: str) -> None:
    async with pair(postgres_url, postgres_url) as client:
        await scenario(client)


async def test_messages_on_redis(redis_url: str) -> None:
    async with pair(redis_url, redis_url) as client:
        await scenario(client)


@pytest.mark.timeout(300)
async def test_messages_on_a_kafka_worker_fleet(kafka_bootstrap: str, kafka_name: str) -> None:
    base = f"kafka://{kafka_bootstrap}/{kafka_name}"
    worker_url = f"{base}?group=workers&partitions=2&session_timeout=6"
    async with pair(worker_url, f"{base}?layout=partitioned&partitions=2") as client:
        await scenario(client)


def held(gate: asyncio.Event) -> Workflow:
    """One step that waits at ``gate`` (its writer holds the run), then takes
    two messages of "orders" and one of "audit"."""
    wf = Workflow("held", state={"got": "append"})

    @wf.step
    async def work(ctx: StepContext) -> Any:
        await gate.wait()
        got = [await ctx.recv("orders"), await ctx.recv("orders"), await ctx.recv("audit")]
        return end(got=got)

    return wf


async def held_scenario(url: str) -> None:
    """A worker's step holds the run while a client sends: each send returns at
    once (stored in the run's mailbox), and the run receives them in order."""
    gate = asyncio.Event()
    wf = held(gate)
    worker_config = RuntimeConfig("worker", poll_seconds=0.05)
    client_config = RuntimeConfig(owner="client", execute=False, worker=False)
    async with (
        await Runtime.open(url, workflows=[wf], config=worker_config) as worker,
        await Runtime.open(url, workflows=[wf], config=client_config) as client,
    ):
        await client.submit("held", run_id="h")

        async def held_by_the_worker() -> bool:
            info = await client.log.find_run("h")
            return info is not None and info.lease_owner == "worker"

        await until(held_by_the_worker, "the worker drives the run", WAIT_S)
        async with asyncio.timeout(WAIT_S):  # the step still waits at its gate
            assert await client.send("h", "orders", 1, idempotency_key="o1") is True
            assert await client.send("h", "audit", "seen") is True
            assert await client.send("h", "orders", 1, idempotency_key="o1") is False
            assert await client.send("h", "orders", 2, idempotency_key="o2") is True
        assert not [e async for e in client.log.read("h") if isinstance(e.data, MessageSent)]
        gate.set()
        state = await worker.wait("h", timeout=WAIT_S)
    assert state.status == RunStatus.COMPLETED, (state.status, state.error)
    assert state.values["got"] == [1, 2, "seen"]


async def test_a_send_to_a_held_run_returns_at_once(mailbox_url: str) -> None:
    await held_scenario(mailbox_url)


async def resent_scenario(url: str) -> None:
    """A send that raised LeaseHeldError (another writer held the parked run
    past its timeout) had stored its message but reported nothing: sending it
    again with the same key returns True, once, whether the message is still
    stored (o1) or a later send moved it into the history meanwhile (o2); the
    history holds each once."""
    config = RuntimeConfig("client", poll_seconds=0.05, worker=False)
    async with await Runtime.open(url, workflows=[inbox()], config=config) as rt:
        log: Any = rt.log
        await rt.start("inbox", run_id="r")
        assert (await rt.wait("r", timeout=WAIT_S)).status == RunStatus.WAITING  # asks
        epoch = await log.claim_writer("r", owner="holder", lease_seconds=600, force=False)
        for key in ("o1", "o2"):
            with pytest.raises(LeaseHeldError):
                await rt.send("r", "orders", key, idempotency_key=key, timeout=0.2)
        with pytest.raises(LeaseHeldError):  # raised again: still nobody's report
            await rt.send("r", "orders", "o1", idempotency_key="o1", timeout=0.2)
        assert [m.key for m in await log.stored_messages("r")] == ["o1", "o2"]
        await log.release_lease("r", epoch)
        assert await rt.send("r", "orders", "o1", idempotency_key="o1") is True
        assert await rt.send("r", "orders", "o1", idempotency_key="o1") is False
        assert await rt.send("r", "audit", "seen") is True  # moves o2 with it
        assert await log.stored_messages("r") == []
        assert await rt.send("r", "orders", "o2", idempotency_key="o2") is True
        assert await rt.send("r", "orders", "o2", idempotency_key="o2") is False
        sent = [e.data async for e in log.read("r") if isinstance(e.data, MessageSent)]
    assert [m.value for m in sent] == ["o1", "o2", "seen"]


async def test_a_send_retried_after_lease_held_reports_it(mailbox_url: str) -> None:
    await resent_scenario(mailbox_url)


async def overlapping_scenario(url: str, *, b_stops: bool = False) -> None:
    """Two sends of one key overlap while another writer holds the parked
    run: A stores K, B finds it stored (not its report) and keeps trying; A
    stops (cancelled) and marks K unreported, B's next store takes the report,
    so B returns True; A's retry afterwards returns False. The history holds K
    once. (A later store's report was dropped: nobody got True.) ``b_stops``:
    B is cancelled after it took the report, so a retry returns True."""
    config = RuntimeConfig("client", poll_seconds=0.05, worker=False)
    async with await Runtime.open(url, workflows=[inbox()], config=config) as rt:
        log: Any = rt.log
        await rt.start("inbox", run_id="r")
        assert (await rt.wait("r", timeout=WAIT_S)).status == RunStatus.WAITING  # asks
        epoch = await log.claim_writer("r", owner="holder", lease_seconds=600, force=False)
        stores: list[str] = []
        store = log.store_message

        async def counted(run_id: str, topic: str, value: Any, key: str) -> Any:
            stored = await store(run_id, topic, value, key)
            stores.append(key)
            return stored

        log.store_message = counted  # the real store, counted
        a = asyncio.create_task(rt.send("r", "orders", "o1", idempotency_key="K"))

        async def stored_times(n: int) -> bool:
            return len(stores) >= n

        await until(lambda: stored_times(1), "A stored K", WAIT_S, every=0.01)
        b = asyncio.create_task(rt.send("r", "orders", "o1", idempotency_key="K"))
        await until(lambda: stored_times(3), "B found K stored", WAIT_S, every=0.01)
        a.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await a
        after = len(stores)
        await until(lambda: stored_times(after + 1), "B stored K again", WAIT_S, every=0.01)
        if b_stops:  # B took the report over, then stops too: it gives it back
            b.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await b
        await log.release_lease("r", epoch)
        async with asyncio.timeout(WAIT_S):
            if b_stops:
                assert await rt.send("r", "orders", "o1", idempotency_key="K") is True
            else:
                assert await b is True
        assert await rt.send("r", "orders", "o1", idempotency_key="K") is False
        sent = [e.data async for e in log.read("r") if isinstance(e.data, MessageSent)]
    assert [m.key for m in sent] == ["K"]


@pytest.mark.parametrize("b_stops", [False, True])
async def test_overlapping_sends_of_a_key_report_it_once(mailbox_url: str, b_stops: bool) -> None:
    await overlapping_scenario(mailbox_url, b_stops=b_stops)


async def ended_scenario(url: str) -> None:
    """A send retried after LeaseHeldError once the run ended: its message is
    in the history, so the retry reports it (True), the next one returns
    False; only a key never recorded gets RunEndedError."""
    config = RuntimeConfig("client", poll_seconds=0.05, worker=False)
    async with await Runtime.open(url, workflows=[inbox()], config=config) as rt:
        log: Any = rt.log
        await rt.start("inbox", run_id="r")
        assert (await rt.wait("r", timeout=WAIT_S)).status == RunStatus.WAITING  # asks
        epoch = await log.claim_writer("r", owner="holder", lease_seconds=600, force=False)
        with pytest.raises(LeaseHeldError):
            await rt.send("r", "orders", "o1", idempotency_key="K", timeout=0.2)
        await log.release_lease("r", epoch)
        assert await rt.send("r", "audit", "x", idempotency_key="A") is True  # moves K too
        await rt.cancel("r")
        assert (await rt.wait("r", timeout=WAIT_S)).status == RunStatus.CANCELLED
        assert await rt.send("r", "orders", "o1", idempotency_key="K") is True
        assert await rt.send("r", "orders", "o1", idempotency_key="K") is False
        assert await rt.send("r", "audit", "x", idempotency_key="A") is False
        with pytest.raises(RunEndedError):
            await rt.send("r", "orders", "o2", idempotency_key="never")
        with pytest.raises(RunEndedError):
            await rt.send("r", "orders", "o3")
        sent = [e.data async for e in log.read("r") if isinstance(e.data, MessageSent)]
    assert [m.key for m in sent] == ["K", "A"]


async def test_a_retry_after_the_run_ended_reports_its_message(mailbox_url: str) -> None:
    await ended_scenario(mailbox_url)


async def pruned_scenario(url: str, *, many: bool = False) -> None:
    """Pruning a run that has not ended (the archiver hot-archives a parked
    run) keeps the messages stored for it and not yet moved: its next writer
    records them. A run that ended keeps nothing in its mailbox."""
    config = RuntimeConfig("worker", poll_seconds=0.05)
    async with await Runtime.open(url, workflows=[inbox()], config=config) as rt:
        log: Any = rt.log
        for run_id in ("p", "e"):
            await rt.start("inbox", run_id=run_id)
            assert (await rt.wait(run_id, timeout=WAIT_S)).status == RunStatus.WAITING
            stored = await log.store_message(run_id, "orders", {"id": 9}, "left-behind")
            assert stored.inserted and not stored.taken
        # Moved, but its send raised: kept for the next send of its key to report.
        assert (await log.store_message("p", "orders", {"id": 8}, "unreported")).reports
        await log.unreport("p", "unreported")
        moved = [m.id for m in await log.stored_messages("p") if m.key == "unreported"]
        await log.messages_moved("p", moved)
        await rt.cancel("e")
        assert (await rt.wait("e", timeout=WAIT_S)).status == RunStatus.CANCELLED
        if many:  # the archiver's batch form
            await log.prune_many(["p", "e"], keep_latest_snapshot=True)
        else:
            await log.prune("p", keep_latest_snapshot=True)
            await log.prune("e")
        assert [m.value for m in await log.stored_messages("p")] == [{"id": 9}]
        assert await log.stored_messages("e") == []
        assert await log.take_report("p", "unreported") is True
        assert await log.take_report("p", "unreported") is False


async def test_pruning_keeps_an_unfinished_runs_messages(mailbox_url: str) -> None:
    await pruned_scenario(mailbox_url)


async def test_pruning_runs_together_keeps_unfinished_runs_messages(mailbox_url: str) -> None:
    await pruned_scenario(mailbox_url, many=True)


async def test_an_ended_runs_mailbox_goes_in_the_prune_itself_on_redis(redis_url: str) -> None:
    """The prune script deletes an ended run's mailbox keys with its events:
    a process killed right after the script leaves none behind. The crash is
    stood in for by a client whose every later DEL fails."""
    config = RuntimeConfig("worker", poll_seconds=0.05)
    async with await Runtime.open(redis_url, workflows=[inbox()], config=config) as rt:
        log: Any = rt.log
        await rt.start("inbox", run_id="e")
        assert (await rt.wait("e", timeout=WAIT_S)).status == RunStatus.WAITING
        assert (await log.store_message("e", "orders", {"id": 1}, "k")).inserted
        await rt.cancel("e")
        assert (await rt.wait("e", timeout=WAIT_S)).status == RunStatus.CANCELLED
        mailbox = log._mailbox_keys("e")[1:]

        async def killed(*keys: str) -> int:
            raise ConnectionError("the process died after the prune script")

        real_delete, log._client.delete = log._client.delete, killed
        try:
            with contextlib.suppress(Exception):
                await log.prune("e")
        finally:
            log._client.delete = real_delete
        assert await log._client.exists(*mailbox) == 0
        assert await log.stored_messages("e") == []
