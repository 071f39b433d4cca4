"""Failures a caller can catch (issue 24, item 4), on memory and SQLite.

A run's failure is recorded as data (its class as ``module.QualName``, its
message and its cause chain), and ``Runtime.result`` raises an instance of
the original class where it may be rebuilt (builtins and the workflow's own
modules), caused by a ``RunFailedError`` that names the run; anywhere else a
typed ``RunFailedError``. A name read from the log never causes an import.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from typing import Any

import pytest

from agentlog.errors import RunFailedError, TaskFailedError, WorkflowDefinitionError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunFailed, RunStatus, TaskFailed
from agentlog.runtime import (
    RetryPolicy,
    Runtime,
    StepContext,
    TaskOptions,
    Workflow,
    end,
    task,
)
from agentlog.runtime._failures import describe, rebuild
from tests.support.runtime import config, event_log, events_of, run_to_rest

__all__ = ["event_log"]

_ONCE = RetryPolicy(max_attempts=1)


class PaymentDeclined(Exception):
    """The workflow's own error: a caller wants ``except PaymentDeclined``."""


class _Gateway(Exception):
    """Needs two arguments: rebuilt with the arguments it was raised with."""

    def __init__(self, code: int, why: str) -> None:
        super().__init__(code, why)
        self.code, self.why = code, why


def _checkout(error: BaseException) -> Workflow:
    wf = Workflow("checkout", state={"paid": "replace"}, retry=_ONCE)

    @wf.step
    async def charge(ctx: StepContext) -> Any:
        try:
            raise ConnectionError("gateway reset")
        except ConnectionError:
            raise error from _Gateway(502, "bad gateway")

    return wf


async def test_result_raises_the_workflows_own_exception_class(event_log: EventLog) -> None:
    wf = _checkout(PaymentDeclined("card 4242 declined"))
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="r", durability="sync")
        assert (await run_to_rest(rt, "r")).status == RunStatus.FAILED
        with pytest.raises(PaymentDeclined) as caught:
            await rt.result("r")
    assert str(caught.value) == "card 4242 declined"
    cause = caught.value.__cause__
    assert isinstance(cause, RunFailedError), "the run id must not be lost"
    assert cause.run_id == "r"
    assert cause.error_type == f"{__name__}.PaymentDeclined"
    assert cause.message == "card 4242 declined"
    assert cause.causes == ((f"{__name__}._Gateway", "(502, 'bad gateway')"),)
    failed = [e.data for e in await events_of(event_log, "r") if isinstance(e.data, RunFailed)]
    assert failed[0].failure is not None
    assert failed[0].failure["type"] == f"{__name__}.PaymentDeclined"


async def test_a_rebuilt_error_gets_its_recorded_arguments(event_log: EventLog) -> None:
    wf = _checkout(_Gateway(402, "insufficient funds"))
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="r", durability="sync")
        await run_to_rest(rt, "r")
        with pytest.raises(_Gateway) as caught:
            await rt.result("r")
    assert (caught.value.code, caught.value.why) == (402, "insufficient funds")


async def test_a_caller_without_the_workflow_gets_a_typed_run_failed_error(
    event_log: EventLog,
) -> None:
    """A client that does not know the workflow has only builtins on its allow-list."""
    wf = _checkout(PaymentDeclined("card 4242 declined"))
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="r", durability="sync")
        await run_to_rest(rt, "r")
    async with Runtime(event_log, config=config(owner="client")) as client:
        with pytest.raises(RunFailedError) as caught:
            await client.result("r")
    assert caught.value.error_type == f"{__name__}.PaymentDeclined"
    assert caught.value.message == "card 4242 declined"
    assert caught.value.causes[0][0] == f"{__name__}._Gateway"
    assert "card 4242 declined" in str(caught.value)


async def test_a_builtin_failure_is_rebuilt_for_any_caller(event_log: EventLog) -> None:
    wf = _checkout(KeyError("sku-9"))
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="r", durability="sync")
        await run_to_rest(rt, "r")
    async with Runtime(event_log, config=config(owner="client")) as client:
        with pytest.raises(KeyError) as caught:
            await client.result("r")
    assert caught.value.args == ("sku-9",)
    assert isinstance(caught.value.__cause__, RunFailedError)


async def test_a_timed_out_task_says_which_limit_it_hit(event_log: EventLog) -> None:
    """A task over its limit failed the run with a bare "TimeoutError: " before."""
    wf = Workflow("slow", state={"done": "replace"}, retry=_ONCE)

    @task(name="lookup", timeout=timedelta(milliseconds=20))
    async def lookup() -> str:
        await asyncio_sleep_forever()
        return "never"

    @wf.step
    async def only(ctx: StepContext) -> Any:
        return end(done=await lookup())

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="r", durability="sync")
        failed = await run_to_rest(rt, "r")
        with pytest.raises(TimeoutError) as caught:
            await rt.result("r")
    assert str(caught.value) == "task 'lookup' took longer than 0.02s"
    assert failed.error.endswith("TimeoutError: task 'lookup' took longer than 0.02s")
    recorded = [e.data for e in await events_of(event_log, "r") if isinstance(e.data, TaskFailed)]
    assert recorded[0].failure is not None
    assert recorded[0].failure["message"] == "task 'lookup' took longer than 0.02s"


