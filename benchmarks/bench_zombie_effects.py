"""SIGSTOP a writer at a random point, let another take the run over, SIGCONT it.

Measures the effect fence (issue 19, item 5): a writer paused after it
cleared an effect must not deliver that effect once it wakes, because by
then another process took the run over and recorded the effect's result.

One trial, on a fresh SQLite log (``tests/crash`` machinery):

1. a *zombie* process (``python -m tests.crash.worker``, the crash workflow:
   a plan, four parallel searches, three refine rounds, an approval
   interrupt it answers itself, an email; every effect is a POST to the
   dedup service, a separate process that stamps each delivery with the time
   it arrived) starts the run in one of the three durability modes, in turn;
2. after a random delay inside the run's expected duration, it is SIGSTOPped;
3. a *taker* process (the same worker, generation 2, with a longer lease)
   waits out the zombie's lease, takes the run over and finishes it (a taker
   that lost its own lease on the loaded machine is followed by the next):
   every effect's result is on record when it exits;
4. the zombie is SIGCONTed and given time to act.

A trial counts when the taker took the run over and finished it (the
SIGSTOP landed before the zombie finished, and not while it held SQLite's
write lock, which stops every other writer until it goes on): every
effect's result is then on record before the SIGCONT, so any delivery by the
zombie that arrives after the SIGCONT is an effect delivered after its
result was recorded. The effect function stamps when it began (``began``,
just after the writer's last check), which tells two kinds apart:

* a *violation*: the effect began after the SIGCONT, so the writer's last
  check did not stop it (what the fence must never let through);
* *inside the call*: it began before the SIGSTOP, so the last check passed
  before the pause, which landed inside the call (building the request,
  waiting for the GIL). Nothing in the writer can see that pause; the
  idempotency key makes the duplicate harmless (the dedup service answers
  with the first result), as the docs say.

``python -m benchmarks.bench_zombie_effects [--trials 100] [--seed 7]``
prints each trial and a summary; ``collect`` gives ``python -m benchmarks``
one row.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.crash import dedup_server
from tests.crash.worker import LEASE_LOST, child_env

from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import TaskCompleted, WriterClaimed
from benchmarks.harness import Row

__all__ = ["Trial", "collect", "main", "run_trials"]

REPO = Path(__file__).resolve().parents[1]
MODES = ("sync", "async", "exit")
#: The zombie's lease: short, so a stopped zombie loses the run quickly.
LEASE_S = 0.5
#: The takers' lease: long enough that a taker on the loaded machine keeps it.
TAKER_LEASE_S = 3.0
#: Takers started at most in one trial (one that lost its lease is followed
#: by the next, as in the crash tests).
TAKERS = 5
#: The SIGSTOP lands this long at most after the zombie started the run; the
#: crash workflow takes about this long on a loaded 2-core machine.
STOP_WITHIN_S = 0.5
#: How long the woken zombie is given to act before it is killed.
AFTER_WAKE_S = 3.0
#: A hang guard for one worker process.
PROCESS_TIMEOUT_S = 180.0


@dataclass
class Trial:
    """What one trial saw."""

    n: int
    mode: str
    stop_after_s: float
    taken_over: bool
    """The taker took the run over and finished it: the trial counts."""
    blocked: bool
    """The zombie stopped inside an SQLite write transaction: nobody can write
    until it goes on, so the taker gave up (not counted)."""
    zombie_deliveries: int
    violations: list[str]
    """Keys the zombie delivered after its SIGCONT from an effect begun after it."""
    inside_call: list[str]
    """Keys the zombie delivered after its SIGCONT from an effect begun before
    its SIGSTOP (the pause fell inside the call; each one a duplicate the
    service answered with the first result)."""


def _worker(
    url: str, run_id: str, mode: str, dedup: str, gen: int, logs: Path, lease_s: float
) -> subprocess.Popen[str]:
    with open(logs / f"{run_id}-gen{gen}.log", "w") as stderr:  # the child keeps its copy
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.crash.worker",
                url,
                run_id,
                mode,
                dedup,
                str(gen),
                "--resume-with",
                "start",
                "--lease-seconds",
                str(lease_s),
            ],
            cwd=REPO,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )


def _line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


def _reap(proc: subprocess.Popen[str], timeout: float) -> None:
    try:
        proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


async def _taken_over(url: str, run_id: str) -> tuple[bool, set[str]]:
    """Whether a taker claimed the run, and the keys with a recorded result."""
    log = await open_log(url)
    try:
        events = [e async for e in log.read(run_id)]
    finally:
        await log.close()
    owners = {e.data.owner for e in events if isinstance(e.data, WriterClaimed)}
    recorded = {e.data.key for e in events if isinstance(e.data, TaskCompleted)}
    return any(not owner.startswith("gen-1:") for owner in owners), recorded


def _deliveries(db: Path, run_id: str, gen: int) -> list[tuple[str, float, float, bool]]:
    """The process's deliveries: key, arrival time, when its function began, duplicate."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT key, ts, began, duplicate FROM deliveries WHERE run = ? AND gen = ? ORDER BY n",
            (run_id, gen),
        ).fetchall()
    finally:
        conn.close()
    return [(str(key), float(ts), float(began), bool(dup)) for key, ts, began, dup in rows]


