"""The executor: drives one run, superstep by superstep, until it parks or ends.

One superstep runs its branches (the steps in ``state.next_steps``)
concurrently. Branches that already recorded their writes (pending writes,
from before a crash or a failure) do not run again. When every branch has
finished, the superstep commits: SuperstepCommitted names the next steps,
and the branches' writes are reduced into the state.

Errors fall in these groups:

* a step raised: StepFailed is recorded, the step's retry policy decides,
  and when the tries are used up the run fails (RunFailed, with the failure
  as data: its type, message and causes, so a caller can catch the
  original class; see ``runtime/_failures.py``). An error a
  task's own retry policy gave up on is not retried by the step: the task
  would not run again (it raises ``TaskFailedError`` in this run attempt);
* a step's code broke the workflow's contract (:data:`CODE_ERRORS`: it
  returned something other than writes, ``goto`` or ``end``, wrote an
  undeclared key or a value its reducer rejects, routed wrongly, or gave an
  interrupt an ``expects`` that cannot be checked): StepFailed (not
  retryable) and RunFailed, tagged :data:`CODE_ERROR`, are recorded, in
  every durability mode and whoever drives the run, so a client waiting in
  another process learns it (``Runtime.wait`` raises ``RunFailedError``);
  retrying cannot fix code, so the step's retry policy is not asked, and
  ``Runtime.retry`` continues the run once the code is fixed;
* a reducer raised while the superstep commits: StepFailed (not retryable,
  naming the reducer and the key) and RunFailed are recorded; the pending
  writes stay, so ``Runtime.retry`` with fixed code commits them;
* a value that cannot be serialized, or a re-executed step that asks for
  another task than recorded: nothing wrong is recorded, the error is raised
  to the caller, and the run stays resumable once the code is fixed;
* the log said no (fenced by a newer writer, storage down): the executor
  stops at once and raises it.

A cancel (:attr:`RunExecutor.cancel_requested`) does not wait for the
running superstep: its steps, and their task calls, are cancelled at their
next ``await`` and RunCancelled is recorded. A sync task's thread cannot be
stopped: it is no longer awaited and its outcome is not recorded (its
TaskStarted is, so the effect is known to have run at least once).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any, cast

from agentlog._logging import get_logger
from agentlog.errors import (
    AgentlogError,
    InterruptTimeoutError,
    InvalidMessageError,
    InvalidRouteError,
    InvalidTimerError,
    InvalidWriteError,
    NotSerializableError,
    RunFailedError,
    TaskFailedError,
    UnknownStepError,
    WorkflowDefinitionError,
    WorkflowError,
)
from agentlog.eventlog.events import (
    Branch,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunStatus,
    StepCompleted,
    StepFailed,
    SuperstepCommitted,
)
from agentlog.projector._reducers import replace
from agentlog.projector._state import RunState, branch_input, branch_step
from agentlog.runtime._context import Interrupted, StepContext
from agentlog.runtime._failures import causes_of, describe, workflow_modules
from agentlog.runtime._inbox import Inbox, record_handed
from agentlog.runtime._mailbox import Mailbox, mailbox_of, take_stored
from agentlog.runtime._superstep_cancel import SuperstepCancel
from agentlog.runtime._telemetry import TELEMETRY
from agentlog.runtime._workflow import Next, Send, Step, Target, Workflow
from agentlog.runtime._writer_protocol import Writer

__all__ = ["CODE_ERROR", "CODE_ERRORS", "RunExecutor", "code_failure"]

_log = get_logger("agentlog.runtime")

_DONE, _INTERRUPTED = "done", "interrupted"
_GOING_ON = (_DONE, _INTERRUPTED)
#: Errors of ours that fail the step like the step's own errors (recorded,
#: never retried): the step can catch them and take another path.
_FAIL_THE_STEP = (InterruptTimeoutError, InvalidTimerError, InvalidMessageError, TaskFailedError)
#: Errors that say a step's code breaks the workflow's contract. They fail
#: the run at once (recorded, never retried: the same code fails the same way).
CODE_ERRORS = (InvalidWriteError, InvalidRouteError, UnknownStepError, WorkflowDefinitionError)
#: How the RunFailed of a code error begins; every other RunFailed this
#: executor records begins with ``step '...' failed after``, ``ReducerError``
#: or ``StepLimitExceeded``.
CODE_ERROR = "CodeError"


def code_failure(state: RunState) -> RunFailedError | None:
    """The error to raise to a caller waiting on ``state``'s run, if the run
    failed on a code error (:data:`CODE_ERRORS`) in one of its steps.

    A waiter in another process never sees the exception the driver saw:
    the recorded RunFailed is what it learns, so it is told the same way
    whoever drove the run.
    """
    if state.status != RunStatus.FAILED or not state.error.startswith(f"{CODE_ERROR}: "):
        return None
    failure = state.failure or {}
    return RunFailedError(
        f"run {state.run_id!r} failed: {state.error}. Fix the step's code, then continue "
        f"the run with Runtime.retry or `agentlog retry {state.run_id}`.",
        run_id=state.run_id,
        error_type=str(failure.get("type", "")),
        message=str(failure.get("message", "")),
        causes=causes_of(failure),
    )


def _mailbox(writer: Writer) -> Mailbox | None:
    """The mailbox of the run ``writer`` writes, if its log has them."""
    log = mailbox_of(getattr(writer, "log", None))
    epoch = getattr(writer, "epoch", None)
    return None if log is None or epoch is None else Mailbox(log, writer.state.run_id, epoch)


class RunExecutor:
    """Runs one run's supersteps with one writer."""

    def __init__(self, writer: Writer, workflow: Workflow[Any, Any]) -> None:
        self.writer, self.workflow = writer, workflow
        self.cancel_requested = asyncio.Event()
        #: the reason the first cancel gave (see :meth:`request_cancel`)
        self.cancel_reason = ""
        #: Set by a worker that stops (SIGTERM): the run ends its current
        #: superstep, records it and lets go, for another worker to continue.
        self.hand_over_requested = asyncio.Event()
        #: Messages sent to the run from this process, recorded between
        #: supersteps and before the run parks (see runtime/_inbox.py).
        self.inbox = Inbox()
        #: The run's mailbox on the log, for messages stored by other
        #: processes (runtime/_mailbox.py); None on a log without one.
        self.mailbox = _mailbox(writer)
        self._log = _log.bind(run_id=writer.state.run_id)
        #: where a recorded failure's class may be rebuilt from (_failures.rebuild)
        self._modules = workflow_modules([step.fn for step in workflow.steps.values()])
        #: the failure (as data) of each branch of this superstep that failed for good
        self._failures: dict[int, dict[str, Any]] = {}
        #: interrupts the running superstep on a cancel (runtime/_superstep_cancel.py)
        self._superstep_cancel = SuperstepCancel()

    def request_cancel(self, reason: str) -> None:
        """Cancel the run: its running superstep is interrupted at once and
        RunCancelled is recorded with the first cancel's ``reason``."""
        if not self.cancel_requested.is_set():
            self.cancel_reason = reason
        self.cancel_requested.set()
        if self._superstep_cancel.interrupt():
            self._log.info("cancel interrupts the running superstep", seq=self.state.seq)

    @property
    def state(self) -> RunState:
        """The live state (equal to a replay of what was emitted)."""
        return self.writer.state

    async def run(self) -> RunState:
        """Run until the run parks, ends, or an error stops this writer."""
        try:
            await self._loop()
            await self.writer.close()
        except (WorkflowError, NotSerializableError):
            await self.writer.close()  # keep what was recorded (paid task results)
            raise
        except BaseException:
            self.writer.abandon()
            raise
        self._log.info(
            "run stopped", status=self.state.status, steps=self.state.steps, seq=self.state.seq
        )
        return self.state

    async def _loop(self) -> None:
        state, emit = self.state, self.writer.emit
        while not state.is_terminal and state.status != RunStatus.WAITING:
            await record_handed(self.writer, self.inbox)
            if not state.next_steps or self.cancel_requested.is_set() or state.message_keys:
                # it ends here, or it takes messages: move what is stored now
                await take_stored(self.writer, self.mailbox, close=False)
            if self.cancel_requested.is_set():
                emit(RunCancelled(self.cancel_reason or "cancelled at a step boundary"))
                break
            if self.hand_over_requested.is_set():
                self._log.info("run handed over at a step boundary", seq=state.seq)
                break
            if not state.next_steps:
                emit(RunCompleted(output_is_values=True))  # the result: the final values
                break
            todo = [
                (b, entry) for b, entry in enumerate(state.next_steps) if b not in state.pending
            ]
            limit = state.limits.get("max_steps")
            if limit is not None and state.steps + len(todo) > limit:
                why = (
                    f"the run has taken {state.steps} of its {limit} steps and the next "
                    f"superstep needs {len(todo)} more"
                )
                await take_stored(self.writer, self.mailbox, close=False)  # it ends here
                failure = {"type": "StepLimitExceeded", "message": why}
                emit(RunFailed(f"StepLimitExceeded: {why}", failure=failure))
                break
            self._failures.clear()
            outcomes = await self._superstep_cancel.run(
                self._superstep(todo, parallel=len(state.next_steps) > 1)
            )
            if outcomes is None:
                why = f"cancelled during superstep {state.superstep}"
                await take_stored(self.writer, self.mailbox, close=False)  # it ends here
                emit(RunCancelled(self.cancel_reason or why))
                break
            failures = [
                (o, b) for o, (b, _) in zip(outcomes, todo, strict=True) if o not in _GOING_ON
            ]
            if failures:
                await take_stored(self.writer, self.mailbox, close=False)
                error, branch = failures[0]
                emit(RunFailed(error, failure=self._failures.get(branch)))
                break
            if _INTERRUPTED in outcomes:
                woke = await record_handed(self.writer, self.inbox)
                if await take_stored(self.writer, self.mailbox, close=True) or woke:
                    if self.mailbox is not None:
                        await self.mailbox.reopen()
                    continue  # a message sent meanwhile answers a recv: it runs again
                break
            broken = self._commit_error()
            if broken is not None:
                step, branch, error = broken
                await take_stored(self.writer, self.mailbox, close=False)  # it ends here
                attempt = state.attempts.get(branch, 0) + 1
                emit(StepFailed(step, state.superstep, branch, attempt, error, False))
                emit(RunFailed(error, failure={"type": "ReducerError", "message": error}))
                break
            goto = [t for b in sorted(state.pending) for t in state.pending[b]["goto"]]
            emit(SuperstepCommitted(state.superstep, _join(goto)))
            await self.writer.flush()

    async def _superstep(self, todo: list[tuple[int, Branch]], *, parallel: bool) -> list[str]:
        values = self.state.values  # replaced, never mutated, on commit
        if len(todo) == 1:
            branch, entry = todo[0]
            return [await self._branch(branch, entry, values, parallel=parallel)]
        tasks = [
            asyncio.create_task(self._branch(b, entry, values, parallel=True)) for b, entry in todo
        ]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _branch(
        self, branch: int, entry: Branch, values: Mapping[str, Any], *, parallel: bool
    ) -> str:
        name = branch_step(entry)
        step = self.workflow.steps.get(name)
        if step is None:
            raise UnknownStepError(
                f"run {self.state.run_id!r} is at step {name!r}, which workflow "
                f"{self.workflow.name!r} v{self.workflow.version} does not define"
            )
        return await self._attempts(step, branch, values, branch_input(entry), parallel=parallel)

    async def _attempts(
        self, step: Step, branch: int, values: Mapping[str, Any], given: Any, *, parallel: bool
    ) -> str:
        name, superstep = step.name, self.state.superstep
        attempt = self.state.attempts.get(branch, 0) + 1
        while True:
            ctx = StepContext(
                self.writer,
                step=name,
                superstep=superstep,
                branch=branch,
                attempt=attempt,
                state=values,
                input=given,
            )
            ctx._calls.modules = self._modules  # a task's final failure is rebuilt from these
            token = ctx._enter()  # @task functions find their step through it
            measured = TELEMETRY.get().step(self.state, name, superstep, branch, attempt)
            try:
                try:
                    result = await _timed(step, ctx)
                finally:
                    await ctx._settle()  # no task call outlives its step
                writes, goto = self._check(step, result)
            except Interrupted as interrupted:
                # Every branch that asks records its interrupt (each has an id);
                # one still unanswered after a resume is recorded again, so
                # the run is waiting again.
                ctx._record_interrupt(interrupted)
                self._log.info("run parks on interrupt", step=name, branch=branch)
                return await self._finish_branch(_INTERRUPTED, parallel)
            except Exception as exc:
                measured.failed(exc)
                code_error = isinstance(exc, CODE_ERRORS)
                if isinstance(exc, AgentlogError) and not (
                    code_error or isinstance(exc, _FAIL_THE_STEP)
                ):
                    raise  # the log said no, or the run waits for fixed code
                error = f"{type(exc).__name__}: {exc}"
                # A failure a task's own retry policy gave up on is final: a step
                # retry would not run that task again, only raise it again. Code
                # errors are never retried: the same code fails the same way.
                retry = (
                    not code_error
                    and step.retry.retries(exc, attempt)
                    and not ctx._task_gave_up(exc)
                )
                failed = self.writer.emit(
                    StepFailed(name, superstep, branch, attempt, error, retry)
                )
                # As recorded: in a replay (agentlog verify) the history's verdict.
                retry = cast(StepFailed, failed.data).retryable
                await self.writer.flush()
                self._log.warning(
                    "step failed", step=name, attempt=attempt, error=error, retry=retry
                )
                if code_error or not retry:
                    self._failures[branch] = describe(exc)
                if code_error:
                    return f"{CODE_ERROR}: step {name!r} broke the workflow's contract: {error}"
                if not retry:
                    return f"step {name!r} failed after {attempt} attempt(s): {error}"
                await self.writer.backoff(step.retry.delay(attempt))
                attempt += 1
                continue
            finally:
                ctx._exit(token)
                measured.end()
            self.writer.emit(StepCompleted(name, superstep, branch, writes, goto))
            return await self._finish_branch(_DONE, parallel)

    async def _finish_branch(self, outcome: str, parallel: bool) -> str:
        if parallel:  # a finished branch's writes are recorded at once
            await self.writer.flush()
        return outcome

    def _check(self, step: Step, result: object) -> tuple[dict[str, Any], list[Branch]]:
        """Validate a step's result; return its writes and next steps."""
        goto: list[Branch]
        if isinstance(result, Next):
            writes = dict(result.writes)
            goto = [self._branch_of(target) for target in result.goto]
        elif result is None or isinstance(result, Mapping):
            writes, goto = dict(result or {}), list(step.then)
        else:
            raise InvalidWriteError(
                f"step {step.name!r} returned {type(result).__name__}; return a dict of "
                "writes, goto(...), end(...) or None"
            )
        declared = self.workflow.reducers
        for key in writes:
            if declared and key not in declared:
                raise InvalidWriteError(
                    f"step {step.name!r} wrote {key!r}, which the state schema of "
                    f"{self.workflow.name!r} does not declare (keys: {sorted(declared)})"
                )
        self._trial(step, writes)
        plain = [target for target in goto if isinstance(target, str)]
        if len(set(plain)) != len(plain):
            raise InvalidRouteError(
                f"step {step.name!r} routed to {plain}: a step can run only once per "
                "superstep; route to each step once, or fan out with Send(step, **input)"
            )
        for target in map(branch_step, goto):
            if target not in self.workflow.steps:
                raise UnknownStepError(
                    f"step {step.name!r} routed to {target!r}; workflow "
                    f"{self.workflow.name!r} has steps {sorted(self.workflow.steps)}"
                )
            if step.routes and target not in step.routes and target not in step.then:
                raise InvalidRouteError(
                    f"step {step.name!r} routed to {target!r}, which is not among its "
                    f"declared routes {list(step.routes)}; add it to routes= or fix the step"
                )
        return writes, goto

    def _trial(self, step: Step, writes: dict[str, Any]) -> None:
        """Run the reducers on copies, so a bad write fails before it is recorded."""
        failed = self._reduce_on_copies([writes])
        if failed is not None:
            _, key, name, exc = failed
            raise InvalidWriteError(
                f"step {step.name!r}: the {name!r} reducer of {key!r} rejected its write: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    def _branch_of(self, target: Target | Send) -> Branch:
        if isinstance(target, Send):
            return {"step": self.workflow.step_name(target.step), "input": target.input}
        return self.workflow.step_name(target)

    def _commit_error(self) -> tuple[str, int, str] | None:
        """Reduce the pending writes on copies, as the commit will.

        Returns:
            None if the commit will fold; else the branch's step, the branch
            and an error naming the reducer and the key. Branches read the
            same start state, so a write that passed its own trial can still
            fail here, after a sibling's write to the same key.
        """
        state = self.state
        branches = sorted(state.pending)
        failed = self._reduce_on_copies([state.pending[b]["writes"] for b in branches])
        if failed is None:
            return None
        index, key, name, exc = failed
        branch = branches[index]
        step = state.pending[branch]["step"]
        return (
            step,
            branch,
            (
                f"ReducerError: the {name!r} reducer of state key {key!r} raised "
                f"{type(exc).__name__}: {exc} while superstep {state.superstep} "
                f"committed the writes of step {step!r} (branch {branch}); fix the "
                "reducer, then retry the run"
            ),
        )

    def _reduce_on_copies(
        self, batches: list[dict[str, Any]]
    ) -> tuple[int, str, str, Exception] | None:
        """Reduce batches of writes, in order, into copies of the keys they touch.

        Returns:
            None, or the failing batch's index, key, reducer name and error.
            "replace" and "append" take any value and are skipped (one key
            has one reducer, so skipping them never skews another's input).
        """
        state, trial = self.state, {}
        for index, writes in enumerate(batches):
            for key, update in writes.items():
                name = state.reducers.get(key, "replace")
                if name in ("replace", "append"):
                    continue
                if key not in trial:
                    trial[key] = copy.deepcopy(state.values.get(key))
                try:
                    trial[key] = self.workflow.reducer_table.get(name, replace)(trial[key], update)
                except Exception as exc:
                    return index, key, name, exc
        return None


async def _timed(step: Step, ctx: StepContext) -> object:
    """The step's result, within its time limit if it has one (no timer else)."""
    if step.timeout is None:
        return await step.fn(ctx)
    try:
        async with asyncio.timeout(step.timeout) as limit:
            return await step.fn(ctx)
    except TimeoutError as exc:
        if not limit.expired():
            raise
        raise TimeoutError(f"step {step.name!r} took longer than {step.timeout:g}s") from exc


def _join(goto: list[Branch]) -> list[Branch]:
    """The next superstep's branches: a step named by several branches runs
    once (a join); every Send is a branch of its own."""
    seen: set[str] = set()
    branches: list[Branch] = []
    for target in goto:
        if isinstance(target, str):
            if target in seen:
                continue
            seen.add(target)
        branches.append(target)
    return branches
