"""The durable runtime's errors (:mod:`agentlog.runtime`): a workflow declared
wrongly, a call that does not fit the run's state, a step's code that does
not match its run's history.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agentlog.errors._root import WorkflowError


class WorkflowDefinitionError(WorkflowError):
    """A workflow or step declared wrongly (caught when it is defined)."""


class UnknownWorkflowError(WorkflowError):
    """A run's workflow is not registered with this runtime.

    Attributes:
        workflow: the name the run was recorded under.
        registered: the names this runtime knows, sorted.
    """

    def __init__(self, workflow: str, registered: Iterable[str], fix: str) -> None:
        self.workflow, self.registered = workflow, sorted(registered)
        super().__init__(
            f"workflow {workflow!r} is not registered with this runtime (registered: "
            f"{self.registered}); {fix}"
        )


class RunExistsError(WorkflowError):
    """A run with this id exists and belongs to another workflow."""


class RunNotWaitingError(WorkflowError):
    """resume() of a run that is not parked on an interrupt."""


class RunNotFailedError(WorkflowError):
    """retry() of a run that has not failed."""


class RunEndedError(WorkflowError):
    """send() to a run that completed, failed, was cancelled or shredded:
    no step of it will ever receive the message, so nothing was recorded."""


class InvalidMessageError(WorkflowError, ValueError):
    """send(), recv(), publish() or get_event() with a topic or key that is
    not non-empty text of at most 256 characters (or a bad idempotency key)."""


class EventNotPublishedError(WorkflowError, LookupError):
    """get_event() found no value for the key: its ``timeout`` passed first,
    or the run ended without publishing it (``ended``). A published None is
    a value, returned as such; pass ``default=`` to get a value instead of
    this error.
    """

    def __init__(self, run_id: str, key: str, ended: bool) -> None:
        why = "the run ended without publishing it" if ended else "the timeout passed first"
        super().__init__(f"run {run_id!r} published no value under {key!r}: {why}")
        self.run_id, self.key, self.ended = run_id, key, ended


class NoLiveWriterError(WorkflowError):
    """wait() on a running run whose writer is gone: nothing is driving it.

    Call ``Runtime.recover()`` (or ``agentlog recover``) to continue it here.
    """

    retryable = True


class InvalidTimerError(WorkflowError, ValueError):
    """A sleep or interrupt timeout that is negative, not finite, or absurdly long.

    Raised in the step at the call; nothing is recorded for the timer.
    """


class InterruptTimeoutError(WorkflowError):
    """Raised in a step by ``ctx.interrupt(..., timeout=...)`` when no answer came.

    Catch it in the step to take another path, or pass ``default=``.
    """

    def __init__(self, run_id: str, interrupt: str, payload: object) -> None:
        super().__init__(
            f"run {run_id!r}: interrupt {interrupt} ({payload!r}) timed out with no answer"
        )
        self.run_id, self.interrupt, self.payload = run_id, interrupt, payload


class InvalidScheduleError(WorkflowError, ValueError):
    """A schedule's cron expression does not parse."""


class InvalidResumeValueError(WorkflowError):
    """A resume value that does not fit what the interrupt said it expects."""


class VersionMismatchError(WorkflowError):
    """The run was recorded under another workflow version or state schema."""


class UnknownStepError(WorkflowError):
    """A step routed to a step name the workflow does not have."""


class NondeterminismError(WorkflowError):
    """A re-executed step asked for a different task than its history records.

    Typically a task was renamed, reordered or removed under a running run.
    Running the new task would repeat work the old one already did (a charge,
    an email), and handing it the recorded result of another task would be
    wrong, so nothing runs; the run stays resumable once the code matches again.

    Attributes:
        run_id, step: where.
        position: the step's task call, from 0, in the order the step makes them.
        recorded: the task the history has there (its name).
        requested: the task the code asked for (its name).
    """

    def __init__(
        self, run_id: str, step: str, position: int, recorded: str, requested: str
    ) -> None:
        self.run_id, self.step, self.position = run_id, step, position
        self.recorded, self.requested = recorded, requested
        super().__init__(
            f"run {run_id!r}, step {step!r}: task call #{position + 1} is {requested!r}, but "
            f"the run's history has {recorded!r} there (it may already have run). The code "
            "changed under a running run: restore the recorded task names and order, then "
            "recover or resume the run; or ship the change as a new workflow version (a run "
            "recorded by the old one then needs a registered migration). `agentlog verify` "
            "lists the runs a change breaks before it ships. Nothing was run or recorded."
        )


