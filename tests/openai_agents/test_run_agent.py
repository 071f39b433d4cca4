"""run_agent: an OpenAI Agents SDK run as an agentlog run, on SQLite.

The agents and the fake model are in agents_app.py: triage looks an order
up, hands off to refunds, whose refund tool needs approval.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, ModelResponse, RunConfig, Usage, function_tool
from agents.testing import assistant_message, function_call

from agentlog.errors import (
    LeaseExpiredError,
    NondeterminismError,
    RunFailedError,
    WorkflowDefinitionError,
)
from agentlog.eventlog.events import TaskCompleted, TaskStarted
from agentlog.openai_agents import MODEL_TASK, TOOL_TASK, run_agent
from agentlog.runtime import (
    RetryPolicy,
    Runtime,
    StepContext,
    Workflow,
    current_idempotency_key,
    end,
)
from tests.openai_agents.agents_app import (
    FakeModel,
    Record,
    support_agents,
    support_workflow,
    tool_outputs,
    tools_of,
)
from tests.support.runtime import events_of, run_to_rest

QUESTION = {"question": "refund order 42"}
#: the tasks of an approved run, in the order the step calls them
APPROVED = [
    f"{MODEL_TASK}:triage",
    f"{TOOL_TASK}:lookup_order",
    f"{MODEL_TASK}:triage",  # answers with the handoff to refunds
    f"{MODEL_TASK}:refunds",  # asks for the refund: the run parks here
    f"{TOOL_TASK}:issue_refund",
    f"{MODEL_TASK}:refunds",
]


class Journal:
    """Every model and tool call the fake agents made: (kind, idempotency key)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, kind: str, key: str) -> None:
        self.calls.append((kind, key))

    def repeats(self) -> dict[str, int]:
        """Keys called more than once, with how often."""
        return {key: n for key, n in Counter(k for _, k in self.calls).items() if n > 1}

    def failing_once(self, kind: str = "model:refunds") -> Record:
        """A record hook that journals every call and fails the first call of
        ``kind`` (the refunds model, by default) as a dropped connection."""
        failures = [kind]

        def record(called: str, key: str) -> None:
            self(called, key)
            if called in failures:
                failures.remove(called)
                raise ConnectionError("the model's connection dropped")

        return record


def _chat_workflow(
    name: str, agent: Agent[Any], prompt: str, executions: list[int] | None = None
) -> Workflow:
    """One step (retried up to three times) runs ``agent`` on ``prompt``; its
    final output is the run's ``answer``. ``executions`` gets each attempt."""
    wf = Workflow(name, version="1", state={"answer": "replace"})

    @wf.step(retry=RetryPolicy(max_attempts=3, initial_interval=0.01))
    async def chat(ctx: StepContext) -> Any:
        if executions is not None:
            executions.append(ctx.attempt)
        result = await run_agent(ctx, agent, prompt)
        return end(answer=str(result.final_output))

    return wf


def _url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'agentlog.db'}"


async def _tasks(rt: Runtime, run_id: str) -> tuple[list[str], dict[str, Any]]:
    """The task names started, in order, and the recorded results by key."""
    events = await events_of(rt.log, run_id)
    names = [e.data.name for e in events if isinstance(e.data, TaskStarted)]
    results = {e.data.key: e.data.result for e in events if isinstance(e.data, TaskCompleted)}
    return names, results


async def test_model_and_tool_calls_are_tasks_and_an_approval_parks(tmp_path: Path) -> None:
    journal = Journal()
    wf = support_workflow(journal)
    async with await Runtime.open(_url(tmp_path), workflows=[wf]) as rt:
        await rt.start(wf, run_id="r1", input=QUESTION)
        state = await run_to_rest(rt, "r1")
        assert state.status == "waiting"
        [pending] = await rt.pending("r1")
        assert pending.payload == {
            "kind": "tool_approval",
            "agent": "refunds",
            "tool": "issue_refund",
            "arguments": '{"order":"42","cents":500}',
        }
        assert pending.expects == "bool"
        names, results = await _tasks(rt, "r1")
        assert names == APPROVED[:4]
        # each call ran under the key its task recorded, and nothing ran unrecorded
        assert [k for _, k in journal.calls] == list(results)
        assert "issue_refund" not in str(journal.calls)

        await rt.resume("r1", True)
        state = await run_to_rest(rt, "r1")
        assert state.status == "completed"
        assert state.values["answer"] == "done: refunded 500 on order 42"
        names, results = await _tasks(rt, "r1")
        assert names == APPROVED
        # the step ran again from its start on resume: no recorded call ran again
        assert journal.repeats() == {}
        assert [k for _, k in journal.calls] == list(results)


