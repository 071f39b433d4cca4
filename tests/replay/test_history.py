"""One run read a page at a time: events, state at a seq, the diff of an event, hot or archived."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentlog.archive import Archiver, LocalArchiveStore
from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.errors import ConfigError, EncryptionError, SeqOutOfRangeError, UnknownRunError
from agentlog.eventlog import Event, EventLog, RunStarted, StepCompleted
from agentlog.eventlog.codec import jsonable
from agentlog.eventlog.events import RunForked
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.projector import SnapshotPolicy, diff_states, fold, load_state, save_state
from agentlog.replay import RunCatalog, RunHistory, build_timeline, event_row
from agentlog.replay._timeline_window import CHUNK
from agentlog.runtime import Runtime, RuntimeConfig
from tests.replay.workflows import CALLS, debug_workflow, recorded_rounds, restricted


async def record(log: EventLog, run_id: str = "r") -> list[Event]:
    """The debug workflow on ``log`` (a snapshot every 3 events), parked, then answered."""
    CALLS["flaky"] = 0
    config = RuntimeConfig(snapshots=SnapshotPolicy(every=3))
    async with asyncio.timeout(30), Runtime(log, workflows=[debug_workflow()], config=config) as rt:
        await rt.start("debug", run_id=run_id, durability="sync")
        assert (await rt.wait(run_id)).status == "waiting"
        await rt.resume(run_id, "yes")
        assert (await rt.wait(run_id)).status == "completed"
    return [e async for e in log.read(run_id)]


async def test_events_page_and_name_the_tasks(tmp_path: Path) -> None:
    async with SqliteEventLog(tmp_path / "hot.db") as log:
        events = await record(log)
        async with await RunHistory.open("r", log) as run:
            assert run.where == "hot" and run.last_seq == len(events)
            assert run.info.workflow == "debug" and run.info.status == "completed"
            first = await run.events(limit=5)
            assert [row["seq"] for row in first] == [1, 2, 3, 4, 5]
            rest = await run.events(after=5, limit=100)
            assert [row["seq"] for row in rest] == list(range(6, len(events) + 1))
            assert await run.events(after=len(events)) == []
            rows = first + rest
    assert json.loads(json.dumps(rows)) == rows
    for row, event in zip(rows, events, strict=True):
        shared = {k: row[k] for k in ("seq", "ts", "type", "step", "payload")}
        assert shared == event_row(event)  # the same row as `agentlog show` prints
        assert row["summary"] and len(row["summary"]) <= 120
    done = [row for row in rows if row["type"] in ("TaskCompleted", "TaskFailed")]
    assert done and all(row["task"] in ("slow", "flaky") for row in done)  # named across pages


async def test_state_at_every_seq_equals_the_fold_and_diffs_follow(tmp_path: Path) -> None:
    async with SqliteEventLog(tmp_path / "hot.db") as log:
        events = await record(log)
        assert await log.load_snapshot("r") is not None  # state_at starts from snapshots
        async with await RunHistory.open("r", log) as run:
            for seq in range(1, len(events) + 1):
                want = fold(events[:seq])
                assert await run.state_at(seq) == jsonable(want.to_dict()), seq
                before = fold(events[: seq - 1])
                changes = [c.to_dict() for c in diff_states(before, want)]
                assert await run.diff_at(seq) == jsonable(changes), seq
            for seq in range(len(events), 0, -1):  # backwards: from snapshots, not on
                assert await run.state_at(seq) == jsonable(fold(events[:seq]).to_dict()), seq
            commit = next(e.seq for e in events if e.type == "SuperstepCommitted")
            log_change = [c for c in await run.diff_at(commit) if c["path"] == "values.log"]
            assert [c["after"] for c in log_change] == [["fan"]]  # the superstep's writes land
            model = await run.timeline()
            assert model == build_timeline(events).to_json()


async def test_out_of_range_seqs_and_unknown_runs_are_typed_errors(tmp_path: Path) -> None:
    async with SqliteEventLog(tmp_path / "hot.db") as log:
        events = await record(log)
        with pytest.raises(UnknownRunError, match="nope"):
            await RunHistory.open("nope", log)
        async with await RunHistory.open("r", log) as run:
            for bad in (0, -1, len(events) + 1):
                with pytest.raises(SeqOutOfRangeError, match=f"seq 1 to {len(events)}"):
                    await run.state_at(bad)
                with pytest.raises(SeqOutOfRangeError):
                    await run.diff_at(bad)
    store = LocalArchiveStore(tmp_path / "archive")
    with pytest.raises(UnknownRunError):
        await RunHistory.open("nope", None, store)


async def test_an_archived_run_reads_like_a_hot_one(tmp_path: Path) -> None:
    store = LocalArchiveStore(tmp_path / "archive")
    async with SqliteEventLog(tmp_path / "hot.db") as log:
        events = await record(log)
        async with await RunHistory.open("r", log) as run:
            hot_rows = await run.events(limit=1000)
            hot_state = await run.state_at(7)
        await Archiver(log, store).run()
        assert (await log.get_run("r")).archived  # pruned: only the tombstone is hot
        catalog = RunCatalog(log, store)
        assert [(r.run_id, r.where) for r in (await catalog.page()).rows] == [("r", "archived")]
        for archive in (store, catalog.archive_index):
            async with await RunHistory.open("r", log, archive) as run:
                assert run.where == "archived" and run.last_seq == len(events)
                assert await run.events(limit=1000) == hot_rows
                assert await run.events(after=3, limit=4) == hot_rows[3:7]
                assert await run.state_at(7) == hot_state
                assert (await run.timeline())["counts"]["bars"] == 2
        await catalog.close()
    async with await RunHistory.open("r", None, store) as alone:  # the archive without its log
        assert alone.where == "archived" and await alone.events(limit=1000) == hot_rows
    async with SqliteEventLog(tmp_path / "kept.db") as kept:  # archived, still whole in a hot log
        await record(kept)
        async with await RunHistory.open("r", kept, store) as both:
            assert both.where == "both"  # the rule `agentlog runs` and the run list use


async def test_a_sealed_event_without_its_keys_shows_as_unreadable(tmp_path: Path) -> None:
    keys = LocalKeyStore(tmp_path / "keyring.json")
    async with SqliteEventLog(tmp_path / "hot.db", cipher=PayloadCipher(keys)) as sealed:
        events = await record(sealed)
    async with (
        SqliteEventLog(tmp_path / "hot.db") as withheld,  # no keys
        await RunHistory.open("r", withheld) as run,
    ):
        rows = await run.events(limit=1000)
        assert len(rows) == len(events)
        unreadable = [row for row in rows if "unreadable" in row]
        assert unreadable and all(row["summary"] == row["unreadable"] for row in unreadable)
        started = next(row for row in rows if row["type"] == "RunStarted")
        assert started["unreadable"] and started["payload"]["input"] == started["unreadable"]
        model = await run.timeline()  # metadata only: it still draws
        assert model["counts"]["supersteps"] == 3 and model["counts"]["bars"] == 2
        with pytest.raises(EncryptionError):
            await run.state_at(2)


async def test_timeline_windows_of_a_hot_and_an_archived_run_are_the_full_model_cut(
    tmp_path: Path,
) -> None:
    store = LocalArchiveStore(tmp_path / "archive")
    config = RuntimeConfig(snapshots=SnapshotPolicy(every=5))
    async with SqliteEventLog(tmp_path / "hot.db") as log:
        events = await recorded_rounds(log, rounds=10, config=config)
        full = build_timeline(events)
        total = len(full.steps)

        async def check(run: RunHistory) -> None:
            assert await run.timeline() == full.to_json()  # the whole run, as before
            for steps in (1, 4, total):
                latest = await run.timeline(first_step=None, max_steps=steps)
                first = max(0, total - steps)
                assert latest == restricted(full, first, steps, latest), (run.where, steps)
                for start in (first - steps, 3, 0, total):
                    window = await run.timeline(first_step=start, max_steps=steps)
                    assert window == restricted(full, max(0, start), steps, window)
            with pytest.raises(ConfigError):
                await run.timeline(first_step=None, max_steps=0)

        async with await RunHistory.open("rounds", log) as run:
            await check(run)
        await Archiver(log, store).run()
        assert (await log.get_run("rounds")).archived
        async with await RunHistory.open("rounds", log, store) as run:
            assert run.where == "archived"
            await check(run)


async def test_forked_from_names_a_forks_origin_hot_and_archived(tmp_path: Path) -> None:
    store = LocalArchiveStore(tmp_path / "archive")
    async with SqliteEventLog(tmp_path / "hot.db") as log:
        await record(log)
        for new, snapshots in (("plain", SnapshotPolicy(every=10_000)), ("snap", None)):
            config = RuntimeConfig(snapshots=snapshots or SnapshotPolicy(every=1))
            async with (
                asyncio.timeout(30),
                Runtime(log, workflows=[debug_workflow()], config=config) as rt,
            ):
                await rt.fork("r", 4, new_run_id=new)
                await rt.wait(new)
        expected = {"run_id": "r", "seq": 4}
        for archive in (None, store):
            for run_id, origin in (("r", None), ("plain", expected), ("snap", expected)):
                async with await RunHistory.open(run_id, log, archive) as run:
                    assert await run.forked_from() == origin, (archive, run_id)
                    assert await run.forked_from() == origin  # kept
            await Archiver(log, store).run()
            assert (await log.get_run("r")).archived  # the origin is read from the archive next


async def test_forked_from_past_a_long_copied_history(tmp_path: Path) -> None:
    """A fork whose copy is longer than a read chunk: found by reading on,
    or from the newest snapshot when there is one."""
    async with SqliteEventLog(tmp_path / "hot.db") as log:
        for run_id, marker in (("fork", True), ("plain", False)):
            epoch = await log.claim_writer(run_id)
            data: list[Any] = [RunStarted("w", "1", {}, "sync", "fp", start=["s"])]
            data += [StepCompleted("s", 0, 0, {"n": n}) for n in range(CHUNK + 100)]
            data += [RunForked("origin", 7)] if marker else []
            data += [StepCompleted("s", 0, 0, {"n": -1})]
            events = [Event(run_id, n, d, writer_epoch=epoch) for n, d in enumerate(data, 1)]
            await log.append(events)
        for run_id, origin in (("fork", {"run_id": "origin", "seq": 7}), ("plain", None)):
            async with await RunHistory.open(run_id, log) as run:
                assert await run.forked_from() == origin
            await save_state(log, await load_state(log, run_id))
            async with await RunHistory.open(run_id, log) as run:
                assert await run.forked_from() == origin
