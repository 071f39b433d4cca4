"""Workflows: named, versioned graphs of async steps over a reduced state.

A sketch::

    wf = Workflow("research", version="2",
                  state={"topic": replace, "notes": append, "draft": replace})

    @wf.step(then="draft")
    async def search(ctx: StepContext) -> dict[str, Any]:
        hits = await ctx.task("search", web_search, ctx.state["topic"])
        return {"notes": hits}           # a delta, reduced into the state

    @wf.step
    async def draft(ctx: StepContext) -> Next:
        text = await ctx.task("llm.draft", llm, ctx.state["notes"])
        return goto("review", "notify", draft=text)   # fan out to two branches

A step returns its writes (a dict), a :class:`Next` (writes plus where to go:
one step, several steps in parallel, or nowhere, which ends the run), or
None. A dict or None follows the step's static ``then`` edge, or ends the run
if it has none.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Generic,
    Literal,
    TypeAlias,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
    overload,
)

from typing_extensions import TypeVar

from agentlog.errors import InvalidRouteError, WorkflowDefinitionError
from agentlog.projector._reducers import REDUCERS, Reducer, function_name
from agentlog.runtime._callables import is_async_callable
from agentlog.runtime._durations import limit_seconds
from agentlog.runtime._graph import to_mermaid
from agentlog.runtime._inputs import check_input, input_keys
from agentlog.runtime._queues import Queue
from agentlog.runtime._retry import RetryPolicy
from agentlog.runtime._routes import Next, Send, Target, end, goto
from agentlog.runtime._schedules import Schedule, TickInput

if TYPE_CHECKING:
    from agentlog.runtime._context import StepContext

__all__ = [
    "Migration",
    "Next",
    "Send",
    "RetryPolicy",
    "Step",
    "StepFn",
    "Target",
    "Workflow",
    "check_max_steps",
    "end",
    "goto",
]


#: The built-in reducers by name (a function may be given instead).
ReducerName: TypeAlias = Literal["replace", "append", "merge"]

StepResult: TypeAlias = "Next[Any] | Mapping[str, Any] | None"
#: The state type a workflow's steps see (a TypedDict, or dict[str, Any]).
S = TypeVar("S", default=dict[str, Any])
#: The input a run starts with (``Runtime.start(input=...)``): a TypedDict
#: given as ``Workflow(input=...)``, or a dict of state keys.
In = TypeVar("In", default=dict[str, Any])
#: A step's input type (``StepContext[S, SI]``) and its result type.
SI = TypeVar("SI")
R = TypeVar("R", bound=StepResult)
StepFn = Callable[["StepContext[Any]"], Awaitable[StepResult]]
#: A step of a workflow whose state type is ``S``.
TypedStepFn = Callable[["StepContext[S]"], Awaitable[StepResult]]

#: ``values recorded under the old version -> values for this version``.
Migration = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Step:
    """A registered step."""

    name: str
    fn: StepFn
    then: tuple[str, ...]
    retry: RetryPolicy
    routes: tuple[str, ...] = ()
    """The steps it may route to with goto() (empty: not declared, not checked)."""
    timeout: float | None = None
    """Seconds an attempt may take; then it fails with TimeoutError (and may retry)."""


class Workflow(Generic[S, In]):
    """A named, versioned set of steps over a state schema.

    ::

        class Research(TypedDict):
            topic: str
            notes: Annotated[list[str], "append"]   # the reducer rides along

        wf = Workflow("research", state=Research)   # ctx.state is a Research

    Args:
        name: stable name; runs record it, and resume looks the code up by it.
        version: bump it when a change must not silently resume old runs.
        state: a TypedDict whose keys are the state's, each reducer given as
            ``Annotated[type, reducer]`` (default "replace"); then steps see a
            typed ``ctx.state``. Or a dict of each state key to its reducer (a
            function or a registered name: "replace", "append", "merge").
            Steps may only write these keys.
        input: a TypedDict of what a run starts with (some state keys):
            ``Runtime.start(wf, input=...)`` is then type-checked against it,
            and a start without one of its required keys is refused. Default:
            any dict of state keys.
        start: the first step(s); defaults to the first step registered.
        max_steps: the step limit, counted across the whole run, resumes included.
        retry: the default retry policy of its steps (default:
            ``RetryPolicy()``, 3 attempts). A step retry does not rerun a
            task whose own retry policy gave up (see :func:`task`).
        queue: the queue its runs wait in (:class:`Queue`): workers drive at
            most ``queue.concurrency`` of them at once (docs/queues.md).
    """

    @overload
    def __init__(
        self: Workflow[dict[str, Any], dict[str, Any]],
        name: str,
        *,
        version: str = "1",
        state: Mapping[str, Reducer | ReducerName] | None = None,
        input: None = None,
        start: str | Sequence[str] | None = None,
        max_steps: int = 10_000,
        retry: RetryPolicy | None = None,
        queue: Queue | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self: Workflow[S, dict[str, Any]],
        name: str,
        *,
        version: str = "1",
        state: type[S],
        input: None = None,
        start: str | Sequence[str] | None = None,
        max_steps: int = 10_000,
        retry: RetryPolicy | None = None,
        queue: Queue | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self: Workflow[dict[str, Any], In],
        name: str,
        *,
        version: str = "1",
        state: Mapping[str, Reducer | ReducerName] | None = None,
        input: type[In],
        start: str | Sequence[str] | None = None,
        max_steps: int = 10_000,
        retry: RetryPolicy | None = None,
        queue: Queue | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        name: str,
        *,
        version: str = "1",
        state: type[S],
        input: type[In],
        start: str | Sequence[str] | None = None,
        max_steps: int = 10_000,
        retry: RetryPolicy | None = None,
        queue: Queue | None = None,
    ) -> None: ...

    def __init__(
        self,
        name: str,
        *,
        version: str = "1",
        state: Any = None,
        input: Any = None,
        start: str | Sequence[str] | None = None,
        max_steps: int = 10_000,
        retry: RetryPolicy | None = None,
        queue: Queue | None = None,
    ) -> None:
        if isinstance(state, type):
            state = _schema_of(state)
        if not name:
            raise WorkflowDefinitionError("a workflow needs a non-empty name")
        check_max_steps(max_steps, WorkflowDefinitionError)
        self.name, self.version, self.max_steps = name, str(version), max_steps
        self.retry = retry or RetryPolicy()
        if queue is not None and not isinstance(queue, Queue):
            raise WorkflowDefinitionError(
                f"workflow {name!r}: queue must be a Queue, got {type(queue).__name__}"
            )
        #: The queue its runs wait in, or None: driven as soon as a worker is free.
        self.queue = queue
        self.reducers: dict[str, str] = {}
        #: Reducer name -> function, for this workflow only: two workflows (or
        #: one built twice, in a fixture) may use different functions.
        self.reducer_table: dict[str, Reducer] = dict(REDUCERS)
        for key, reducer in (state or {}).items():
            if isinstance(reducer, str):
                if reducer not in REDUCERS:
                    raise WorkflowDefinitionError(
                        f"state key {key!r}: unknown reducer {reducer!r}; use one of "
                        f"{sorted(REDUCERS)} or register_reducer() first"
                    )
                self.reducers[key] = reducer
            else:
                self.reducers[key] = function_name(reducer)
                self.reducer_table[self.reducers[key]] = reducer
        self._start = [start] if isinstance(start, str) else list(start or [])
        self.steps: dict[str, Step] = {}
        self.migrations: dict[str, Migration] = {}
        #: Cron schedules (see :meth:`schedule`), run by every worker that knows this workflow.
        self.schedules: list[Schedule] = []
        self._functions: dict[Callable[..., Any], str] = {}
        self._raw_edges: dict[str, tuple[tuple[Target, ...], tuple[Target, ...]]] = {}
        #: The input TypedDict's keys and required keys (None: any state keys).
        self.input_keys = input_keys(input, self.name, self.reducers)

    @property
    def start(self) -> list[str]:
        """The step(s) a new run begins with."""
        if self._start:
            return list(self._start)
        if not self.steps:
            raise WorkflowDefinitionError(f"workflow {self.name!r} has no steps")
        return [next(iter(self.steps))]

    @property
    def fingerprint(self) -> str:
        """A hash of the state schema and the step graph: step names and edges.

        A run records it; resuming under code with another fingerprint is a
        version mismatch unless a migration is registered.
        """
        self.validate()
        edges = {s.name: [list(s.then), sorted(s.routes)] for s in self.steps.values()}
        shape = {"state": sorted(self.reducers.items()), "steps": sorted(self.steps)}
        return _digest({**shape, "edges": sorted(edges.items())})

    @property
    def fingerprints(self) -> tuple[str, ...]:
        """Every fingerprint a run of this code may carry: today's, and the one
        runs recorded before edges were part of it (still accepted)."""
        legacy = {"state": sorted(self.reducers.items()), "steps": sorted(self.steps)}
        return self.fingerprint, _digest(legacy)

    @overload
    def step(
        self, fn: Callable[[StepContext[S, SI]], Awaitable[R]]
    ) -> Callable[[StepContext[S, SI]], Awaitable[R]]: ...

    @overload
    def step(
        self,
        *,
        name: str | None = None,
        then: Target | Sequence[Target] | None = None,
        routes: Sequence[Target] | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | timedelta | None = None,
    ) -> Callable[[TypedStepFn[S]], TypedStepFn[S]]: ...

    def step(
        self,
        fn: StepFn | None = None,
        *,
        name: str | None = None,
        then: Target | Sequence[Target] | None = None,
        routes: Sequence[Target] | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | timedelta | None = None,
    ) -> StepFn | Callable[[StepFn], StepFn]:
        """Register an async step (usable bare or with options).

        Args:
            name: the step's name; defaults to the function's name.
            then: where to go when the step returns a dict or None.
            routes: every step it may route to with goto(): checked when the
                workflow is registered, enforced at run time, and drawn by
                :meth:`mermaid`.
            retry: this step's retry policy, instead of the workflow's.
            timeout: how long one attempt may take (seconds or a timedelta), so
                a hung model call fails (and may retry) instead of holding the
                run forever.
        """
        seconds = limit_seconds(timeout, "a step timeout")

        def register(func: StepFn) -> StepFn:
            step_name = name or getattr(func, "__name__", "")
            if not step_name or step_name in self.steps:
                raise WorkflowDefinitionError(
                    f"workflow {self.name!r}: step name {step_name!r} is empty or taken"
                )
            if not is_async_callable(func):
                raise WorkflowDefinitionError(
                    f"workflow {self.name!r}: step {step_name!r} is not an async function; "
                    "declare it with `async def` (run blocking work in ctx.task, which "
                    "moves a sync function to a thread)"
                )
            edges = _targets(then)
            if len(set(edges)) != len(edges):
                raise WorkflowDefinitionError(
                    f"workflow {self.name!r}: step {step_name!r} has then={list(edges)}; "
                    "a step can run only once per superstep, so name each step once"
                )
            self._raw_edges[step_name] = (edges, _targets(routes))
            self._functions[func] = step_name
            self.steps[step_name] = Step(step_name, func, (), retry or self.retry, timeout=seconds)
            return func

        return register(fn) if fn is not None else register

    def migration(self, from_version: str) -> Callable[[Migration], Migration]:
        """Register how to move a parked run recorded under ``from_version``.

        The function takes the run's state values and returns the values for
        this version; the result is recorded (RunMigrated), so replay never
        needs the migration's code.
        """

        def register(fn: Migration) -> Migration:
            self.migrations[str(from_version)] = fn
            return fn

        return register

    def schedule(
        self,
        cron: str,
        *,
        input: dict[str, Any] | None = None,
        catchup: timedelta = timedelta(days=1),
    ) -> Callable[[TickInput], TickInput]:
        """Start one run of this workflow per cron tick (UTC), exactly once per tick.

        Call it with a fixed ``input``, or use it as a decorator on a function
        of the tick's time that returns the run's input. Each tick's run id is
        ``<workflow>@<tick>``; see :mod:`agentlog.runtime._schedules`.

        Raises:
            InvalidScheduleError: ``cron`` does not parse (raised here, at
                definition time).
        """
        entry = Schedule(self.name, cron, input, catchup)
        self.schedules.append(entry)

        def with_input(fn: TickInput) -> TickInput:
            self.schedules[self.schedules.index(entry)] = Schedule(self.name, cron, fn, catchup)
            return fn

        return with_input

    def check_input(self, input: Mapping[str, Any] | None) -> None:
        """Check a run's input against ``Workflow(input=...)``, if one was given.

        Raises:
            ConfigError: a required key of the input type is missing, or a key
                is not one of its keys; nothing is recorded.
        """
        check_input(self.name, self.input_keys, input)

    def step_name(self, target: Target) -> str:
        """The name of the step ``target`` (a name or a registered step function).

        Raises:
            InvalidRouteError: a function that is not a step of this workflow.
        """
        if isinstance(target, str):
            return target
        name = self._functions.get(target)
        if name is None:
            raise InvalidRouteError(
                f"{getattr(target, '__name__', target)!r} is not a step of workflow "
                f"{self.name!r}; register it with @wf.step or route by name"
            )
        return name

    def mermaid(self) -> str:
        """The step graph as a Mermaid flowchart: every edge a step can take
        (``then`` edges, and the ``goto`` and ``end`` its code returns, bounded
        by its declared ``routes``), including to the end, and no other; see
        :mod:`agentlog.runtime._graph`."""
        self.validate()
        return to_mermaid(self)

    def validate(self) -> None:
        """Check that every edge, route and start names a step.

        Raises:
            WorkflowDefinitionError: naming the missing step.
        """
        for name, (then, routes) in self._raw_edges.items():
            try:
                resolved = [self.step_name(t) for t in then], [self.step_name(t) for t in routes]
            except InvalidRouteError as exc:
                raise WorkflowDefinitionError(
                    f"workflow {self.name!r}: step {name!r}: {exc}"
                ) from None
            step = self.steps[name]
            self.steps[name] = Step(
                name, step.fn, tuple(resolved[0]), step.retry, tuple(resolved[1]), step.timeout
            )
        for target in self.start:
            if target not in self.steps:
                raise WorkflowDefinitionError(
                    f"workflow {self.name!r}: start step {target!r} is not defined"
                )
        for step in self.steps.values():
            for target in (*step.then, *step.routes):
                if target not in self.steps:
                    raise WorkflowDefinitionError(
                        f"workflow {self.name!r}: step {step.name!r} goes to "
                        f"undefined step {target!r}"
                    )

    def __repr__(self) -> str:
        return f"Workflow({self.name!r}, version={self.version!r}, steps={list(self.steps)})"


def _targets(given: Target | Sequence[Target] | None) -> tuple[Target, ...]:
    if given is None:
        return ()
    if isinstance(given, str) or callable(given):
        return (given,)
    return tuple(given)


def _digest(shape: object) -> str:
    return hashlib.sha256(json.dumps(shape).encode()).hexdigest()[:16]


def _schema_of(state_type: type) -> dict[str, Reducer | str]:
    """State key -> reducer from a TypedDict: ``Annotated[T, reducer]``, else "replace"."""
    if not is_typeddict(state_type):
        raise WorkflowDefinitionError(
            f"state={state_type.__name__}: give a TypedDict (reducers as Annotated[type, "
            "reducer]) or a dict of key -> reducer"
        )
    schema: dict[str, Reducer | str] = {}
    for key, hint in get_type_hints(state_type, include_extras=True).items():
        marks = [m for m in get_args(hint)[1:] if isinstance(m, str) or callable(m)]
        schema[key] = marks[0] if get_origin(hint) is Annotated and marks else "replace"
    return schema


def check_max_steps(max_steps: object, error: type[Exception]) -> None:
    """Raise ``error`` unless ``max_steps`` is a whole number of at least 1."""
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise error(f"max_steps must be a whole number of at least 1, got {max_steps!r}")