async def test_a_rejected_tool_never_runs_and_the_model_is_told(tmp_path: Path) -> None:
    journal = Journal()
    wf = support_workflow(journal)
    async with await Runtime.open(_url(tmp_path), workflows=[wf]) as rt:
        await rt.start(wf, run_id="r1", input=QUESTION)
        assert (await run_to_rest(rt, "r1")).status == "waiting"
        await rt.resume("r1", False)
        state = await run_to_rest(rt, "r1")
        assert state.status == "completed"
        assert state.values["answer"].startswith("done: ")
        assert "refunded" not in state.values["answer"]
        assert [kind for kind, _ in journal.calls].count("tool:issue_refund") == 0
        assert journal.repeats() == {}


async def test_a_failed_step_retries_without_repeating_recorded_calls(tmp_path: Path) -> None:
    """The step fails after the handoff was recorded; its retry replays the
    recorded responses, continues with the refunds agent, and calls nothing twice."""
    journal = Journal()
    record = journal.failing_once()
    wf = support_workflow(record)
    async with await Runtime.open(_url(tmp_path), workflows=[wf]) as rt:
        await rt.start(wf, run_id="r1", input=QUESTION)
        assert (await run_to_rest(rt, "r1")).status == "waiting"
        await rt.resume("r1", True)
        state = await run_to_rest(rt, "r1")
        assert state.status == "completed"
        assert state.values["answer"] == "done: refunded 500 on order 42"
    kinds = [kind for kind, _ in journal.calls]
    assert kinds.count("model:triage") == 2  # the lookup turn and the handoff turn, once each
    assert kinds.count("tool:lookup_order") == 1
    assert kinds.count("model:refunds") == 3  # failed, then the refund turn, then the answer
    failed_key = journal.calls[kinds.index("model:refunds")][1]
    assert journal.repeats() == {failed_key: 2}  # only the failed call ran again, same key


async def test_the_callers_agents_are_left_as_they_were(tmp_path: Path) -> None:
    journal = Journal()
    agent = support_agents(journal)
    tools = [(tool, tool.on_invoke_tool) for tool in tools_of(agent)]
    model, handoffs = agent.model, list(agent.handoffs)
    wf = Workflow("oa-plain", version="1", state={"answer": "replace"})

    @wf.step
    async def chat(ctx: StepContext) -> Any:
        result = await run_agent(ctx, agent, "refund order 42")
        return end(answer=str(result.final_output))

    async with await Runtime.open(_url(tmp_path), workflows=[wf]) as rt:
        await rt.start(wf, run_id="r1", input={})
        assert (await run_to_rest(rt, "r1")).status == "waiting"
    assert agent.model is model and agent.handoffs == handoffs
    assert [(t, t.on_invoke_tool) for t in tools_of(agent)] == tools


async def _run_step(tmp_path: Path, body: Any) -> Any:
    """Run a one-step workflow whose step awaits ``body(ctx)``; the run's state."""
    wf = Workflow("oa-bad", version="1", state={"answer": "replace"})

    @wf.step
    async def chat(ctx: StepContext) -> Any:
        await body(ctx)
        return end(answer="unreachable")

    async with await Runtime.open(_url(tmp_path), workflows=[wf]) as rt:
        await rt.start(wf, run_id="bad", input={})
        return await run_to_rest(rt, "bad")


async def test_run_agent_without_a_step_context_says_what_to_pass() -> None:
    agent = Agent(name="a")
    with pytest.raises(WorkflowDefinitionError, match="StepContext as its first argument"):
        await run_agent(object(), agent, "hi")  # type: ignore[arg-type]


