"""verify follows a recorded failure's retry verdict (issue 19, item 2, follow-up).

A task's retry policy decided, when the run was recorded, whether a failure
was tried again (``TaskFailed.retryable``); a step's policy likewise
(``StepFailed.retryable``). In a replay the error is rebuilt from its recorded
text, so a policy asked again could decide otherwise: a ``non_retryable``
class the rebuilt error is not an instance of. Each test records real runs
(memory and SQLite), verifies them under the unchanged code (matched), and
checks that a real change still diverges.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from structlog.testing import capture_logs

from agentlog.errors import TaskFailedError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import Event, RunStatus, StepFailed, TaskFailed, TaskStarted
from agentlog.replay import verify_history, verify_runs
from agentlog.replay._verify_compare import RecordedTaskError, recorded_error
from agentlog.runtime import RetryPolicy, Runtime, StepContext, Workflow, end, task
from agentlog.runtime._failures import describe
from tests.support.runtime import FAST_RETRY, config, event_log, events_of, run_to_rest

__all__ = ["event_log"]


class QuotaGone(Exception):
    """The app's own error, at module level: verify rebuilds it as this class."""


def _policy(max_attempts: int = 3, non_retryable: tuple[type[Exception], ...] = ()) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=max_attempts,
        initial_interval=0.001,
        backoff_coefficient=1.0,
        non_retryable=non_retryable,
    )


GIVES_UP = _policy(non_retryable=(QuotaGone,))  # gives up at the first QuotaGone
RUNS_OUT = _policy(max_attempts=2)  # tries twice


def billing(
    tries: list[str],
    *,
    catch: bool,
    policy: RetryPolicy | None = GIVES_UP,
    name: str = "charge",
    seen: list[type[BaseException]] | None = None,
) -> Workflow:
    """One step that charges; every try fails with QuotaGone. ``catch``: the step
    falls back on ``except QuotaGone`` (else the run fails)."""
    wf = Workflow("billing", state={"receipt": "replace"}, retry=FAST_RETRY)

    @task(name=name, retry=policy)
    async def charge(cents: int) -> str:
        tries.append(f"{name} {cents}")
        raise QuotaGone("no quota left this month")

    @wf.step
    async def pay(ctx: StepContext) -> Any:
        if not catch:
            return end(receipt=await charge(500))
        try:
            return end(receipt=await charge(500))
        except QuotaGone as exc:
            if seen is not None:
                seen.append(type(exc))
            return end(receipt="invoice later")

    return wf


async def _record(log: EventLog, wf: Workflow, run_id: str) -> tuple[RunStatus, list[Event]]:
    async with Runtime(log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id=run_id, durability="sync")
        status = (await run_to_rest(rt, run_id)).status
    return status, await events_of(log, run_id)


async def _verdict(wf: Workflow, events: list[Event]) -> list[tuple[int, str]]:
    return [(d.seq, d.kind) for d in await verify_history(wf, events)]


def _started(events: list[Event], nth: int = 1) -> int:
    return [e.seq for e in events if isinstance(e.data, TaskStarted)][nth - 1]


@pytest.mark.parametrize(
    ("catch", "status"), [(True, RunStatus.COMPLETED), (False, RunStatus.FAILED)]
)
async def test_a_non_retryable_custom_error_verifies_clean(
    event_log: EventLog, catch: bool, status: RunStatus
) -> None:
    tries: list[str] = []
    recorded, events = await _record(event_log, billing(tries, catch=catch), "b")
    assert recorded == status
    assert tries == ["charge 500"]  # its policy gave up at once
    failed = [e.data for e in events if isinstance(e.data, TaskFailed)]
    assert [f.retryable for f in failed] == [False]
    seen: list[type[BaseException]] = []
    with capture_logs() as logs:
        report = await verify_runs(event_log, [billing(tries, catch=catch, seen=seen)], runs="all")
    assert [(r.run_id, r.status, r.divergences) for r in report.runs] == [("b", "matched", ())]
    assert tries == ["charge 500"]  # verify ran no task body
    assert seen == ([QuotaGone] if catch else [])  # the fallback saw the app's own class
    assert [e for e in logs if e["log_level"] not in ("debug", "info")] == []
    # A real change is still reported: the task renamed.
    renamed = billing(tries, catch=catch, name="charge_card")
    assert await _verdict(renamed, events) == [(_started(events), "task")]


