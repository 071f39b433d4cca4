"""AgentlogAgent: model requests and tool calls as tasks, approvals as interrupts, replay.

Every test drives Pydantic AI's own offline models (FunctionModel, TestModel)
on a real SQLite log, and compares with the same agent run by Pydantic AI
alone.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import (
    Agent,
    ApprovalRequired,
    DeferredToolRequests,
    ModelResponse,
    ModelRetry,
    RunContext,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.messages import ModelMessage, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from agentlog.errors import InvalidResumeValueError, WorkflowDefinitionError
from agentlog.eventlog.events import StepFailed, TaskCompleted, TaskStarted
from agentlog.pydantic_ai import AgentlogAgent
from agentlog.runtime import RunStatus, Runtime
from tests.pydantic_ai.agents import CALLS, support_agent, uninterrupted_output

RUN = "ticket-1"


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'agentlog.db'}"


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    CALLS.clear()


async def _plain_run() -> tuple[Any, dict[str, int]]:
    """The support agent run by Pydantic AI alone, the refund approved: output, call counts."""
    output = await uninterrupted_output()
    counts = dict(CALLS)
    CALLS.clear()
    return output, counts


async def _task_names(rt: Runtime, run_id: str) -> list[str]:
    """The names of the run's recorded tasks, in the order their results were recorded."""
    names: dict[str, str] = {}
    recorded: list[str] = []
    async for event in rt.log.read(run_id):
        if isinstance(event.data, TaskStarted):
            names[event.data.key] = event.data.name
        elif isinstance(event.data, TaskCompleted):
            recorded.append(names[event.data.key])
    return recorded


async def test_model_requests_and_tool_calls_are_tasks_and_approval_parks(url: str) -> None:
    expected, plain_counts = await _plain_run()
    durable = AgentlogAgent(support_agent())
    async with await Runtime.open(url, workflows=[durable.workflow]) as rt:
        run = await durable.start(rt, "refund my kettle", run_id=RUN)
        assert (await run.wait(timeout=60)).status == RunStatus.WAITING
        [ask] = await run.pending()
        assert ask.payload["approvals"] == [
            {"tool_call_id": "c3", "tool_name": "refund", "args": {"cents": 2599}}
        ]
        assert CALLS["refund"] == 0, "a tool that needs approval ran before it was approved"
        await rt.resume(RUN, {"c3": True})
        assert await durable.output(rt, RUN, timeout=60) == expected
        names = await _task_names(rt, RUN)
        state = await rt.get_state(RUN)
    prefix = "pydantic_ai.support"
    assert names == [
        f"{prefix}.model_request",
        f"{prefix}.tool.lookup",
        f"{prefix}.model_request",
        f"{prefix}.tool.stock",
        f"{prefix}.model_request",
        f"{prefix}.tool.refund",
        f"{prefix}.model_request",
    ]
    assert dict(CALLS) == plain_counts == {"model": 4, "lookup": 1, "stock": 1, "refund": 1}
    kinds = [message["kind"] for message in state.values["messages"]]
    assert kinds[-1] == "response" and len(kinds) == 8, kinds


async def test_a_denied_tool_never_runs(url: str) -> None:
    durable = AgentlogAgent(support_agent())
    async with await Runtime.open(url, workflows=[durable.workflow]) as rt:
        run = await durable.start(rt, "refund my kettle", run_id=RUN)
        await run.wait(timeout=60)
        await rt.resume(RUN, {"c3": False})
        output = await durable.output(rt, RUN, timeout=60)
    assert CALLS["refund"] == 0
    assert output.startswith("done: "), output  # the model was told the refund was denied


async def test_a_step_that_runs_again_repeats_no_model_request_or_tool_call(url: str) -> None:
    """The stock tool fails once after two model requests and a tool call were recorded;
    the step runs again from its start (its retry policy) and gets every recorded result
    back: no model request and no completed tool call runs again."""
    failed: list[str] = []

    async def fail_stock_once(kind: str, arg: str) -> None:
        if kind == "stock" and not failed:
            failed.append(arg)
            raise ConnectionError("inventory service down")

    durable = AgentlogAgent(support_agent(fail_stock_once))
    async with await Runtime.open(url, workflows=[durable.workflow]) as rt:
        run = await durable.start(rt, "refund my kettle", run_id=RUN)
        assert (await run.wait(timeout=60)).status == RunStatus.WAITING
        attempts = [
            event.data.attempt
            async for event in rt.log.read(RUN)
            if isinstance(event.data, StepFailed)
        ]
    assert failed == ["kettle"] and attempts == [1]
    # stock: the failed try and the one that succeeded; the rest once each
    assert dict(CALLS) == {"model": 3, "lookup": 1, "stock": 2}