class TaskFailedError(WorkflowError):
    """A task whose retry policy gave up is called again in the same run attempt.

    Raised in the step, in place of running the task: a retry of the step (or
    its re-execution after an interrupt) never runs a task whose failure is
    recorded as final (a ``non_retryable`` error, or its ``max_attempts``
    used). Where the recorded class can be rebuilt safely (a builtin, or a
    class of the workflow's own modules) the step sees an instance of it
    instead, whose ``__cause__`` is this error; otherwise this error, with the
    recorded type, message and causes. ``Runtime.retry`` gives the task a
    fresh set of attempts.

    Attributes:
        run_id, step, task, key: which call (``key`` is its idempotency key).
        error: the recorded failure, ``"Type: message"``.
        attempts: how often the task ran in this run attempt.
        error_type: the failure's class, ``"module.QualName"`` ("" in logs
            written before it was recorded).
        message: the failure's message.
        causes: its ``__cause__``/``__context__`` chain, outermost first, as
            ``(error_type, message)`` pairs.
    """

    def __init__(
        self,
        run_id: str,
        step: str,
        task: str,
        key: str,
        error: str,
        attempts: int,
        *,
        error_type: str = "",
        message: str = "",
        causes: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.run_id, self.step, self.task, self.key = run_id, step, task, key
        self.error, self.attempts = error, attempts
        self.error_type, self.message, self.causes = error_type, message, tuple(causes)
        super().__init__(
            f"run {run_id!r}, step {step!r}: task {task!r} failed for good after {attempts} "
            f"attempt(s) ({error}); its retry policy gave up, so it is not run again in this "
            f"run attempt. Fix the cause, then retry the run (`agentlog retry {run_id}`), "
            "which gives the task a fresh set of attempts."
        )


class InvalidRouteError(WorkflowError):
    """A step routed to the same step more than once in one superstep."""


class InvalidWriteError(WorkflowError):
    """A step wrote a state key the workflow's schema does not declare."""


class RunFailedError(WorkflowError):
    """A caller awaited the result of a run that failed.

    ``Runtime.result`` raises an instance of the failure's own class instead
    when it can be rebuilt safely (a builtin, or a class of the workflow's
    own modules), with this error as its ``__cause__``, so the run id is not
    lost; otherwise this error.

    Attributes:
        run_id: the run.
        error_type: the failure's class, ``"module.QualName"`` ("" when the
            log does not record it: logs written before it was recorded, or a
            failure no exception raised, such as a step limit).
        message: the failure's message.
        causes: its ``__cause__``/``__context__`` chain, outermost first, as
            ``(error_type, message)`` pairs.
    """

    def __init__(
        self,
        text: str,
        *,
        run_id: str = "",
        error_type: str = "",
        message: str = "",
        causes: Sequence[tuple[str, str]] = (),
    ) -> None:
        super().__init__(text)
        self.run_id, self.error_type, self.message = run_id, error_type, message
        self.causes = tuple(causes)


class RunCancelledError(WorkflowError):
    """A caller awaited the result of a run that was cancelled.

    Attributes:
        run_id: the run.
        reason: the reason the cancel recorded.
    """

    def __init__(self, run_id: str, reason: str) -> None:
        self.run_id, self.reason = run_id, reason
        super().__init__(
            f"run {run_id!r} was cancelled ({reason or 'no reason given'}); it has no "
            "result. Start a new run, or fork this one (`agentlog fork`) to continue it."
        )
