"""``ctx.patched`` under SIGKILL on SQLite (issue 24, item 5).

A worker is killed around the patch marker (its batch lost, or durable with
nothing after it), or, under code without the patch, around the old path's
first task. A worker with the patched code then recovers the run. Whatever
the kill, the run takes one path: the path the history had committed to, or
the new one if it had committed to none; its effects and tasks are that
path's only, the marker is recorded once or never, and the history verifies
under the patched code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import pytest

from agentlog.eventlog.events import Event, TaskStarted
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.replay import verify_history
from agentlog.runtime import Runtime
from tests.crash.patch_worker import shop_workflow
from tests.crash.worker import child_env
from tests.support.runtime import config, events_of, run_to_rest

pytestmark = pytest.mark.crash

REPO = Path(__file__).resolve().parents[2]
Code = Literal["old", "patched"]


async def _history(db: Path, run_id: str) -> list[Event]:
    log = SqliteEventLog(db)
    try:
        return await events_of(log, run_id)
    finally:
        await log.close()


async def _first_seq(code: Code, task: str, tmp_path: Path) -> int:
    """The seq of ``task``'s TaskStarted in a run of ``code`` that is not killed."""
    db = tmp_path / f"reference-{code}.db"
    wf = shop_workflow(code, tmp_path / f"reference-{code}.effects")
    log = SqliteEventLog(db)
    try:
        async with Runtime(log, workflows=[wf], config=config()) as rt:
            await rt.start(wf, run_id="ref", durability="sync")
            await run_to_rest(rt, "ref")
        events = await events_of(log, "ref")
    finally:
        await log.close()
    return next(e.seq for e in events if isinstance(e.data, TaskStarted) and e.data.name == task)


def _worker(
    db: Path, code: Code, effects: Path, gen: int, kill: tuple[int, str] | None
) -> dict[str, Any] | None:
    """One worker process; its final report, or None when it killed itself."""
    extra = [] if kill is None else ["--kill-seq", str(kill[0]), "--kill-when", kill[1]]
    args = [sys.executable, "-m", "tests.crash.patch_worker", str(db), "run", code]
    proc = subprocess.run(
        [*args, str(effects), str(gen), *extra],
        cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    if kill is not None:
        assert proc.returncode == -9, f"the worker was not killed: {proc.returncode}\n{proc.stderr}"
        return None
    assert proc.returncode == 0, proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return report


@pytest.mark.parametrize(
    ("first_code", "task", "when", "path"),
    [
        ("patched", "agentlog.patched:fix-42", "before", "new"),  # the marker's batch lost
        ("patched", "agentlog.patched:fix-42", "after", "new"),  # the marker durable, no effect
        ("old", "charge", "before", "new"),  # the old path never recorded: a fresh point
        ("old", "charge", "after", "old"),  # the old path's task recorded: it is kept
    ],
)
async def test_a_run_killed_around_the_patch_takes_one_path(
    first_code: Code, task: str, when: str, path: str, tmp_path: Path
) -> None:
    db, effects = tmp_path / "crash.db", tmp_path / "effects.txt"
    kill_seq = await _first_seq(first_code, task, tmp_path)
    assert _worker(db, first_code, effects, 1, (kill_seq, when)) is None
    report = _worker(db, "patched", effects, 2, None)
    assert report is not None and report["status"] == "completed", report
    assert report["values"]["path"] == path
    history = await _history(db, "run")
    started = [e.data.name for e in history if isinstance(e.data, TaskStarted)]
    other = "charge" if path == "new" else "charge.v2"
    assert other not in started, started  # never both paths
    markers = started.count("agentlog.patched:fix-42")
    assert markers == (1 if path == "new" else 0), started
    kinds = {line.split()[0] for line in effects.read_text().splitlines()}
    assert kinds <= {"lookup", path}, kinds  # no effect of the other path ever ran
    assert path in kinds
    assert await verify_history(shop_workflow("patched", effects), history) == []