@pytest.mark.parametrize(
    ("catch", "status"), [(True, RunStatus.COMPLETED), (False, RunStatus.FAILED)]
)
async def test_a_task_whose_attempts_ran_out_verifies_clean(
    event_log: EventLog, catch: bool, status: RunStatus
) -> None:
    tries: list[str] = []
    wf = billing(tries, catch=catch, policy=RUNS_OUT)
    recorded, events = await _record(event_log, wf, "o")
    assert recorded == status
    assert tries == ["charge 500"] * 2
    failed = [e.data for e in events if isinstance(e.data, TaskFailed)]
    assert [f.retryable for f in failed] == [True, False]
    assert await _verdict(billing(tries, catch=catch, policy=RUNS_OUT), events) == []
    # A real change is still reported: the task renamed.
    renamed = billing(tries, catch=catch, policy=RUNS_OUT, name="charge_card")
    assert await _verdict(renamed, events) == [(_started(events), "task")]


async def test_a_step_retry_after_the_task_gave_up_raises_the_recorded_failure_in_the_replay_too(
    event_log: EventLog,
) -> None:
    """The step falls back, then fails for its own reason; its retry calls the
    task again, which raises the recorded failure, rebuilt as its class (a
    class of the workflow's module) and caused by a TaskFailedError, live and
    in the replay alike."""
    tries: list[str] = []

    def flow(seen: list[type[BaseException]], name: str = "charge") -> Workflow:
        wf = Workflow("billing", state={"receipt": "replace"}, retry=FAST_RETRY)

        @task(name=name, retry=GIVES_UP)
        async def charge(cents: int) -> str:
            tries.append(f"charge {cents}")
            raise QuotaGone("no quota left this month")

        @wf.step
        async def pay(ctx: StepContext) -> Any:
            try:
                receipt = await charge(500)
            except (QuotaGone, TaskFailedError) as exc:
                seen.append(type(exc))
                if isinstance(exc.__cause__, TaskFailedError):
                    seen.append(TaskFailedError)
                receipt = "invoice later"
            if ctx.attempt == 1:
                raise RuntimeError("ledger busy")
            return end(receipt=receipt)

        return wf

    live: list[type[BaseException]] = []
    recorded, events = await _record(event_log, flow(live), "s")
    assert recorded == RunStatus.COMPLETED
    assert tries == ["charge 500"]
    assert live == [QuotaGone, QuotaGone, TaskFailedError]
    steps = [e.data for e in events if isinstance(e.data, StepFailed)]
    assert [(s.attempt, s.retryable) for s in steps] == [(1, True)]
    replayed: list[type[BaseException]] = []
    assert await _verdict(flow(replayed), events) == []
    assert replayed == [QuotaGone, QuotaGone, TaskFailedError]  # as the run did
    assert await _verdict(flow([], name="charge_card"), events) == [(_started(events), "task")]


def _unrebuildable(tries: list[str], *, task_policy: bool, seen: list[Any]) -> Workflow:
    """A workflow whose error class is made anew with each build: two loaded
    classes share its name, so verify cannot rebuild the recorded error as
    either and raises RecordedTaskError; only the recorded verdict is left.

    ``task_policy``: the task's own policy gives up on it and the step falls
    back; else the task has no policy and the step's gives up on it.
    """

    class Throttled(Exception):
        pass

    gives_up = _policy(non_retryable=(Throttled,))
    wf = Workflow(
        "throttled", state={"out": "replace"}, retry=FAST_RETRY if task_policy else gives_up
    )

    @task(name="call", retry=gives_up if task_policy else None)
    async def call() -> str:
        tries.append("call")
        raise Throttled("slow down")

    @wf.step
    async def work(ctx: StepContext) -> Any:
        try:
            return end(out=await call())
        except Exception as exc:
            seen.append(type(exc))
            if task_policy:
                return end(out="fallback")
            raise

    return wf


@pytest.mark.parametrize(
    ("task_policy", "status"), [(True, RunStatus.COMPLETED), (False, RunStatus.FAILED)]
)
async def test_the_recorded_verdict_is_followed_when_the_error_cannot_be_rebuilt(
    event_log: EventLog, task_policy: bool, status: RunStatus
) -> None:
    tries: list[str] = []
    live: list[Any] = []
    recording = _unrebuildable(tries, task_policy=task_policy, seen=live)
    recorded, events = await _record(event_log, recording, "t")
    assert recorded == status
    assert tries == ["call"]  # given up at once, by the task's or the step's policy
    replayed: list[Any] = []
    checked = _unrebuildable(tries, task_policy=task_policy, seen=replayed)
    assert await _verdict(checked, events) == []
    assert replayed == [RecordedTaskError]  # not rebuilt: the verdict alone decided
    assert live[0].__name__ == "Throttled"  # the recording's class is still loaded


