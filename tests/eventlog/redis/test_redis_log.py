"""The Redis backend beyond the shared contract: its index sets, damaged
entries, and a server killed and restarted under it."""

from __future__ import annotations

import asyncio
import signal
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agentlog.errors import BackendUnavailableError, CorruptEventError
from agentlog.eventlog._base import EventLog, RunInfo
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import (
    LANGGRAPH_WORKFLOW,
    InterruptRaised,
    ResumeReceived,
    RunCompleted,
    utcnow,
)
from agentlog.testing import ev, read_all, seed, started
from tests.services.redis_server import DURABLE_CONFIG, start_server, stop_server

pytestmark = pytest.mark.redis


def _order(info: RunInfo) -> tuple[datetime, str]:
    when = info.wake_at or info.updated_at
    assert when is not None
    return when, info.run_id


def _parked(run_id: str, due_in: float | None) -> list[Any]:
    due = None if due_in is None else utcnow() + timedelta(seconds=due_in)
    return [
        ev(run_id, 1, started()),
        ev(run_id, 2, InterruptRaised("a", 1, 0, 0, "ok?", due_at=due)),
    ]


async def test_runnable_and_next_wake_follow_the_rule_of_every_backend(redis_url: str) -> None:
    log = await open_log(redis_url)
    async with log:
        await log.append([ev("fresh", 1, started())])  # running, nobody holds it
        epoch = await log.claim_writer("held", owner="w", lease_seconds=600)
        await log.append([ev("held", 1, started(), epoch)])
        await log.append(_parked("due", -5))
        await log.append(_parked("later", 3600))
        await log.append(_parked("forever", None))
        await log.append([*_parked("resumed", -5), ev("resumed", 3, ResumeReceived("y"))])
        await log.append([ev("done", 1, started()), ev("done", 2, RunCompleted())])
        await log.append([ev("thread", 1, started(LANGGRAPH_WORKFLOW))])
        await log.prune("fresh")  # archived but running: still a worker's job
        now = utcnow()
        later = now + timedelta(hours=2)  # the lease and the later timer have run out
        for at, expected in [
            (now, {"fresh", "due", "resumed"}),
            (later, {"fresh", "due", "resumed", "held", "later"}),
        ]:
            got = await log.runnable(now=at)
            assert {r.run_id for r in got} == expected
            # EventLog's own runnable applies RunInfo.needs_worker to every run
            # (oldest first; runs due at the same moment come in either order).
            assert sorted(got, key=_order) == sorted(
                await EventLog.runnable(log, now=at), key=_order
            )
            assert [_order(r)[0] for r in got] == sorted(_order(r)[0] for r in got)
        assert await log.runnable(now=now, limit=1) == await EventLog.runnable(
            log, now=now, limit=1
        )
        assert await log.next_wake() == await EventLog.next_wake(log)
        assert await log.next_wake() == (await log.get_run("due")).wake_at


async def test_a_changed_byte_in_a_stored_event_is_caught(redis_url: str, raw: Any) -> None:
    log = await open_log(redis_url)
    async with log:
        await seed(log, "r", 3)
        stream = f"{redis_url.split('prefix=')[1]}:events:r"
        entries = await raw.xrange(stream)
        await raw.delete(stream)
        for entry_id, fields in entries:
            if entry_id == b"2-0":
                fields[b"p"] = fields[b"p"][:-1] + bytes([fields[b"p"][-1] ^ 1])
            await raw.xadd(stream, fields, id=entry_id)
        with pytest.raises(CorruptEventError) as caught:
            await read_all(log, "r")
        assert (caught.value.run_id, caught.value.seq) == ("r", 2)
        assert "checksum" in str(caught.value)
        assert len(await read_all(log, "r", upto_seq=1)) == 1


async def test_a_missing_entry_is_named(redis_url: str, raw: Any) -> None:
    log = await open_log(redis_url)
    async with log:
        await seed(log, "r", 4)
        prefix = redis_url.split("prefix=")[1]
        await raw.xdel(f"{prefix}:events:r", "3-0")
        with pytest.raises(CorruptEventError) as caught:
            await read_all(log, "r")
        assert caught.value.seq == 3 and "seq 3 is missing" in str(caught.value)
        await raw.xdel(f"{prefix}:events:r", "4-0")
        with pytest.raises(CorruptEventError) as caught:
            await read_all(log, "r", after_seq=2)
        assert caught.value.seq == 3


async def test_appending_over_a_damaged_index_is_refused(redis_url: str, raw: Any) -> None:
    log = await open_log(redis_url)
    async with log:
        events = await seed(log, "r", 3)
        prefix = redis_url.split("prefix=")[1]
        await raw.hset(f"{prefix}:run:r", "last_seq", "1")  # the index lost two seqs
        other = await open_log(redis_url)  # no cached row
        async with other:
            with pytest.raises(CorruptEventError) as caught:
                await other.append([ev("r", 2)])
        assert "index was damaged" in str(caught.value)
        await raw.hset(f"{prefix}:run:r", "last_seq", "3")
        assert await read_all(log, "r") == events


async def test_a_killed_server_loses_no_acknowledged_event(tmp_path: Path) -> None:
    server = start_server(tmp_path, DURABLE_CONFIG)
    url = server.url(prefix="kill", connect_attempts="50")
    try:
        log = await open_log(url)
        epoch = await log.claim_writer("r")
        written = [ev("r", 1, started(), epoch)]
        written += [ev("r", seq, epoch=epoch) for seq in range(2, 41)]
        for event in written:
            await log.append([event], durable=True)
        assert server.process is not None
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=30)
        with pytest.raises(BackendUnavailableError) as caught:
            await log.append([ev("r", 41, epoch=epoch)])
        assert caught.value.retryable and f":{server.port}" in str(caught.value)
        server = start_server(tmp_path, DURABLE_CONFIG, port=server.port)
        # The same instance reconnects; the refused append was not recorded.
        assert await read_all(log, "r") == written
        await log.append([ev("r", 41, RunCompleted(), epoch)])
        await log.close()
        async with await open_log(url) as again:
            assert len(await read_all(again, "r")) == 41
            assert (await again.get_run("r")).writer_epoch == epoch
    finally:
        stop_server(server)


async def test_more_concurrent_appends_than_pooled_connections_all_land(redis_url: str) -> None:
    # 200 runs appending at once on one log: they wait for a pooled connection
    # instead of failing with "Too many connections".
    log = await open_log(redis_url)
    async with log:
        runs = [f"run-{i}" for i in range(200)]
        await asyncio.gather(*(seed(log, run_id, 3) for run_id in runs))
        assert {r.run_id for r in await log.list_runs()} == set(runs)
