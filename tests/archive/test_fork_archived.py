"""``Runtime.fork`` of a run whose events were archived and pruned from the hot log.

A real SQLite hot log, a real local archive folder (and one S3 case on
moto_server): the fork reads the origin from Parquet, reuses its recorded
task results, and leaves the origin's rows (hot tombstone and archive
files) exactly as they were.
"""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from agentlog.archive import Archiver, ArchiveStore, LocalArchiveStore, S3ArchiveStore, S3Config
from agentlog.archive._reader import ArchivedEventReader
from agentlog.errors import RunArchivedError, RunExistsError
from agentlog.eventlog.events import RunStatus
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.projector import fold, load_state
from agentlog.runtime import Runtime
from tests.services.s3_server import S3Endpoint
from tests.support.fork import CALLS, chain_workflow, comparable, events_of, reset, seq_of
from tests.support.runtime import config, run_to_rest


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    reset()


def _rows(db: Path, run_id: str) -> list[tuple[Any, ...]]:
    """The run's stored rows as bytes on disk: events and its index row."""
    with sqlite3.connect(db) as conn:
        events = conn.execute("SELECT * FROM events WHERE run_id = ? ORDER BY seq", [run_id])
        runs = conn.execute("SELECT * FROM runs WHERE run_id = ?", [run_id])
        return [*events.fetchall(), *runs.fetchall()]


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


async def _archived_origin(hot: SqliteEventLog, store: ArchiveStore) -> int:
    """Run the chain to its end as ``origin``, archive and prune it; return the
    seq after its ``think`` step committed."""
    wf = chain_workflow()
    async with Runtime(hot, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="origin", input={"topic": "cats"}, durability="sync")
        assert (await run_to_rest(rt, "origin")).status == RunStatus.COMPLETED
    summary = await Archiver(hot, store).run()
    assert list(summary.run_ids) == ["origin"] and summary.pruned == 1
    assert (await hot.get_run("origin")).archived
    history = ArchivedEventReader(hot, store)
    try:
        return seq_of(await events_of(history, "origin"), "SuperstepCommitted", superstep=1)
    finally:
        await history.close()


async def test_fork_from_the_archive_reuses_recorded_results_and_changes_nothing(
    hot: SqliteEventLog, store: LocalArchiveStore, tmp_path: Path
) -> None:
    at = await _archived_origin(hot, store)
    db = tmp_path / "hot.db"
    before_rows, before_files = _rows(db, "origin"), _files(store.root)
    wf = chain_workflow()
    async with Runtime(hot, workflows=[wf], config=config()) as rt:
        with pytest.raises(RunArchivedError):  # no archive given: say where its events went
            await rt.fork("origin", at, new_run_id="fork")
        with pytest.raises(RunExistsError):  # an archived run's id stays taken
            await rt.fork("origin", at, new_run_id="origin", archive=f"file://{store.root}")
        await rt.fork("origin", at, new_run_id="fork", archive=store, updates={"topic": "dogs"})
        final = await run_to_rest(rt, "fork")
    assert final.status == RunStatus.COMPLETED
    assert final.values["text"] == "task.write#2 on dogs"
    assert (CALLS.count["task.fetch"], CALLS.count["task.think"], CALLS.count["task.write"]) == (
        1,
        1,
        2,
    )
    assert final.forked_from == {"run_id": "origin", "seq": at}
    history = ArchivedEventReader(hot, store)
    origin = await events_of(history, "origin")
    await history.close()
    forked = await events_of(hot, "fork")
    marker = next(e for e in forked if e.type == "RunForked")
    start = await load_state(hot, "fork", at_seq=marker.seq - 1)
    assert comparable(start) == comparable(fold(origin[:at]))
    assert _rows(db, "origin") == before_rows
    assert _files(store.root) == before_files


@pytest.mark.s3
async def test_fork_from_an_s3_archive_url(s3_endpoint: S3Endpoint, hot: SqliteEventLog) -> None:
    bucket = f"fork-{uuid.uuid4().hex[:12]}"
    client: Any = s3_endpoint.client()
    client.create_bucket(Bucket=bucket)
    store = S3ArchiveStore(
        S3Config(
            bucket=bucket,
            prefix="agentlog/fork",
            endpoint_url=s3_endpoint.url,
            region=s3_endpoint.region,
            access_key_id=s3_endpoint.access_key_id,
            secret_access_key=s3_endpoint.secret_access_key,
        )
    )
    at = await _archived_origin(hot, store)
    wf = chain_workflow()
    async with Runtime(hot, workflows=[wf], config=config()) as rt:
        await rt.fork("origin", at, new_run_id="fork", archive=store)
        final = await run_to_rest(rt, "fork")
    assert final.values["text"] == "task.write#2 on cats"
    assert (CALLS.count["task.think"], CALLS.count["task.write"]) == (1, 2)