async def test_an_old_history_without_the_task_verdict_follows_what_it_shows(
    event_log: EventLog,
) -> None:
    """Before TaskFailed.retryable, every failure read as retryable, and a step
    retry ran a task again even after its policy gave up. Such a history (made
    here by a task with no policy, which records exactly that shape) verifies
    under the code with the policy: the replay does what the history shows."""
    tries: list[str] = []
    recorded, events = await _record(event_log, billing(tries, catch=False, policy=None), "h")
    assert recorded == RunStatus.FAILED
    assert tries == ["charge 500"] * 3  # once per step attempt, as the old runtime did
    assert all(e.data.retryable for e in events if isinstance(e.data, TaskFailed))
    assert await _verdict(billing(tries, catch=False, policy=GIVES_UP), events) == []
    # Tries within one step attempt, read from an old history (no field: True).
    _, newer = await _record(event_log, billing(tries, catch=False, policy=RUNS_OUT), "n")
    old = [_as_old(e) for e in newer]
    assert [e.data.retryable for e in old if isinstance(e.data, TaskFailed)] == [True, True]
    assert await _verdict(billing(tries, catch=False, policy=RUNS_OUT), old) == []


def _as_old(event: Event) -> Event:
    """The event as an old history reads: a TaskFailed payload without
    ``retryable`` decodes to the field's default, True."""
    if not isinstance(event.data, TaskFailed):
        return event
    return dataclasses.replace(event, data=dataclasses.replace(event.data, retryable=True))


class LocalDecline(Exception):
    """An app's own error, defined in the 'workflow' module of the test below."""


def _failure(cls: type[Exception], *args: Any) -> TaskFailed:
    """A TaskFailed as the runtime records one for ``cls(*args)``."""
    exc = cls(*args)
    return TaskFailed("k", f"{cls.__name__}: {exc}", 1, 0.0, False, failure=describe(exc))


def test_only_builtins_and_the_workflows_own_classes_are_rebuilt() -> None:
    assert type(recorded_error(_failure(ValueError, "bad"), [])) is ValueError
    rebuilt = recorded_error(_failure(LocalDecline, "card 4242"), [__name__])
    assert type(rebuilt) is LocalDecline and str(rebuilt) == "card 4242"
    # loaded, but not the workflow's: stored text cannot pick it
    assert type(recorded_error(_failure(LocalDecline, "card"), ["other.app"])) is RecordedTaskError
    assert type(recorded_error(_failure(json.JSONDecodeError, "x", "d", 0), [__name__])) is (
        RecordedTaskError
    )
    # an older history, with no recorded failure: a builtin by its name only
    old = TaskFailed("k", "ValueError: bad", 1, 0.0, False)
    assert type(recorded_error(old, [])) is ValueError
    assert type(recorded_error(dataclasses.replace(old, error="LocalDecline: c"), [__name__])) is (
        RecordedTaskError
    )


class Declined(Exception):
    """An app error whose constructor takes two arguments (a reason and a code)."""

    def __init__(self, reason: str, code: int) -> None:
        super().__init__(reason, code)
        self.reason, self.code = reason, code


async def test_verify_rebuilds_a_task_failure_from_its_recorded_arguments(
    event_log: EventLog,
) -> None:
    """The step routes on the error's own fields: verify raises the class
    built from the recorded arguments (``_failures.describe``), not from the
    error's text, so the replay takes the path the run took."""
    wf = Workflow("declines", state={"out": "replace"})

    @task(name="charge", retry=_policy(non_retryable=(Declined,)))
    async def charge() -> str:
        raise Declined("card expired", 402)

    @wf.step
    async def pay(ctx: StepContext) -> Any:
        try:
            return end(out=await charge())
        except Declined as exc:
            return end(out=f"{exc.reason} ({exc.code})")

    recorded, events = await _record(event_log, wf, "d")
    assert recorded == RunStatus.COMPLETED
    assert await _verdict(wf, events) == []
