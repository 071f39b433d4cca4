"""``AgentlogAgent``: a Pydantic AI agent whose every run is an agentlog run.

The run is a workflow of two steps. ``agent`` runs the agent with the
:class:`~agentlog.pydantic_ai._recorder._Recorder` capability, so each model
request and each tool call is a task; it writes the agent's message history
(Pydantic AI's own ``ModelMessagesTypeAdapter`` JSON) to the run's state and
either ends the run with the output or, when tools wait on a human
(``requires_approval``, ``ApprovalRequired``, ``CallDeferred``), goes to
``approve``. ``approve`` parks the run on one interrupt whose answer maps each
waiting tool call id to its approval or result; then ``agent`` continues the
same message history with those answers.

Why a step and not one durable unit per node: a step that runs again (after
a crash, on another worker) replays the agent from the state at the step's
start, and every task the agent asks for gets its recorded result back, so
no completed model request or tool call runs again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, Literal

from pydantic import TypeAdapter
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ModelMessagesTypeAdapter,
)
from pydantic_ai.tools import AgentDepsT
from pydantic_core import to_jsonable_python
from typing_extensions import TypeVar

from agentlog.errors import WorkflowDefinitionError
from agentlog.pydantic_ai._recorder import _Recorder
from agentlog.pydantic_ai._stream import _StreamingRecorder
from agentlog.runtime import (
    Next,
    RetryPolicy,
    RunHandle,
    Runtime,
    StepContext,
    Workflow,
    end,
    goto,
    thaw,
)

OutputDataT = TypeVar("OutputDataT", default=str)

#: A model request is retried by default: a provider's transient error (a 429,
#: a 503) should not fail the step; the agent's own retries cover bad output.
DEFAULT_MODEL_RETRY = RetryPolicy(max_attempts=3, initial_interval=1.0)

_STATE: dict[str, Literal["replace"]] = {
    "prompt": "replace",  # the user prompt the run started with
    "messages": "replace",  # the agent's message history (ModelMessagesTypeAdapter JSON)
    "pending": "replace",  # the tool calls waiting on a human, or None
    "answers": "replace",  # the human's answers to them, by tool call id
    "output": "replace",  # the agent's output, in its JSON form
}


class AgentlogAgent(Generic[AgentDepsT, OutputDataT]):
    """Run a ``pydantic_ai.Agent`` as a durable agentlog workflow.

    Register :attr:`workflow` with every runtime and worker that may drive a
    run of it (``Runtime.open(url, workflows=[durable.workflow])``): it is
    registered by name, so a worker fleet drives it like any workflow.

    Args:
        agent: the agent. Its model, tools, toolsets and output type are used
            as they are; only its model requests and tool calls are wrapped.
        name: names the workflow (``pydantic_ai.<name>``) and every task
            (``pydantic_ai.<name>.model_request``,
            ``pydantic_ai.<name>.tool.<tool>``); defaults to the agent's name.
            Keep it stable: recorded runs find their tasks by it.
        version: the workflow's version (see workflow versioning).
        deps: the agent's dependencies in this process. They are not recorded
            (they may hold clients); every process that drives the run passes
            its own.
        model_retry: the retry policy of each model request.
        tool_retry: the retry policy of each tool call; None tries a call once
            per step attempt.
        tool_retries: a retry policy per tool name, over ``tool_retry``.
        stream: run each model request as a streamed request and publish its
            stream events (part start, delta, end, final result) to
            ``Runtime.stream`` while it runs, batched (see
            :mod:`agentlog.pydantic_ai._stream`). The model must stream
            (a ``FunctionModel`` needs a ``stream_function``). Pydantic AI
            reads the stream in its own task, so the model's own code does
            not see the task's context (``current_idempotency_key()``).
        stream_interval: at most this many seconds between a stream event
            and the progress item that publishes it.

    Raises:
        WorkflowDefinitionError: neither ``name`` nor the agent's name is set,
            or ``stream_interval`` is not a positive number.
    """

    def __init__(
        self,
        agent: Agent[AgentDepsT, OutputDataT],
        *,
        name: str | None = None,
        version: str = "1",
        deps: AgentDepsT | None = None,
        model_retry: RetryPolicy | None = DEFAULT_MODEL_RETRY,
        tool_retry: RetryPolicy | None = None,
        tool_retries: Mapping[str, RetryPolicy | None] | None = None,
        stream: bool = False,
        stream_interval: float = 0.1,
    ) -> None:
        if not isinstance(agent, Agent):
            raise WorkflowDefinitionError(
                f"AgentlogAgent wraps a pydantic_ai.Agent, got {type(agent).__name__}"
            )
        name = name or agent.name
        if not name:
            raise WorkflowDefinitionError(
                "AgentlogAgent needs a stable name for its workflow and tasks: "
                "pass Agent(..., name='support') or AgentlogAgent(agent, name='support')"
            )
        if not (
            isinstance(stream_interval, int | float)
            and not isinstance(stream_interval, bool)
            and 0 < stream_interval < float("inf")
        ):
            raise WorkflowDefinitionError(
                f"stream_interval must be a positive number of seconds, got {stream_interval!r}"
            )
        self.agent = agent
        self.stream = stream
        self._stream_interval = float(stream_interval)
        self.name = name
        self.deps = deps
        self._model_retry = model_retry
        self._tool_retry = tool_retry
        self._tool_retries = dict(tool_retries or {})
        self.workflow: Workflow[dict[str, Any]] = Workflow(
            f"pydantic_ai.{name}", version=version, state=_STATE, start="agent"
        )
        self.workflow.step(name="agent", routes=["approve"])(self._agent_step)
        self.workflow.step(name="approve", then="agent")(self._approve_step)

    async def start(self, rt: Runtime, prompt: str, *, run_id: str) -> RunHandle:
        """Start a run of the agent on ``prompt`` (see ``Runtime.start``)."""
        return await rt.start(self.workflow, run_id=run_id, input={"prompt": prompt})

    async def submit(self, rt: Runtime, prompt: str, *, run_id: str) -> RunHandle:
        """Record a run of the agent for a worker to drive (see ``Runtime.submit``)."""
        return await rt.submit(self.workflow, run_id=run_id, input={"prompt": prompt})

    async def run(
        self,
        rt: Runtime,
        prompt: str,
        *,
        run_id: str,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> OutputDataT | Any:
        """Start a run and return its output once it completes.

        Raises:
            WorkflowError: the run parked on tools that wait for approval;
                answer them with ``rt.resume(run_id, {tool_call_id: ...})``
                and read the output with :meth:`output`.
        """
        await self.start(rt, prompt, run_id=run_id)
        return await self.output(rt, run_id, timeout=timeout)

    async def output(
        self,
        rt: Runtime,
        run_id: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> OutputDataT | Any:
        """The output of a completed run: rebuilt as the agent's output type
        when that is a plain type, else in its recorded JSON form."""
        values = await rt.result(run_id, timeout=timeout)
        output_type = self.agent.output_type
        if isinstance(output_type, type):
            return TypeAdapter(output_type).validate_python(values["output"])
        return values["output"]

    async def _agent_step(self, ctx: StepContext[Any]) -> Next:
        """Run the agent from the run's message history; park, or end with its output."""
        args = (ctx, self.workflow.name, self._model_retry, self._tool_retry, self._tool_retries)
        recorder = (
            _StreamingRecorder(*args, interval=self._stream_interval)
            if self.stream
            else _Recorder(*args)
        )
        history = ctx.state.get("messages")
        if history is None:
            prompt, messages, answers = ctx.state["prompt"], None, None
        else:
            prompt, messages = None, ModelMessagesTypeAdapter.validate_python(thaw(history))
            answers = _answers(thaw(ctx.state["pending"]), thaw(ctx.state["answers"]))
        try:
            with Agent.parallel_tool_call_execution_mode("sequential"):
                result = await self.agent.run(
                    prompt,
                    message_history=messages,
                    deferred_tool_results=answers,
                    deps=self.deps,  # type: ignore[arg-type]  # None when the agent needs none
                    capabilities=[recorder],
                    run_id=f"{ctx.run_id}:{ctx.superstep}",
                )
        except BaseException:
            recorder.discard()  # the step failed: publish nothing more from it
            raise
        await recorder.flush()
        dumped = ModelMessagesTypeAdapter.dump_python(result.all_messages(), mode="json")
        if isinstance(result.output, DeferredToolRequests):
            return goto("approve", messages=dumped, pending=_pending(result.output))
        return end(messages=dumped, pending=None, output=to_jsonable_python(result.output))

    async def _approve_step(self, ctx: StepContext[Any]) -> dict[str, Any]:
        """Park on one interrupt: each waiting tool call id -> approval (bool) or result."""
        pending = thaw(ctx.state["pending"])
        expects = {call["tool_call_id"]: "bool" for call in pending["approvals"]}
        expects |= {call["tool_call_id"]: "any" for call in pending["calls"]}
        return {"answers": ctx.interrupt(pending, expects=expects)}


def _pending(requests: DeferredToolRequests) -> dict[str, Any]:
    """The tool calls waiting on a human, as the interrupt shows them."""

    def calls(parts: list[Any]) -> list[dict[str, Any]]:
        return [
            {"tool_call_id": p.tool_call_id, "tool_name": p.tool_name, "args": p.args}
            for p in parts
        ]

    return {
        "approvals": calls(requests.approvals),
        "calls": calls(requests.calls),
        "metadata": to_jsonable_python(requests.metadata),
    }


def _answers(pending: dict[str, Any], answers: dict[str, Any]) -> DeferredToolResults:
    """The human's answers, as Pydantic AI's deferred tool results."""
    approvals = {c["tool_call_id"]: answers[c["tool_call_id"]] for c in pending["approvals"]}
    calls = {c["tool_call_id"]: answers[c["tool_call_id"]] for c in pending["calls"]}
    return DeferredToolResults(approvals=approvals, calls=calls)
