"""SIGKILL in the middle of an archive pass, then a re-run: no duplicates, no gaps."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentlog.archive import ArchivedEventReader, Archiver, LocalArchiveStore, open_sql
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.archive.helpers import T0, read_all, record_run
from tests.support.archive import NOW

pytestmark = pytest.mark.crash

CHILD = Path(__file__).with_name("crash_child.py")
TRIALS = 5
RUNS = 24


def _kill_after(db: Path, folder: Path, files_before_kill: int, extra_sleep: float) -> int:
    """Start the child, SIGKILL it once it reported that many files (+ a little)."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root / "src"))
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(db), str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        seen = 0
        for line in proc.stdout:  # bounded: the child writes one line per file
            if line.startswith("file"):
                seen += 1
            if (line.startswith("ready") and files_before_kill == 0) or seen >= files_before_kill:
                time.sleep(extra_sleep)
                break
        proc.send_signal(signal.SIGKILL)
        return proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.parametrize("trial", range(TRIALS))
async def test_sigkill_mid_archive_then_rerun(tmp_path: Path, trial: int) -> None:
    rng = random.Random(1000 + trial)
    db, folder = tmp_path / "hot.db", tmp_path / "archive"
    log = SqliteEventLog(db)
    expected = {}
    for i in range(RUNS):
        expected[f"r{i:02d}"] = await record_run(
            log, f"r{i:02d}", workflow=f"wf{i % 2}", tag=i, start=T0
        )
    await log.close()

    code = _kill_after(db, folder, rng.randrange(0, RUNS // 2), rng.uniform(0, 0.02))
    assert code in (-signal.SIGKILL, 0)

    log = SqliteEventLog(db)
    try:
        store = LocalArchiveStore(folder)
        await Archiver(log, store).run(now=NOW)
        # everything archived, then pruned: only the tombstones stay
        runs = await log.list_runs()
        assert sorted(r.run_id for r in runs) == sorted(expected)
        assert all(r.archived for r in runs)
        history = ArchivedEventReader(log, store)
        for run_id, events in expected.items():
            assert await read_all(history, run_id) == events
        with await open_sql(store, log) as db_sql:
            total, distinct = db_sql.sql(
                "SELECT count(*), count(DISTINCT (run_id, seq)) FROM events"
            ).fetchone()
            gaps = db_sql.sql(
                "SELECT run_id FROM events GROUP BY run_id HAVING max(seq) <> count(*)"
            ).fetchall()
        assert total == distinct == sum(len(v) for v in expected.values())
        assert gaps == []
        assert not [k for k in store.list() if ".tmp-" in k]
        await history.close()
    finally:
        await log.close()
