"""PostgreSQL stopped (fast and immediate shutdown) in the middle of a run, then
restarted: every append that returned is still there, and the run completes.

The run goes on in this process while the server is down: its appends and
lease renewals retry with backoff (``connect_timeout``), an append whose
commit was lost with its connection finds its own rows on the retry, and
the run finishes once the server is back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from agentlog.errors import BackendUnavailableError, ConflictError
from agentlog.eventlog._row_format import event_row
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import Event, RunStatus, StepCompleted, TaskCompleted
from agentlog.eventlog.postgres import PostgresEventLog
from agentlog.eventlog.postgres._append import append_locked, event_arrays
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end, goto
from tests.services.postgres_server import PostgresServer

STEPS = 300


class RecordingLog(PostgresEventLog):
    """A PostgresEventLog that remembers every event whose append returned."""

    acked: list[Event]

    async def append(self, events: Sequence[Event], *, durable: bool = True) -> None:
        await super().append(events, durable=durable)
        self.acked = [*getattr(self, "acked", []), *events]


def counting_workflow() -> Workflow[Any]:
    wf = Workflow("count", version="1", state={"n": "replace"})

    @wf.step
    async def tick(ctx: StepContext) -> Any:
        await asyncio.sleep(0.005)  # a step that takes a moment, as a real one would
        n = ctx.state.get("n", 0) + 1
        return end(n=n) if n >= STEPS else goto("tick", n=n)

    return wf


async def wait_for(condition: Any, what: str, bound: float = 120.0) -> None:
    """Wait until ``condition()`` holds (a hang guard, not a timing assert)."""
    deadline = asyncio.get_running_loop().time() + bound
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", ["fast", "immediate"])
async def test_server_restart_mid_run_loses_nothing_acknowledged(
    own_server: PostgresServer, own_url: str, mode: str
) -> None:
    log = await RecordingLog.connect(own_url + "?connect_timeout=120")
    log.acked = []
    config = RuntimeConfig(owner="restart-test", lease_seconds=300.0, worker=False)
    async with Runtime(log, workflows=[counting_workflow()], config=config) as runtime:
        await runtime.start("count", run_id="r", input={"n": 0})
        await wait_for(lambda: len(log.acked) >= 20, "the run's first appends")
        await asyncio.to_thread(own_server.stop, mode)
        acked_before_stop = list(log.acked)
        assert acked_before_stop[-1].type != "RunCompleted", "the run ended before the stop"
        await asyncio.to_thread(own_server.start)
        state = await runtime.wait("r", timeout=300)
    await log.close()

    assert state.status == RunStatus.COMPLETED
    assert state.values["n"] == STEPS
    async with await open_log(own_url) as fresh:
        stored = {event.seq: event async for event in fresh.read("r")}
    for event in log.acked:  # every append that returned, before and after the stop
        assert stored[event.seq] == event
    assert sorted(stored) == list(range(1, len(stored) + 1))
    assert sum(isinstance(e.data, StepCompleted) for e in stored.values()) == STEPS


async def test_server_down_longer_than_connect_timeout_fails_typed_and_keeps_the_rest(
    own_server: PostgresServer, own_url: str
) -> None:
    log = await PostgresEventLog.connect(own_url + "?connect_timeout=1")
    epoch = await log.claim_writer("r")
    first = Event(
        "r", 1, StepCompleted(step="a", superstep=0, branch=0, writes={}), writer_epoch=epoch
    )
    await log.append([first])
    await asyncio.to_thread(own_server.stop, "immediate")
    try:
        second = Event(
            "r", 2, StepCompleted(step="b", superstep=1, branch=0, writes={}), writer_epoch=epoch
        )
        with pytest.raises(BackendUnavailableError) as caught:
            await log.append([second])
        assert caught.value.retryable
        assert own_server.host_port in str(caught.value)
        assert "agentlog-test-secret" not in str(caught.value)
    finally:
        await asyncio.to_thread(own_server.start)
    # The server is back: the same log instance works again, and seq 1 is there.
    await log.append([second])
    assert [e async for e in log.read("r")] == [first, second]
    await log.close()


async def test_retry_after_a_lost_commit_finds_its_own_rows_and_only_those(
    own_url: str,
) -> None:
    """An append retried because its connection died may have committed: the
    retry then finds its very rows (same seqs and checksums) and succeeds; any
    other batch at those seqs is still a conflict."""
    log = await PostgresEventLog.connect(own_url)
    epoch = await log.claim_writer("r")
    batch = [Event("r", seq, TaskCompleted(key=f"k{seq}", result=seq), writer_epoch=epoch)
             for seq in (1, 2)]  # fmt: skip
    await log.append(batch)  # the first attempt: it committed, and the answer was lost

    def retry(events: list[Event]) -> Any:
        rows = event_arrays([event_row(e, epoch, None) for e in events])
        return lambda conn: append_locked(conn, events, rows, True, retried=True)

    assert (await log._call(retry(batch), "retry")).last_seq == 2
    other = [Event("r", 1, TaskCompleted(key="other", result=0), writer_epoch=epoch)]
    with pytest.raises(ConflictError):
        await log._call(retry(other), "retry")
    assert [e async for e in log.read("r")] == batch
    await log.close()