def _take_over(n: int, url: str, run_id: str, mode: str, dedup: str, folder: Path) -> bool:
    """Run takers until one finishes the run; True if the zombie was stopped
    holding SQLite's write lock (then no taker can write)."""
    for gen in range(2, 2 + TAKERS):
        taker = _worker(url, run_id, mode, dedup, gen, folder, TAKER_LEASE_S)
        try:
            taker.communicate(timeout=PROCESS_TIMEOUT_S)
        finally:
            if taker.poll() is None:
                taker.kill()
                taker.communicate()
        if taker.returncode == 0:
            return False
        why = (folder / f"{run_id}-gen{gen}.log").read_text()[-4000:]
        if "database is locked" in why:
            return True
        if taker.returncode != LEASE_LOST:
            raise RuntimeError(f"trial {n}: taker {gen} failed ({taker.returncode}):\n{why}")
    raise RuntimeError(f"trial {n}: {TAKERS} takers in a row lost their lease")


def one_trial(n: int, rng: random.Random, folder: Path, dedup: str, dedup_db: Path) -> Trial:
    """Run trial ``n`` (see the module docstring)."""
    url = f"sqlite:///{folder / f'trial-{n}.db'}"
    run_id, mode = f"zombie-{n}", MODES[n % len(MODES)]
    zombie = _worker(url, run_id, mode, dedup, 1, folder, LEASE_S)
    stop_after = rng.uniform(0.0, STOP_WITHIN_S)
    try:
        assert _line(zombie) == "READY", f"trial {n}: the zombie did not start"
        assert _line(zombie) == "RUNNING", f"trial {n}: the zombie did not start the run"
        time.sleep(stop_after)  # the random pause point
        zombie.send_signal(signal.SIGSTOP)
        stopped_at = time.time()
        blocked = _take_over(n, url, run_id, mode, dedup, folder)
        woke_at = time.time()
        zombie.send_signal(signal.SIGCONT)
        _reap(zombie, AFTER_WAKE_S)
    finally:
        if zombie.poll() is None:
            zombie.send_signal(signal.SIGCONT)
            zombie.kill()
            zombie.communicate()
    taken_over, recorded = asyncio.run(_taken_over(url, run_id))
    delivered = _deliveries(dedup_db, run_id, 1)
    counted = taken_over and not blocked  # the taker recorded every result before the SIGCONT
    late = [d for d in delivered if counted and d[1] >= woke_at and d[0] in recorded]
    violations = [key for key, _, began, _ in late if began >= stopped_at]
    inside_call = [key for key, _, began, duplicate in late if began < stopped_at and duplicate]
    odd = [key for key, _, began, duplicate in late if began < stopped_at and not duplicate]
    if odd:  # the taker recorded a result the service never gave it
        raise RuntimeError(f"trial {n}: late first deliveries {odd}")
    return Trial(n, mode, stop_after, counted, blocked, len(delivered), violations, inside_call)


def run_trials(trials: int, seed: int, *, echo: bool = False) -> list[Trial]:
    """Run until ``trials`` trials counted (the taker took the run over)."""
    rng = random.Random(seed)
    folder = Path(tempfile.mkdtemp(prefix="zombie-effects-"))
    done: list[Trial] = []
    try:
        with dedup_server.running(folder / "dedup.db") as dedup:
            n = 0
            while sum(t.taken_over for t in done) < trials:
                trial = one_trial(n, rng, folder, dedup, folder / "dedup.db")
                done.append(trial)
                if echo:
                    print(
                        f"trial {n:3d} {trial.mode:5s} stop after {trial.stop_after_s:.3f}s "
                        f"taken over={trial.taken_over!s:5s} blocked={trial.blocked!s:5s} "
                        f"zombie deliveries="
                        f"{trial.zombie_deliveries:2d} violations={trial.violations} "
                        f"inside the call={trial.inside_call}",
                        flush=True,
                    )
                n += 1
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return done


def _summary(done: list[Trial]) -> Row:
    counted = [t for t in done if t.taken_over]
    return Row(
        "zombie",
        "SIGSTOP a writer, take the run over, SIGCONT it (SQLite, sync/async/exit)",
        "violating trials",
        float(sum(bool(t.violations) for t in counted)),
        None,
        {
            "trials": len(counted),
            "not_counted": len(done) - len(counted),
            "blocked": sum(t.blocked for t in done),
            "violations": sum(len(t.violations) for t in counted),
            "inside_call_trials": sum(bool(t.inside_call) for t in counted),
            "inside_call": sum(len(t.inside_call) for t in counted),
            "target": "0 violations",
        },
    )


def collect(quick: bool) -> list[Row]:
    """One row: trials in which the woken zombie began an effect."""
    return [_summary(run_trials(20 if quick else 100, seed=7))]


def main(argv: list[str] | None = None) -> int:
    """Run the trials, print each and the summary; exit 1 on any violation."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_zombie_effects")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    started = time.monotonic()
    done = run_trials(args.trials, args.seed, echo=True)
    row = _summary(done)
    x = row.extra
    print(
        f"{x['trials']} trials counted ({x['not_counted']} not: finished before the SIGSTOP, "
        f"or {x['blocked']} stopped holding SQLite's write lock); {int(row.median)} with a "
        f"violation ({x['violations']} effects begun after the SIGCONT); "
        f"{x['inside_call_trials']} with a pause inside the call ({x['inside_call']} duplicate "
        f"deliveries, answered by the idempotency key); {time.monotonic() - started:.0f}s"
    )
    return 1 if row.median else 0


if __name__ == "__main__":
    sys.exit(main())
