"""The tasks table folded in Python is the DuckDB grouping's, row for row.

:func:`agentlog.archive._tasks_fold.tasks_of` replaces running
:data:`~agentlog.archive._tasks_table.PARTS_SQL` on each file the archiver
writes; the SQL stays the definition (the ``tasks`` view runs it over hot
events and older files), so these tests hold the fold to it: on every event
type of the golden log, on sealed failures read without the key, and on
generated task histories (retries, failures with and without an error, NULL
durations, outcomes whose start is in an earlier file, clocks that step back).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.archive._rows import Columns
from agentlog.archive._tasks_fold import tasks_of
from agentlog.archive._tasks_table import TASKS_SCHEMA, tasks_table
from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.eventlog import Event
from agentlog.eventlog.events import (
    EventData,
    RunCompleted,
    RunStarted,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
)
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.archive.helpers import T0
from tests.golden.test_golden import committed_events


def _assert_same(columns: Columns) -> None:
    expected = tasks_table(columns.table())
    actual = tasks_of(columns)
    assert actual.schema == TASKS_SCHEMA
    assert actual.to_pylist() == expected.to_pylist()


async def _columns_of(log: SqliteEventLog, after: dict[str, int] | None = None) -> Columns:
    """The log's runs as the archiver adds them: stored rows, no cipher."""
    columns = Columns()
    for info in sorted(await log.list_runs(), key=lambda i: i.run_id):
        rows: list[tuple[Any, ...]] = []
        first = (after or {}).get(info.run_id, 0)
        async for batch in log.read_rows(info.run_id, after_seq=first):
            rows += batch
        columns.add_rows(
            info.run_id,
            rows,
            workflow=info.workflow,
            version=info.version,
            status="running",
            steps=0,
            cipher=None,
            where="test",
        )
    return columns


async def test_the_golden_log_folds_as_the_sql_groups_it(tmp_path: Path) -> None:
    async with SqliteEventLog(tmp_path / "hot.db") as log:
        for events in committed_events().values():
            for event in events:
                info = await log.find_run(event.run_id)
                while info is None or info.writer_epoch < event.writer_epoch:
                    await log.claim_writer(event.run_id)
                    info = await log.find_run(event.run_id)
                await log.append([event])
        columns = await _columns_of(log)
    assert len(tasks_of(columns)) > 0
    _assert_same(columns)


def _history(run_id: str, items: list[EventData], *, back: bool = False) -> list[Event]:
    step = timedelta(seconds=-1 if back else 1)
    return [Event(run_id, seq, d, T0 + seq * step, 1) for seq, d in enumerate(items, start=1)]


_RETRIED: list[EventData] = [
    RunStarted("wf", "1", {}, "sync", "fp"),
    TaskStarted("a", "search", "s0", 0, 0, 0),
    TaskFailed("a", "boom", 1, 3.0),
    TaskStarted("a", "search-again", "s1", 0, 0, 0, attempt=2),
    TaskFailed("a", None, 2, 4.0),  # no error: not the failure the view shows
    TaskStarted("b", "fetch", "s0", 0, 1, 0),
    TaskCompleted("b", {"ok": True}, 7.5),
    TaskFailed("b", "late failure after success", 1, 0.0),
    TaskStarted("c", "never-ends", "s2", 0, 0, 0),
    RunCompleted({}),
]


async def test_sealed_failures_and_retries_fold_as_the_sql_groups_them(tmp_path: Path) -> None:
    keyring = tmp_path / "keyring.json"
    async with SqliteEventLog(
        tmp_path / "hot.db", cipher=PayloadCipher(LocalKeyStore(keyring))
    ) as log:
        epoch = await log.claim_writer("sealed")
        events = _history("sealed", _RETRIED)
        await log.append([Event(e.run_id, e.seq, e.data, e.ts, epoch) for e in events])
    async with SqliteEventLog(tmp_path / "hot.db") as log:
        for run_id, back in (("clear", False), ("backwards", True)):
            epoch = await log.claim_writer(run_id)
            events = _history(run_id, _RETRIED, back=back)
            await log.append([Event(e.run_id, e.seq, e.data, e.ts, epoch) for e in events])
        whole = await _columns_of(log)
        later = await _columns_of(log, {"clear": 3, "sealed": 4, "backwards": 6})
    sealed = [
        row
        for row in tasks_of(whole).to_pylist()
        if row["run_id"] == "sealed" and row["error_payload"]
    ]
    assert sealed, "a sealed failure's blob is kept for a key holder"
    _assert_same(whole)
    _assert_same(later)  # outcomes whose starts are in an earlier file


_EVENT = st.tuples(
    st.sampled_from(["TaskStarted", "TaskCompleted", "TaskFailed", "Other"]),
    st.sampled_from(["k1", "k2", "k3"]),
    st.one_of(st.none(), st.floats(0, 1e6, allow_nan=False)),
    st.one_of(st.none(), st.text(max_size=5)),
    st.integers(-5, 5),
)


def _data(kind: str, key: str, duration: float | None, error: str | None) -> EventData:
    if kind == "TaskStarted":
        return TaskStarted(key, f"name-{key}-{error}", f"step-{error}", 0, 0, 0)
    if kind == "TaskCompleted":
        return TaskCompleted(key, {"error": error}, duration)  # type: ignore[arg-type]
    if kind == "TaskFailed":
        return TaskFailed(key, error, 1, duration)  # type: ignore[arg-type]
    return RunCompleted({"key": key})


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_EVENT, min_size=1, max_size=12), min_size=1, max_size=3))
def test_generated_task_histories_fold_as_the_sql_groups_them(
    runs: list[list[tuple[str, str, float | None, str | None, int]]],
) -> None:
    columns = Columns()
    for r, items in enumerate(runs):
        run_id = f"run-{r}"
        for seq, (kind, key, duration, error, shift) in enumerate(items, start=1):
            event = Event(
                run_id, seq, _data(kind, key, duration, error), T0 + timedelta(seconds=shift), 1
            )
            columns.add_event(event, None, "wf", "1")
    _assert_same(columns)


def test_an_empty_file_has_an_empty_tasks_table() -> None:
    columns = Columns()
    assert tasks_of(columns).equals(pa.Table.from_pylist([], schema=TASKS_SCHEMA))
