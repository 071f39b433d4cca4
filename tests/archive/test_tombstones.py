"""Archived runs keep their id (a tombstone row), and unfinished runs stay resumable."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agentlog.archive import (
    ArchivedEventReader,
    Archiver,
    ArchiverConfig,
    LocalArchiveStore,
    RetentionPolicies,
    RetentionPolicy,
)
from agentlog.errors import ConflictError, RunArchivedError
from agentlog.eventlog import Event, RunStarted, SuperstepCommitted
from agentlog.eventlog.events import utcnow
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.projector import fold, load_state, save_state
from agentlog.runtime import Runtime
from tests.archive.helpers import read_all, record_run
from tests.support.archive import NOW
from tests.support.runtime import Calls, config, research_workflow, run_to_rest

IDLE = ArchiverConfig(RetentionPolicies(RetentionPolicy(idle_after=timedelta(days=7))))


async def test_archiving_an_archived_run_again_is_idempotent(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    events = await record_run(hot, "done", tag=1)
    first = await Archiver(hot, store).run(run_ids=["done"], now=NOW)
    files = store.list()
    again = await Archiver(hot, store).run(run_ids=["done"], now=NOW)
    everything = await Archiver(hot, store).run(now=NOW)
    assert (first.runs, first.events, first.pruned) == (1, len(events), 1)
    assert (again.runs, again.events, again.pruned, again.files) == (0, 0, 0, 0)
    assert (everything.runs, everything.pruned) == (0, 0)
    assert store.list() == files
    info = await hot.get_run("done")
    assert info.archived and info.last_seq == len(events) and info.status == "completed"


async def test_archived_run_replays_from_the_archive_and_its_id_stays_taken(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    events = await record_run(hot, "done", tag=1)
    await Archiver(hot, store).run(now=NOW)
    history = ArchivedEventReader(hot, store)
    try:
        assert await read_all(history, "done") == events
        assert (await load_state(history, "done")).to_dict() == fold(events).to_dict()
        info = await history.get_run("done")
        assert (info.status, info.last_seq, info.archived) == ("completed", len(events), True)
        assert [r.run_id for r in await history.list_runs()] == ["done"]
    finally:
        await history.close()
    with pytest.raises(ConflictError):  # starting the id again cannot fork a second history
        await hot.append([Event("done", 1, events[0].data, NOW, info.writer_epoch)])


async def test_a_run_pruned_into_another_archive_is_not_read_as_empty(
    hot: SqliteEventLog, store: LocalArchiveStore, tmp_path: object
) -> None:
    await record_run(hot, "done", tag=1)
    await Archiver(hot, store).run(now=NOW)
    elsewhere = ArchivedEventReader(hot, LocalArchiveStore(f"{tmp_path}/other"))
    try:
        with pytest.raises(RunArchivedError):
            await read_all(elsewhere, "done")
    finally:
        await elsewhere.close()
    # and a pass against that other archive leaves the tombstone alone
    other = await Archiver(hot, LocalArchiveStore(f"{tmp_path}/other")).run(now=NOW)
    assert (other.runs, other.pruned) == (0, 0)


async def test_idle_running_run_with_an_old_snapshot_is_recovered_after_archiving(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    """Issue 8, item 5: pruned with a snapshot older than its last event, recovery
    appended at a taken seq (ConflictError at seq 9 against next seq 12)."""
    calls = Calls()
    wf = research_workflow(calls, with_approval=False)
    async with Runtime(MemoryEventLog(), workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="r", input={"topic": "t"})
        assert (await run_to_rest(rt, "r")).status == "completed"
        finished = [e async for e in rt.log.read("r")]
    # The run as a crashed writer left it: stopped after the fan-out superstep
    # committed, with its newest snapshot three events older than its last one.
    cut = max(i for i, e in enumerate(finished) if isinstance(e.data, SuperstepCommitted)) + 1
    crashed = finished[:cut]
    for event in crashed:
        info = await hot.find_run("r")
        while info is None or info.writer_epoch < event.writer_epoch:
            await hot.claim_writer("r")
            info = await hot.find_run("r")
        await hot.append([event])
    await save_state(hot, fold(crashed[:-3]))
    later = utcnow() + timedelta(days=30)

    summary = await Archiver(hot, store, IDLE).run(now=later)

    assert summary.run_ids == ("r",) and summary.pruned == 1
    before = dict(calls.count)
    async with Runtime(hot, workflows=[wf], config=config(owner="recoverer")) as rt:
        assert (await rt.recover()).recovered == ["r"]
        state = await run_to_rest(rt, "r")
    assert state.status == "completed" and state.values["sent"].startswith("sent:")
    info = await hot.get_run("r")
    assert info.archived and info.status == "completed" and info.last_seq > len(crashed)
    assert calls.count["plan"] == before["plan"]  # recorded work was not redone
    history = ArchivedEventReader(hot, store)
    try:
        assert (await load_state(history, "r", use_snapshots=False)).status == "completed"
    finally:
        await history.close()


async def test_unfinished_run_that_cannot_be_snapshotted_here_stays_hot(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    """A reducer this process does not know would fold a wrong state: no prune."""
    epoch = await hot.claim_writer("custom")
    started = RunStarted("wf", "1", {}, "sync", "fp", {}, ["a"], {"n": "app.not_registered"})
    events = [Event("custom", 1, started, NOW - timedelta(days=30), epoch)]
    await hot.append(events)

    summary = await Archiver(hot, store, IDLE).run(now=NOW)

    assert summary.run_ids == ("custom",) and summary.pruned == 0
    assert await read_all(hot, "custom") == events
    assert not (await hot.get_run("custom")).archived


async def test_unfinished_run_with_a_live_writer_stays_hot(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    events = await record_run(hot, "busy", end=None, start=NOW - timedelta(days=30))
    await hot.claim_writer("busy", owner="alive", lease_seconds=3600)
    summary = await Archiver(hot, store, IDLE).run(now=NOW)
    assert summary.pruned == 0
    assert await read_all(hot, "busy") == events


async def test_starting_an_archived_run_id_again_runs_nothing_again(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    """Issue 8 item 2: archive R, start R again: no second history, no second email."""
    calls = Calls()
    wf = research_workflow(calls, with_approval=False)
    async with Runtime(hot, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="R", input={"topic": "t"}, durability="sync")
        assert (await run_to_rest(rt, "R")).status == "completed"
    before = dict(calls.count)
    last_seq = (await hot.get_run("R")).last_seq
    await Archiver(hot, store).run(run_ids=["R"], now=utcnow() + timedelta(days=30))
    assert (await hot.get_run("R")).archived
    async with Runtime(hot, workflows=[wf], config=config("again")) as rt:
        with pytest.raises(RunArchivedError, match="archive=URL"):  # cannot read it here
            await rt.start(wf, run_id="R", input={"topic": "t"}, durability="sync")
    async with Runtime(hot, workflows=[wf], config=config("again"), archive=store) as rt:
        handle = await rt.start(wf, run_id="R", input={"topic": "t"}, durability="sync")
        assert handle.run_id == "R"
        assert (await handle.wait(timeout=20)).status == "completed"
    assert calls.count == before  # the email (and every other effect) ran once
    info = await hot.get_run("R")
    assert info.last_seq == last_seq and info.archived  # no second history
    history = ArchivedEventReader(hot, store)
    try:
        assert (await load_state(history, "R")).status == "completed"
    finally:
        await history.close()