async def test_a_run_wide_model_name_is_refused_with_what_to_do(tmp_path: Path) -> None:
    agent = support_agents(Journal())

    async def body(ctx: StepContext) -> None:
        await run_agent(ctx, agent, "hi", run_config=RunConfig(model="gpt-x"))

    with pytest.raises(
        RunFailedError, match=r"WorkflowDefinitionError: .*give each agent its model"
    ):
        await _run_step(tmp_path, body)


async def test_a_local_tool_that_would_run_again_on_replay_is_refused(tmp_path: Path) -> None:
    """A custom tool runs on this machine outside on_invoke_tool: unrecorded, it
    would run again whenever the step replays, so run_agent refuses the agent."""
    from agents import CustomTool

    async def shout(_context: Any, text: str) -> str:
        return text.upper()

    tool = CustomTool(name="shout", description="Shout.", on_invoke_tool=shout)
    agent = support_agents(Journal())
    agent.handoffs[0].tools.append(tool)  # type: ignore[union-attr]  # on refunds, behind the handoff

    async def body(ctx: StepContext) -> None:
        await run_agent(ctx, agent, "hi")

    with pytest.raises(RunFailedError, match=r"agent 'refunds' has CustomTool: .*function_tool"):
        await _run_step(tmp_path, body)


async def test_a_tool_timeout_is_recorded_so_a_replay_gives_the_model_the_same(
    tmp_path: Path,
) -> None:
    """The lookup hangs past its timeout_seconds once; the model is told it timed
    out. A later failure makes the step replay: the lookup must not run again
    (it would answer now, and the run would go another way than its recorded
    model responses); the timeout text is its recorded result."""
    journal = Journal()
    record = journal.failing_once()
    hangs = [asyncio.Event()]  # never set: the first lookup waits until it is cancelled

    async def before_lookup() -> None:
        if hangs:
            await hangs.pop().wait()

    agent = support_agents(record, lookup_timeout=0.5, before_lookup=before_lookup)
    wf = _chat_workflow("oa-timeout", agent, "refund order 42")

    async with await Runtime.open(_url(tmp_path), workflows=[wf]) as rt:
        await rt.start(wf, run_id="r1", input={})
        assert (await run_to_rest(rt, "r1")).status == "waiting"  # after one step retry
        _, results = await _tasks(rt, "r1")
    kinds = [kind for kind, _ in journal.calls]
    assert kinds.count("tool:lookup_order") == 1, journal.calls
    lookup_key = journal.calls[kinds.index("tool:lookup_order")][1]
    assert results[lookup_key] == "Tool 'lookup_order' timed out after 0.5 seconds."


@pytest.mark.parametrize("where", ["agent", "run_config"])
async def test_the_sdks_own_model_retry_is_refused_with_what_to_do(
    where: str, tmp_path: Path
) -> None:
    """Each of the SDK's retries would be a task call of its own: a replay, where
    the failed try may succeed, could hand one turn another turn's response."""
    from agents import ModelRetrySettings, ModelSettings

    settings = ModelSettings(retry=ModelRetrySettings(max_retries=2))
    agent = support_agents(Journal())
    config = RunConfig(tracing_disabled=True)
    if where == "agent":
        agent.handoffs[0].model_settings = settings  # type: ignore[union-attr]
    else:
        config.model_settings = settings

    async def body(ctx: StepContext) -> None:
        await run_agent(ctx, agent, "hi", run_config=config)

    with pytest.raises(RunFailedError, match=r"sets ModelSettings.retry: .*model_retry="):
        await _run_step(tmp_path, body)


