"""A step's code error under a real ``agentlog worker`` process (issue 19, item 4).

The run used to stay ``running`` for ever on a worker: the client's
``wait()`` ended in a bare TimeoutError and ``agentlog runs`` said "no worker
yet (needs one that knows ...)" although one did. Now the worker records the
failure (StepFailed, RunFailed naming the step and the error) in every
durability mode, the client's ``wait()`` raises it as RunFailedError, and
``agentlog runs`` lists the run as failed with no driver wanted.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from agentlog.errors import RunFailedError
from agentlog.eventlog.events import RunFailed, StepFailed
from agentlog.runtime import Runtime, RuntimeConfig
from tests.crash.worker import child_env
from tests.support.code_error_flows import MISTAKES, broken, workflows
from tests.support.fleet import REPO, Fleet, history

pytestmark = pytest.mark.fleet

MODES = ("sync", "async", "exit")
#: A bound on one run's wait: a hang fails the test instead of stalling it.
WAIT_S = 60.0


@pytest.fixture
async def broken_client(log_url: str) -> AsyncIterator[Runtime]:
    """A client runtime that knows the broken workflow and executes nothing."""
    config = RuntimeConfig(owner="client", execute=False, worker=False)
    async with await Runtime.open(log_url, workflows=workflows, config=config) as rt:
        yield rt


def _runs_json(log_url: str) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-m", "agentlog", "runs", "--log", log_url, "--json"],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,  # a hang guard
    )
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, object]] = json.loads(done.stdout)
    return rows


async def test_a_code_error_on_a_worker_process_fails_the_run_for_its_client(
    fleet: Fleet, broken_client: Runtime, log_url: str
) -> None:
    worker = fleet.start(apps="tests.support.code_error_flows:workflows")
    runs = {f"{m}-{mode}": (m, mode) for m in sorted(MISTAKES) for mode in MODES}
    for run_id, (mistake, mode) in runs.items():
        await broken_client.submit(
            broken,
            run_id=run_id,
            input={"mistake": mistake},
            durability=mode,  # type: ignore[arg-type]
        )
    for run_id, (mistake, _) in runs.items():
        says = rf"step 'only'.*{re.escape(MISTAKES[mistake])}"
        with pytest.raises(RunFailedError, match=says):
            await broken_client.wait(run_id, timeout=WAIT_S)
        events = [e.data for e in await history(broken_client.log, run_id)]
        step_failed, run_failed = events[-2:]
        assert isinstance(step_failed, StepFailed) and not step_failed.retryable, events
        assert isinstance(run_failed, RunFailed) and MISTAKES[mistake] in run_failed.error
    assert worker.proc.poll() is None, worker.log_tail()  # the worker goes on serving
    listed = {row["run_id"]: row for row in _runs_json(log_url)}
    for run_id in runs:
        assert (listed[run_id]["status"], listed[run_id]["driver"]) == ("failed", ""), listed
