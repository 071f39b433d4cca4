"""A confirmed file's runs leave the hot log together: one transaction a file, not one a run."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from agentlog.archive import Archiver, ArchiverConfig, LocalArchiveStore
from agentlog.archive._parquet import Manifest
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.archive.helpers import T0, record_run
from tests.support.archive import NOW


def count_commits(log: SqliteEventLog) -> list[str]:
    """Record each durable transaction the log runs (the real one still runs)."""
    seen: list[str] = []
    real = log._transact

    def counting(
        body: Callable[[sqlite3.Connection], Any], *, durable: bool | None, doing: str
    ) -> Any:
        if durable:
            seen.append(doing)
        return real(body, durable=durable, doing=doing)

    log._transact = counting  # type: ignore[method-assign]
    return seen


async def test_a_file_of_many_runs_is_pruned_in_one_transaction(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    runs = [f"r{i}" for i in range(12)]
    for i, run_id in enumerate(runs):
        await record_run(hot, run_id, tag=i)
    commits = count_commits(hot)
    summary = await Archiver(hot, store).run(now=NOW)
    assert (summary.files, summary.runs, summary.pruned) == (1, 12, 12)
    assert commits == ["prune failed"]  # the doing-label of the one prune transaction
    assert [(await hot.get_run(run_id)).archived for run_id in runs] == [True] * 12


async def test_each_file_is_pruned_in_its_own_transaction(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    for i in range(6):  # three days: three files of two runs
        await record_run(hot, f"r{i}", start=T0 + timedelta(days=i % 3), tag=i)
    commits = count_commits(hot)
    summary = await Archiver(hot, store, ArchiverConfig(max_events_per_file=1_000)).run(
        now=NOW + timedelta(days=3)
    )
    assert (summary.files, summary.pruned) == (3, 6)
    assert len(commits) == 3
    assert len(Manifest.load(store).entries) == 3