async def test_a_replay_asking_the_model_something_else_is_refused(tmp_path: Path) -> None:
    """The triage agent's instructions change between two executions of the step
    (code changed under a running run): the recorded response answered another
    conversation, so the replay raises NondeterminismError instead of handing it over."""
    journal = Journal()
    executions: list[int] = []
    agent = support_agents(journal.failing_once())
    agent.instructions = lambda _ctx, _agent: f"version {len(executions)}"
    wf = _chat_workflow("oa-changed", agent, "refund order 42", executions)

    async with await Runtime.open(_url(tmp_path), workflows=[wf]) as rt:
        await rt.start(wf, run_id="r1", input={})
        with pytest.raises(NondeterminismError, match=r"model:triage for another conversation"):
            await run_to_rest(rt, "r1")
    assert [kind for kind, _ in journal.calls].count("model:triage") == 2  # none on replay


async def test_tool_calls_side_by_side_replay_by_their_own_keys(tmp_path: Path) -> None:
    """One model response asks for three lookups at once (the SDK runs them side
    by side); after a step failure the replay hands each its own result."""
    journal = Journal()
    failures = ["model:final"]

    class Fanout(FakeModel):
        async def get_response(
            self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
        ) -> ModelResponse:
            outputs = tool_outputs(input)
            if not outputs:
                self.record("model:fanout", current_idempotency_key())
                calls = [
                    function_call("lookup", {"order": str(n)}, call_id=f"call-{n}")
                    for n in (1, 2, 3)
                ]
                return ModelResponse(output=calls, usage=Usage(requests=1), response_id=None)
            self.record("model:final", current_idempotency_key())
            if failures:
                raise ConnectionError(failures.pop())
            text = "; ".join(outputs[f"call-{n}"] for n in (1, 2, 3))
            return ModelResponse(
                output=[assistant_message(text)], usage=Usage(requests=1), response_id=None
            )

    @function_tool
    async def lookup(order: str) -> str:
        """Look an order up."""
        journal(f"tool:lookup:{order}", current_idempotency_key())
        return f"order {order} found"

    agent = Agent(name="fanout", model=Fanout("fanout", journal), tools=[lookup])
    wf = _chat_workflow("oa-fanout", agent, "look up three orders")

    async with await Runtime.open(_url(tmp_path), workflows=[wf]) as rt:
        await rt.start(wf, run_id="r1", input={})
        state = await run_to_rest(rt, "r1")
        _, results = await _tasks(rt, "r1")
    assert state.values["answer"] == "order 1 found; order 2 found; order 3 found"
    tools = [(kind, key) for kind, key in journal.calls if kind.startswith("tool:")]
    assert sorted(kind for kind, _ in tools) == [f"tool:lookup:{n}" for n in (1, 2, 3)]
    for kind, key in tools:  # each key's recorded result is its own order's
        assert results[key] == f"order {kind.rsplit(':', 1)[1]} found"
    assert [kind for kind, _ in journal.calls].count("model:final") == 2  # failed once


async def test_a_writer_that_must_stop_in_a_tool_call_stops_the_run_not_fails_it(
    tmp_path: Path,
) -> None:
    """The SDK wraps an error of a tool call in its ``UserError``. When the
    step's writer may not begin the tool's effect (its lease ran out by its own
    clock, as on a loaded machine; or it was fenced), the step must not fail
    and be retried over it: the agentlog error leaves the step, the writer
    stops, and the run stays running for the next writer."""
    journal = Journal()
    rts: list[Runtime] = []

    def record(kind: str, key: str) -> None:
        journal(kind, key)
        if kind == "model:triage" and len(journal.calls) == 1:  # the lookup call comes next
            executor = rts[0].driver.active_run("r1")
            assert executor is not None
            executor.writer._lease_deadline = 0.0  # type: ignore[attr-defined]  # ran out

    wf = support_workflow(record)
    async with await Runtime.open(_url(tmp_path), workflows=[wf]) as rt:
        rts.append(rt)
        await rt.start(wf, run_id="r1", input=QUESTION)
        with pytest.raises(LeaseExpiredError):
            await run_to_rest(rt, "r1")
        state = await rt.get_state("r1")
        failed = [e.data for e in await events_of(rt.log, "r1") if e.type == "StepFailed"]
    assert state.status == "running"  # not failed: another writer goes on with it
    assert failed == []
    assert [kind for kind, _ in journal.calls] == ["model:triage"]  # no tool call ran
