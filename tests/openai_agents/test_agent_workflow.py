"""agent_workflow: each agent segment of an OpenAI Agents SDK run is its own step.

The agents and the fake model are in agents_app.py: triage looks an order
up and hands off to refunds, whose refund tool needs approval.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, handoff

from agentlog.errors import WorkflowDefinitionError
from agentlog.eventlog.events import StepCompleted, TaskStarted
from agentlog.openai_agents import MODEL_TASK, TOOL_TASK, agent_workflow
from agentlog.runtime import RetryPolicy, Runtime
from tests.openai_agents.agents_app import support_agent_workflow, support_agents
from tests.openai_agents.test_run_agent import APPROVED, Journal
from tests.support.runtime import events_of, run_to_rest

INPUT = {"input": "refund order 42"}


def _url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'agentlog.db'}"


async def _history(rt: Runtime, run_id: str) -> tuple[list[str], list[str]]:
    """Steps completed and tasks started, each in log order."""
    events = await events_of(rt.log, run_id)
    completed = [e.data.step for e in events if isinstance(e.data, StepCompleted)]
    tasks = [e.data.name for e in events if isinstance(e.data, TaskStarted)]
    return completed, tasks


async def test_a_handoff_ends_the_step_and_the_next_agent_runs_in_its_own(
    tmp_path: Path,
) -> None:
    journal = Journal()
    wf = support_agent_workflow(journal)
    async with await Runtime.open(_url(tmp_path), workflows=[wf]) as rt:
        await rt.start(wf, run_id="r1", input=INPUT)
        state = await run_to_rest(rt, "r1")
        assert state.status == "waiting"  # parked on the refund's approval, in step refunds
        [pending] = await rt.pending("r1")
        assert pending.payload["agent"] == "refunds"
        assert pending.payload["tool"] == "issue_refund"
        completed, tasks = await _history(rt, "r1")
        assert completed == ["triage"]
        assert tasks == APPROVED[:4]
        # the conversation so far is the run's state: the handoff is in it
        assert state.values["agent"] == "refunds"
        conversation = state.values["input"]
        assert any(item.get("call_id") == "call-handoff" for item in conversation)

        await rt.resume("r1", True)
        state = await run_to_rest(rt, "r1")
        assert state.status == "completed"
        assert state.values["output"] == "done: refunded 500 on order 42"
        assert state.values["agent"] == "refunds"
        completed, tasks = await _history(rt, "r1")
    assert completed == ["triage", "refunds"]  # one step per agent segment
    assert tasks == APPROVED
    assert journal.repeats() == {}


async def test_a_failed_segment_replays_only_its_own_calls(tmp_path: Path) -> None:
    """The refunds model fails once: the refunds step retries; triage's step
    does not run again, and no recorded call is made twice."""
    journal = Journal()
    record = journal.failing_once()
    wf = support_agent_workflow(record)
    async with await Runtime.open(_url(tmp_path), workflows=[wf]) as rt:
        await rt.start(wf, run_id="r1", input=INPUT)
        assert (await run_to_rest(rt, "r1")).status == "waiting"
        await rt.resume("r1", False)  # rejected: the model is told
        state = await run_to_rest(rt, "r1")
        completed, _ = await _history(rt, "r1")
    assert state.status == "completed"
    assert "refunded" not in state.values["output"]
    assert completed == ["triage", "refunds"]
    kinds = [kind for kind, _ in journal.calls]
    assert kinds.count("model:triage") == 2 and kinds.count("tool:lookup_order") == 1
    assert "tool:issue_refund" not in kinds
    failed_key = journal.calls[kinds.index("model:refunds")][1]
    assert journal.repeats() == {failed_key: 2}  # only the failed call ran again, same key


async def test_a_run_without_a_handoff_is_one_step(tmp_path: Path) -> None:
    journal = Journal()
    refunds = support_agents(journal).handoffs[0]
    assert isinstance(refunds, Agent)
    wf = agent_workflow("oa-one", refunds)
    async with await Runtime.open(_url(tmp_path), workflows=[wf]) as rt:
        await rt.start(wf, run_id="r1", input=INPUT)
        assert (await run_to_rest(rt, "r1")).status == "waiting"
        await rt.resume("r1", True)
        state = await run_to_rest(rt, "r1")
        completed, tasks = await _history(rt, "r1")
    assert state.values["output"] == "done: refunded 500 on order 42"
    assert completed == ["refunds"]
    assert tasks == [f"{MODEL_TASK}:refunds", f"{TOOL_TASK}:issue_refund", f"{MODEL_TASK}:refunds"]


def test_the_steps_are_the_agents_and_their_routes_the_handoffs() -> None:
    wf = support_agent_workflow(Journal())
    wf.validate()
    assert list(wf.steps) == ["triage", "refunds"]
    assert wf.steps["triage"].routes == ("refunds",)
    assert wf.steps["refunds"].routes == ()


def test_two_agents_of_one_name_are_refused() -> None:
    triage = support_agents(Journal())
    triage.handoffs.append(Agent(name="refunds"))
    with pytest.raises(WorkflowDefinitionError, match="two agents named 'refunds'"):
        agent_workflow("oa-dup", triage)


def test_a_handoff_object_needs_its_agent_listed() -> None:
    triage = support_agents(Journal())
    refunds = triage.handoffs[0]
    assert isinstance(refunds, Agent)
    triage.handoffs = [handoff(refunds)]
    with pytest.raises(WorkflowDefinitionError, match=r"agents=\[\.\.\.\]"):
        agent_workflow("oa-obj", triage)
    wf = agent_workflow("oa-obj", triage, agents=[refunds])
    assert list(wf.steps) == ["triage", "refunds"]


@pytest.mark.parametrize("field", ["model", "call_model_input_filter"])
def test_run_config_settings_that_hide_the_handoff_are_refused(field: str) -> None:
    value: Any = "gpt-x" if field == "model" else (lambda data: data.model_data)
    config = RunConfig(tracing_disabled=True, **{field: value})
    with pytest.raises(WorkflowDefinitionError, match=field):
        agent_workflow("oa-cfg", support_agents(Journal()), run_config=config)


def test_a_local_tool_is_refused_when_the_workflow_is_built() -> None:
    from agents import CustomTool

    async def shout(_context: Any, text: str) -> str:
        return text.upper()

    triage = support_agents(Journal())
    triage.handoffs[0].tools.append(  # type: ignore[union-attr]
        CustomTool(name="shout", description="Shout.", on_invoke_tool=shout)
    )
    with pytest.raises(WorkflowDefinitionError, match="agent 'refunds' has CustomTool"):
        agent_workflow("oa-local", triage)


@pytest.mark.parametrize("max_turns", [3, 4])
async def test_max_turns_counts_the_turns_of_every_segment(max_turns: int, tmp_path: Path) -> None:
    """The run takes four model turns: triage two (the lookup, the handoff),
    refunds two (the refund, the answer). With max_turns=3 it fails in the
    refunds step, where an uninterrupted SDK run would fail too; with 4 it
    completes."""
    journal = Journal()
    wf = agent_workflow(
        "oa-turns", support_agents(journal), max_turns=max_turns, retry=RetryPolicy(max_attempts=1)
    )
    async with await Runtime.open(_url(tmp_path), workflows=[wf]) as rt:
        await rt.start(wf, run_id="r1", input=INPUT)
        assert (await run_to_rest(rt, "r1")).status == "waiting"
        await rt.resume("r1", True)
        state = await run_to_rest(rt, "r1")
    kinds = [kind for kind, _ in journal.calls]
    assert kinds.count("model:refunds") == max_turns - 2
    if max_turns == 3:
        assert state.status == "failed" and state.values["turns"] == 2
    else:
        assert state.status == "completed" and state.values["turns"] == 4
