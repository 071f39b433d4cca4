"""A task's own retry policy is final for that task (issue 19, item 1), on memory and SQLite.

Each test counts the real tries of a task's body in a list, so a step retry
that ran a task again, or a run retry that multiplied its attempts, shows up
as a number.
"""

from __future__ import annotations

from typing import Any

from agentlog.errors import TaskFailedError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunStatus, StepFailed, TaskFailed, TaskStarted
from agentlog.replay._verify import verify_runs
from agentlog.runtime import RetryPolicy, Runtime, StepContext, Workflow, end, task
from tests.support.runtime import FAST_RETRY, config, event_log, events_of, run_to_rest

__all__ = ["event_log"]


class Declined(Exception):
    """A payment the bank refused: trying again charges nobody more, it just fails."""


def _policy(max_attempts: int) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=max_attempts,
        initial_interval=0.001,
        backoff_coefficient=1.0,
        non_retryable=(Declined,),
    )


def _payments(tries: list[str], error: Exception, max_attempts: int) -> Workflow:
    """One step that charges a card; every try of the charge fails with ``error``.

    The step has the workflow's retry policy, 3 attempts (FAST_RETRY).
    """
    wf = Workflow("payments", state={"receipt": "replace"}, retry=FAST_RETRY)

    @task(name="charge", retry=_policy(max_attempts))
    def charge(cents: int) -> str:
        tries.append(f"charge {cents}")
        raise error

    @wf.step
    async def pay(ctx: StepContext) -> Any:
        return end(receipt=await charge(500))

    return wf


async def _task_events(log: EventLog, run_id: str) -> list[Any]:
    return [
        e.data for e in await events_of(log, run_id) if isinstance(e.data, TaskStarted | TaskFailed)
    ]


async def test_a_non_retryable_failure_is_charged_once_per_run_attempt(
    event_log: EventLog,
) -> None:
    tries: list[str] = []
    wf = _payments(tries, Declined("card declined"), max_attempts=3)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="p", durability="sync")
        failed = await run_to_rest(rt, "p")
        assert failed.status == RunStatus.FAILED
        assert "Declined: card declined" in failed.error
        assert tries == ["charge 500"]  # not once per step attempt
        steps = [e.data for e in await events_of(event_log, "p") if isinstance(e.data, StepFailed)]
        assert [(s.attempt, s.retryable) for s in steps] == [(1, False)]
        # An explicit retry of the run is a request to try again: one more try.
        await rt.retry("p")
        assert (await run_to_rest(rt, "p")).status == RunStatus.FAILED
    assert tries == ["charge 500"] * 2


async def test_step_retries_do_not_multiply_a_task_s_attempts(event_log: EventLog) -> None:
    tries: list[str] = []
    wf = _payments(tries, ConnectionError("bank unreachable"), max_attempts=2)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="m", durability="sync")
        assert (await run_to_rest(rt, "m")).status == RunStatus.FAILED
        assert len(tries) == 2  # its own max_attempts; the step's 3 attempts add none
        await rt.retry("m")
        assert (await run_to_rest(rt, "m")).status == RunStatus.FAILED
        assert len(tries) == 4  # the run retry gave it max_attempts more, no more
    recorded = await _task_events(event_log, "m")
    # attempt numbers count every try; the last try of each run attempt is final
    assert [(type(d).__name__, d.attempt) for d in recorded] == [
        ("TaskStarted", 1),
        ("TaskFailed", 1),
        ("TaskStarted", 2),
        ("TaskFailed", 2),
        ("TaskStarted", 3),
        ("TaskFailed", 3),
        ("TaskStarted", 4),
        ("TaskFailed", 4),
    ]
    assert [d.retryable for d in recorded if isinstance(d, TaskFailed)] == [
        True,
        False,
        True,
        False,
    ]


async def test_a_step_retry_raises_the_recorded_failure_instead_of_running_the_task(
    event_log: EventLog,
) -> None:
    tries: list[str] = []
    seen: list[BaseException] = []
    wf = Workflow("refund", state={"note": "replace"}, retry=FAST_RETRY)

    @task(name="refund", retry=_policy(3))
    def refund(cents: int) -> str:
        tries.append(f"refund {cents}")
        raise Declined("account closed")

    @wf.step
    async def settle(ctx: StepContext) -> Any:
        try:
            await refund(700)
        except Exception as exc:  # the step handles it, then fails for its own reason
            seen.append(exc)
            raise RuntimeError("ledger busy") from exc
        return end(note="refunded")

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="r", durability="sync")
        failed = await run_to_rest(rt, "r")
    assert tries == ["refund 700"]
    assert failed.status == RunStatus.FAILED
    # A retry of the step sees the recorded failure as its own class again
    # (defined in the workflow's module), caused by the TaskFailedError.
    assert [type(e) for e in seen] == [Declined, Declined, Declined]
    assert str(seen[1]) == "account closed"
    again = seen[1].__cause__
    assert isinstance(again, TaskFailedError)
    assert (again.task, again.error, again.attempts) == ("refund", "Declined: account closed", 1)
    assert again.error_type == f"{Declined.__module__}.Declined"
    assert again.message == "account closed"
    assert "agentlog retry r" in str(again)


async def test_a_task_without_a_policy_is_retried_by_its_step(event_log: EventLog) -> None:
    tries: list[str] = []
    wf = Workflow("lookup", state={"hit": "replace"}, retry=FAST_RETRY)

    def search() -> str:
        tries.append("search")
        if len(tries) < 3:
            raise ConnectionError("index warming up")
        return "hit"

    @wf.step
    async def find(ctx: StepContext) -> Any:
        return end(hit=await ctx.task("search", search))

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="s", durability="sync")
        done = await run_to_rest(rt, "s")
    assert done.status == RunStatus.COMPLETED and done.values == {"hit": "hit"}
    assert tries == ["search"] * 3  # once per step attempt: the step's policy is its policy


async def test_verify_matches_a_run_whose_task_gave_up(event_log: EventLog) -> None:
    tries: list[str] = []
    wf = _payments(tries, ConnectionError("bank unreachable"), max_attempts=2)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="v", durability="sync")
        await run_to_rest(rt, "v")
        await rt.retry("v")
        await run_to_rest(rt, "v")
    report = await verify_runs(event_log, [wf], runs="all")
    assert [(r.run_id, r.status) for r in report.runs] == [("v", "matched")]
    assert len(tries) == 4  # verify ran no task body
