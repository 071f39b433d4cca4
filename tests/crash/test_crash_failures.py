"""SIGKILL while a run fails with its own exception and another is cancelled mid-task
(issue 24, items 4 and 8), on SQLite.

Each generation is a fresh process (tests/crash/failures_worker.py) that
starts or recovers both runs, cancels the long one once its task runs, and
waits for the failing one; the first generations SIGKILL themselves at a
seeded random seq, before or after its batch is appended. Afterwards a
caller in this process, which knows the workflows, catches the failure as
its original class and gets the cancelled outcome of the other run: what
was recorded survived every kill. The number of processes is bounded.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agentlog.errors import RunCancelledError, RunFailedError
from agentlog.eventlog.events import RunCancelled, RunFailed, RunStatus
from agentlog.runtime import Runtime, RuntimeConfig
from tests.crash.failures_worker import (
    FAILING,
    LONG,
    PaymentDeclined,
    failing_workflow,
    long_workflow,
)
from tests.crash.worker import LEASE_LOST, child_env

pytestmark = [pytest.mark.crash, pytest.mark.slow]  # 6-12 s a seed on SQLite

#: Generations that kill themselves; one more at most finishes the runs.
KILLS = 4
#: The highest seq a kill is drawn at: an uninterrupted generation records
#: 6 events in the failing run and 3 in the cancelled one (a recovery adds one).
KILL_SEQS = 6
_WORKER = "from tests.crash.failures_worker import main; main()"


def _generation(
    url: str, gen: int, kill: tuple[int, str] | None
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", _WORKER, url, str(gen)]
    if kill is not None:
        argv += ["--kill-seq", str(kill[0]), "--kill-when", kill[1]]
    try:
        return subprocess.run(
            argv, env=child_env(), capture_output=True, text=True, timeout=120, check=False
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"generation {gen} (kill {kill}) hung: {exc.stderr!r}")


async def _check(url: str) -> None:
    config = RuntimeConfig(owner="caller", worker=False)
    flows = [failing_workflow(), long_workflow()]
    async with await Runtime.open(url, workflows=flows, config=config) as rt:
        with pytest.raises(PaymentDeclined) as caught:
            await rt.result(FAILING)
        assert str(caught.value) == "card 4242 declined"
        cause = caught.value.__cause__
        assert isinstance(cause, RunFailedError)
        assert cause.error_type == "tests.crash.failures_worker.PaymentDeclined"
        assert cause.causes[0][0] == "builtins.ConnectionError"
        with pytest.raises(RunCancelledError):
            await rt.result(LONG)
        assert (await rt.get_state(LONG)).status == RunStatus.CANCELLED
        ends = [e.data async for e in rt.log.read(FAILING) if isinstance(e.data, RunFailed)]
        assert len(ends) == 1 and ends[0].failure is not None
        assert ends[0].failure["type"] == cause.error_type
        cancels = [e.data async for e in rt.log.read(LONG) if isinstance(e.data, RunCancelled)]
        assert len(cancels) == 1


@pytest.mark.parametrize("seed", [24, 48])
def test_sigkill_while_a_run_fails_and_another_is_cancelled_mid_task(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    url = f"sqlite:///{tmp_path / 'failures.db'}"
    outcomes: list[str] = []
    for gen in range(KILLS + 1):
        kill = (rng.randint(1, KILL_SEQS), rng.choice(["before", "after"]))
        done = _generation(url, gen, kill if gen < KILLS else None)
        if done.returncode == 0:
            report = json.loads(done.stdout.splitlines()[-1])
            assert report == {LONG: RunStatus.CANCELLED, FAILING: RunStatus.FAILED}
            outcomes.append("finished")
            break
        assert done.returncode in (-signal.SIGKILL, LEASE_LOST), done.stderr
        outcomes.append(f"killed at seq {kill[0]} {kill[1]}")
    assert outcomes[-1] == "finished", outcomes
    assert len(outcomes) > 1, f"no generation was killed: {outcomes}"
    asyncio.run(_check(url))