async def test_ctx_task_takes_a_timeout_and_a_retry_policy_as_task_options(
    event_log: EventLog,
) -> None:
    """``ctx.task(TaskOptions(name, timeout=, retry=), fn, ...)``: the limits
    of ``@task``, for an inline call; a try over its limit is a TimeoutError
    that names the task, and the task's own policy tries it again."""
    wf = Workflow("inline", state={"done": "replace"}, retry=_ONCE)
    tries: list[str] = []

    async def lookup(sku: str) -> str:
        tries.append(sku)
        if len(tries) == 1:
            await asyncio_sleep_forever()  # the first try hangs: cut at its limit
        return f"found {sku}"

    limits = TaskOptions(
        "lookup", timeout=timedelta(milliseconds=50), retry=RetryPolicy(max_attempts=2)
    )

    @wf.step
    async def only(ctx: StepContext) -> Any:
        return end(done=await ctx.task(limits, lookup, "sku-1"))

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="r", durability="sync")
        state = await run_to_rest(rt, "r")
    assert state.status == RunStatus.COMPLETED, state.error
    assert state.values["done"] == "found sku-1"
    assert tries == ["sku-1", "sku-1"]  # in one step attempt: the task's policy retried
    failed = [e.data for e in await events_of(event_log, "r") if isinstance(e.data, TaskFailed)]
    assert [f.error for f in failed] == ["TimeoutError: task 'lookup' took longer than 0.05s"]
    assert [f.retryable for f in failed] == [True]
    with pytest.raises(WorkflowDefinitionError, match="a task timeout"):
        TaskOptions("lookup", timeout=timedelta(0))
    with pytest.raises(WorkflowDefinitionError, match="name"):
        TaskOptions("", timeout=1)


async def test_a_timed_out_step_says_which_limit_it_hit(event_log: EventLog) -> None:
    wf = Workflow("slow", state={"done": "replace"}, retry=_ONCE)

    @wf.step(timeout=timedelta(milliseconds=20))
    async def only(ctx: StepContext) -> Any:
        await asyncio_sleep_forever()

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="r", durability="sync")
        await run_to_rest(rt, "r")
        with pytest.raises(TimeoutError) as caught:
            await rt.result("r")
    assert str(caught.value) == "step 'only' took longer than 0.02s"


async def test_a_task_that_gave_up_carries_its_recorded_type(event_log: EventLog) -> None:
    """Not rebuildable (defined in a function): a step retry sees a typed TaskFailedError."""
    seen: list[BaseException] = []

    class Local(Exception):
        pass

    wf = Workflow("w", state={"note": "replace"}, retry=RetryPolicy(max_attempts=2))

    @task(name="charge", retry=RetryPolicy(max_attempts=1))
    async def charge() -> None:
        raise Local("no")

    @wf.step
    async def only(ctx: StepContext) -> Any:
        try:
            await charge()
        except Exception as exc:  # handled, then the step fails for its own reason
            seen.append(exc)
            raise RuntimeError("ledger busy") from exc
        return end(note="paid")

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="r", durability="sync")
        await run_to_rest(rt, "r")
    assert [type(e) for e in seen] == [Local, TaskFailedError]
    again = seen[1]
    assert isinstance(again, TaskFailedError)
    assert again.error_type == f"{__name__}.{Local.__qualname__}"
    assert (again.message, again.causes) == ("no", ())


def test_a_recorded_name_never_imports_a_module() -> None:
    """The log may be untrusted: a module that is not loaded is not imported."""
    name = "agentlog_test_never_imported"
    failure = {"type": f"{name}.Boom", "module": name, "message": "x", "args": ["x"]}
    assert rebuild(failure, {name}) is None
    assert name not in sys.modules


def test_only_allow_listed_exception_classes_are_rebuilt() -> None:
    json_error = {"type": "json.decoder.JSONDecodeError", "module": "json.decoder"}
    assert rebuild({**json_error, "message": "x"}, {"tests.runtime.test_failures"}) is None
    not_an_error = {"type": "builtins.print", "module": "builtins", "args": ["x"]}
    assert rebuild(not_an_error, ()) is None
    exit_ = {"type": "builtins.SystemExit", "module": "builtins", "args": [3]}
    assert rebuild(exit_, ()) is None, "only Exception subclasses, never SystemExit"
    ours = {"type": "agentlog.errors.RunFailedError", "module": "agentlog.errors", "args": ["x"]}
    assert rebuild(ours, {"agentlog.errors"}) is None
    local = describe(_local_error())
    assert "<locals>" in local["type"]
    assert rebuild(local, {__name__}) is None


def test_the_cause_chain_is_bounded() -> None:
    exc: BaseException = ValueError("0")
    for i in range(1, 20):
        try:
            raise ValueError(str(i)) from exc
        except ValueError as chained:
            exc = chained
    causes = describe(exc)["causes"]
    assert [c["message"] for c in causes] == ["18", "17", "16", "15", "14"]


def test_an_old_task_failed_error_without_a_type_still_builds() -> None:
    error = TaskFailedError("r", "s", "t", "k", "ValueError: x", 1)
    assert (error.error_type, error.message, error.causes) == ("", "", ())


@pytest.mark.parametrize("bad", [0, -1, timedelta(0), timedelta(seconds=-1), "5", True])
def test_a_bad_timeout_fails_at_definition(bad: Any) -> None:
    wf = Workflow("w", state={"x": "replace"})
    with pytest.raises(WorkflowDefinitionError, match="timeout"):
        task(name="t", timeout=bad)
    with pytest.raises(WorkflowDefinitionError, match="timeout"):
        wf.step(timeout=bad)


def test_timeouts_take_a_timedelta() -> None:
    wf = Workflow("w", state={"x": "replace"})

    @wf.step(timeout=timedelta(minutes=2))
    async def only(ctx: StepContext) -> Any:
        return end()

    assert wf.steps["only"].timeout == 120.0


def _local_error() -> Exception:
    class Hidden(Exception):
        pass

    return Hidden("x")


async def asyncio_sleep_forever() -> None:
    """Sleep far longer than any test runs: only a cancel or a timeout ends it."""
    await asyncio.sleep(3600)
