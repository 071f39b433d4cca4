"""Failures and cancels through ``agentlog worker`` processes, across a SIGKILL
(issue 24, items 4 and 8), on SQLite and on a Kafka worker fleet.

A client submits a run that fails with the workflow's own exception and a
run whose task sleeps far longer than the test; once that task runs, every
worker is SIGKILLed and a fresh one started. The client then cancels the
long run (on Kafka a command the owning worker applies, interrupting the
task it runs again) and awaits both: it catches the original exception
class, rebuilt from the log, and the cancelled outcome.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentlog.errors import RunCancelledError, RunFailedError
from agentlog.eventlog.events import RunStatus, TaskStarted
from agentlog.runtime import Runtime, RuntimeConfig
from tests.crash.failures_worker import FAILING, LONG, PaymentDeclined, workflows
from tests.support.fleet import Fleet, history, until

pytestmark = [pytest.mark.fleet, pytest.mark.usefixtures("backend")]  # on SQLite and Kafka

APP = "tests.crash.failures_worker:workflows"
KAFKA_PARTITIONS = 2
#: A bound on each wait: a hang fails the test instead of stalling it.
WAIT_S = 60.0


@pytest.fixture
async def caller(log_url: str) -> AsyncIterator[Runtime]:
    """A client that knows the workflows (so their classes are rebuilt) and executes nothing."""
    config = RuntimeConfig(owner="client", execute=False, worker=False)
    async with await Runtime.open(log_url, workflows=workflows, config=config) as rt:
        yield rt


async def test_a_worker_sigkill_keeps_the_failure_s_class_and_the_cancel(
    fleet: Fleet, caller: Runtime
) -> None:
    first = fleet.start(apps=APP)
    await caller.submit(workflows[0], run_id=FAILING, durability="sync")
    await caller.submit(workflows[1], run_id=LONG, durability="sync")

    async def long_task_runs() -> bool:
        info = await caller.log.find_run(LONG)
        if info is None or info.last_seq == 0:
            return False
        return any(isinstance(e.data, TaskStarted) for e in await history(caller.log, LONG))

    await until(long_task_runs, "the long run's task runs", WAIT_S)
    first.kill()  # SIGKILL, mid-task
    fleet.start(apps=APP)
    await caller.cancel(LONG, "no longer needed")

    with pytest.raises(PaymentDeclined) as caught:
        await caller.result(FAILING, timeout=WAIT_S)
    assert str(caught.value) == "card 4242 declined"
    cause = caught.value.__cause__
    assert isinstance(cause, RunFailedError)
    assert cause.error_type == "tests.crash.failures_worker.PaymentDeclined"
    with pytest.raises(RunCancelledError) as cancelled:
        await caller.result(LONG, timeout=WAIT_S)
    assert cancelled.value.reason == "no longer needed"
    assert (await caller.get_state(LONG)).status == RunStatus.CANCELLED
