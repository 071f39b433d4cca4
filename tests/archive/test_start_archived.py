"""``start`` of a run id whose run was archived and pruned (issue 19 item 7).

README promises that ``start`` returns the existing run, hot or archived.
It returned a handle whose ``wait()`` raised ``RunArchivedError``: nothing in
the runtime could read the archive. A runtime opened with ``archive=URL``
now reads the run through it; one without says the run is archived and to
pass ``archive=URL``. Neither ever starts a second history.

A real SQLite hot log and a real local archive folder, given as a
``file://`` URL.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agentlog.archive import Archiver, LocalArchiveStore
from agentlog.archive._errors import ArchiveConfigError
from agentlog.errors import (
    RunArchivedError,
    RunExistsError,
    RunFailedError,
    RunNotWaitingError,
)
from agentlog.eventlog.events import RunStatus, utcnow
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import RetryPolicy, Runtime, StepContext, Workflow
from tests.support.runtime import Calls, config, research_workflow, run_to_rest


async def _archived(hot: SqliteEventLog, store: LocalArchiveStore, wf: Workflow, **kw: Any) -> Any:
    """Run ``R`` of ``wf`` to its end, archive and prune it; return its final state."""
    async with Runtime(hot, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="R", durability="sync", **kw)
        final = await run_to_rest(rt, "R")
    assert final.status in RunStatus.TERMINAL
    await Archiver(hot, store).run(run_ids=["R"], now=utcnow() + timedelta(days=30))
    assert (await hot.get_run("R")).archived
    return final


async def test_start_of_an_archived_run_returns_it_read_from_the_archive(
    hot: SqliteEventLog, store: LocalArchiveStore, tmp_path: Path
) -> None:
    calls = Calls()
    wf = research_workflow(calls, with_approval=False)
    final = await _archived(hot, store, wf, input={"topic": "t"})
    before, hot_types = dict(calls.count), await hot.get_run("R")
    url, archive = f"sqlite:///{tmp_path / 'hot.db'}", f"file://{store.root}"
    async with await Runtime.open(url, workflows=[wf], config=config("b"), archive=archive) as rt:
        handle = await rt.start(wf, run_id="R", input={"topic": "other"}, durability="sync")
        waited = await handle.wait(timeout=20)
        assert waited.status == RunStatus.COMPLETED
        assert await handle.result(timeout=20) == final.values  # its output, as recorded
        assert (await handle.state()).to_dict() == final.to_dict()
        assert await handle.status() == RunStatus.COMPLETED
        assert await handle.pending() == []
        assert (await handle.cancel()).status == RunStatus.COMPLETED  # ended: nothing changes
        with pytest.raises(RunNotWaitingError, match="completed"):
            await handle.resume(True)
    assert calls.count == before  # no step and no effect ran again
    assert await hot.get_run("R") == hot_types  # no second history, tombstone untouched


async def test_start_of_an_archived_run_without_an_archive_says_how_to_read_it(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    wf = research_workflow(Calls(), with_approval=False)
    await _archived(hot, store, wf, input={"topic": "t"})
    info = await hot.get_run("R")
    async with Runtime(hot, workflows=[wf], config=config("b")) as rt:
        with pytest.raises(RunArchivedError, match=r"Runtime.open\(log_url, archive=URL\)"):
            await rt.start(wf, run_id="R", input={"topic": "t"})
        with pytest.raises(RunArchivedError, match="archive=URL"):
            await rt.wait("R", timeout=20)
        with pytest.raises(RunExistsError, match="research"):  # its id stays taken
            await rt.start(research_workflow(Calls(), name="other"), run_id="R")
    assert await hot.get_run("R") == info  # nothing recorded


async def test_a_failed_archived_run_started_again_is_returned_failed(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    wf = Workflow("breaks", state={"x": "replace"}, retry=RetryPolicy(max_attempts=1))

    @wf.step
    async def only(ctx: StepContext) -> Any:
        raise RuntimeError("boom")

    await _archived(hot, store, wf)
    info = await hot.get_run("R")
    async with Runtime(hot, workflows=[wf], config=config("b"), archive=store) as rt:
        handle = await rt.start(wf, run_id="R")
        assert (await handle.wait(timeout=20)).status == RunStatus.FAILED
        with pytest.raises(RuntimeError, match="boom") as caught:  # rebuilt from the archive
            await handle.result(timeout=20)
        assert isinstance(caught.value.__cause__, RunFailedError)
    assert await hot.get_run("R") == info  # not retried, not started again


async def test_a_bad_archive_url_is_refused_when_the_runtime_opens(tmp_path: Path) -> None:
    with pytest.raises(ArchiveConfigError, match="file://"):
        await Runtime.open(f"sqlite:///{tmp_path / 'a.db'}", archive="ftp://nowhere")
    assert not (tmp_path / "a.db").exists()  # checked before the log was opened