async def test_a_new_process_replays_recorded_responses(url: str) -> None:
    """A run parked by one runtime continues in another, which calls the model only for
    what was never recorded, and ends with the uninterrupted run's output."""
    expected, plain_counts = await _plain_run()
    durable = AgentlogAgent(support_agent())
    async with await Runtime.open(url, workflows=[durable.workflow]) as rt:
        await (await durable.start(rt, "refund my kettle", run_id=RUN)).wait(timeout=60)
    before = dict(CALLS)
    async with await Runtime.open(url, workflows=[durable.workflow]) as rt:
        await rt.resume(RUN, {"c3": True})
        assert await durable.output(rt, RUN, timeout=60) == expected
    after = {kind: CALLS[kind] - before.get(kind, 0) for kind in CALLS}
    assert after == {"model": 1, "lookup": 0, "stock": 0, "refund": 1}
    assert dict(CALLS) == plain_counts


async def test_each_model_response_and_tool_result_reaches_the_stream(url: str) -> None:
    durable = AgentlogAgent(support_agent())
    async with await Runtime.open(url, workflows=[durable.workflow]) as rt:
        await (await durable.start(rt, "refund my kettle", run_id=RUN)).wait(timeout=60)
        await rt.resume(RUN, {"c3": True})
        await rt.result(RUN, timeout=60)
        seen = [
            (update.data["pydantic_ai"], update.data.get("tool_name"))
            async for update in rt.stream(RUN, "progress")
        ]
    assert seen == [
        ("model_response", None),
        ("tool_result", "lookup"),
        ("model_response", None),
        ("tool_result", "stock"),
        ("model_response", None),
        ("tool_result", "refund"),
        ("model_response", None),
    ]


async def test_test_model_run_equals_the_plain_run(url: str) -> None:
    """Pydantic AI's TestModel calls every tool, then answers with their results."""

    def build() -> Agent[None, str]:
        agent = Agent(TestModel(), name="calc")

        @agent.tool_plain
        def add(x: int, y: int) -> int:
            return x + y

        return agent

    plain = (await build().run("add")).output
    durable = AgentlogAgent(build())
    async with await Runtime.open(url, workflows=[durable.workflow]) as rt:
        assert await durable.run(rt, "add", run_id="calc-1", timeout=60) == plain
        names = await _task_names(rt, "calc-1")
    assert names == [
        "pydantic_ai.calc.model_request",
        "pydantic_ai.calc.tool.add",
        "pydantic_ai.calc.model_request",
    ]


async def test_a_wrong_approval_is_refused_before_anything_is_recorded(url: str) -> None:
    durable = AgentlogAgent(support_agent())
    async with await Runtime.open(url, workflows=[durable.workflow]) as rt:
        await (await durable.start(rt, "refund my kettle", run_id=RUN)).wait(timeout=60)
        with pytest.raises(InvalidResumeValueError, match="c3"):
            await rt.resume(RUN, {"c3": "yes please"})
        assert (await rt.get_state(RUN)).status == RunStatus.WAITING


def test_an_agent_without_a_name_is_refused() -> None:
    with pytest.raises(WorkflowDefinitionError, match="stable name"):
        AgentlogAgent(Agent(TestModel()))
    with pytest.raises(WorkflowDefinitionError, match=r"pydantic_ai\.Agent"):
        AgentlogAgent("support")  # type: ignore[arg-type]


async def test_control_flow_raised_by_a_tool_is_recorded_and_raised_again(url: str) -> None:
    """``ModelRetry`` and ``ApprovalRequired`` from a tool body are recorded results: a step
    that runs again raises them again from the record, without running the body."""
    bodies: Counter[str] = Counter()

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [  # the tools that succeeded (a ModelRetry returns as outcome "retried")
            part.tool_name
            for message in messages
            for part in message.parts
            if isinstance(part, ToolReturnPart) and part.outcome == "success"
        ]
        if "check" not in returned:
            return ModelResponse(parts=[ToolCallPart("check", {}, f"k{len(messages)}")])
        if "charge" not in returned:
            return ModelResponse(parts=[ToolCallPart("charge", {"cents": 9000}, "big")])
        return ModelResponse(parts=[TextPart("charged")])

    agent: Agent[None, str | DeferredToolRequests] = Agent(
        FunctionModel(respond), name="guarded", output_type=[str, DeferredToolRequests]
    )

    @agent.tool_plain
    def check() -> str:
        bodies["check"] += 1
        if bodies["check"] == 1:
            raise ModelRetry("the ledger is busy, call check again")
        if bodies["check"] == 2:
            raise ConnectionError("fails once after the retry: the step runs again")
        return "ok"

    @agent.tool
    def charge(ctx: RunContext[None], cents: int) -> str:
        bodies["charge"] += 1
        if not ctx.tool_call_approved:
            raise ApprovalRequired(metadata={"cents": cents})
        return f"charged {cents}"

    durable = AgentlogAgent(agent)
    async with await Runtime.open(url, workflows=[durable.workflow]) as rt:
        run = await durable.start(rt, "charge it", run_id="guarded-1")
        assert (await run.wait(timeout=60)).status == RunStatus.WAITING
        [ask] = await run.pending()
        assert ask.payload["metadata"] == {"big": {"cents": 9000}}
        await rt.resume("guarded-1", {"big": True})
        assert await durable.output(rt, "guarded-1", timeout=60) == "charged"
    # check: the recorded ModelRetry (not run again on the step's second execution), the
    # failed try, the success; charge: the recorded ApprovalRequired, then the approved call
    assert dict(bodies) == {"check": 3, "charge": 2}
