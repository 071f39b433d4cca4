"""Write the schema-v1 golden log: ``python -m tests.golden.make_golden``.

Run it ONLY when adding a fixture for a new schema version (then commit the
new files next to the old ones). ``test_golden.py`` never regenerates: it
replays the committed bytes and compares with the committed expected state,
so a change in the codec, the upcasters or the fold that alters how an old
log replays fails the test.

Three runs, so that every event type appears:

* ``golden-main``: plan task, a fan-out whose branch fails once (StepFailed)
  and whose task fails once (TaskFailed), a draft, an approval interrupt, a
  migration to version 2 (RunMigrated), resume, an email task, completion;
* ``golden-failed``: a step that fails for good (RunFailed);
* ``golden-cancelled``: parked, then cancelled (RunCancelled).

RunRetried came later (same schema version, a new type): its run,
``golden-retried`` (fails for good, then ``Runtime.retry`` and completion),
was appended to the committed files with ``--append-retried``; the bytes of
the first three runs were not touched. Likewise TimerFired and
ProgressReported: ``golden-timers`` (progress, a sleep, an interrupt that
times out), appended with ``--append-timers``. And the LangGraph saver's
CheckpointSaved, WritesSaved and CheckpointsRemoved: ``golden-langgraph`` (a
LangGraph thread: a growing message list, an interrupt, its resume, then a
prune), appended with ``--append-langgraph``. And RunShredded:
``golden-shredded`` (parked, then ``Runtime.shred``: cancelled, key destroyed,
RunShredded), appended with ``--append-shredded``; its events are stored
here in clear (read back with the key still cached), so it folds. And
RunForked: ``golden-forked`` (``golden-retried``'s first events forked with
an update, then run to completion), appended with ``--append-forked``; the
committed states gained ``forked_from`` (null) with it, the one field it adds.
And MessageSent, MessageReceived and ValuePublished: ``golden-messages`` (a
message sent while the run asks a question, received after the answer; a
recv that parks and a message that wakes it; a publish), appended with
``--append-messages``; the committed states gained ``inbox``, ``received``,
``message_keys``, ``published`` (empty dicts) and ``published_calls`` (an
empty list) with it, the fields those events fold into. And RunAdmitted:
``golden-queued`` (a run of a queue, submitted with a priority, admitted and
driven by a worker), appended with ``--append-queued``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import operator
import sys
from pathlib import Path
from typing import Annotated, Any, TypedDict

from agentlog.eventlog.codec import encode_event
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.projector import fold
from agentlog.runtime import (
    Queue,
    RetryPolicy,
    Runtime,
    RuntimeConfig,
    StepContext,
    Workflow,
    end,
    goto,
)

HERE = Path(__file__).parent
LOG_FILE = HERE / "v1_run.jsonl"
EXPECTED_FILE = HERE / "v1_expected.json"
RUNS = ("golden-main", "golden-failed", "golden-cancelled")


def build(version: str) -> Workflow:
    state: dict[str, str] = {
        "topic": "replace",
        "notes": "append",
        "meta": "merge",
        "draft": "replace",
        "sent": "replace",
    }
    if version == "2":
        state["reviewer"] = "replace"
    wf = Workflow(
        "golden",
        version=version,
        state=state,
        retry=RetryPolicy(max_attempts=2, initial_interval=0.001),
    )
    flaky = {"step": 1, "task": 1}

    @wf.step
    async def plan(ctx: StepContext) -> Any:
        if ctx.run_id == "golden-failed":
            raise ValueError("the planner is broken")
        text = await ctx.task("llm.plan", lambda: f"plan: {ctx.state['topic']}")
        return goto("search_web", "search_docs", notes=[text], meta={"planned": True})

    @wf.step(then="draft")
    async def search_web(ctx: StepContext) -> Any:
        if flaky["step"]:
            flaky["step"] -= 1
            raise ConnectionError("search timed out")
        return {"notes": ["web hit"], "meta": {"web": 1}}

    @wf.step(then="draft")
    async def search_docs(ctx: StepContext) -> Any:
        def fetch() -> str:
            if flaky["task"]:
                flaky["task"] -= 1
                raise TimeoutError("docs API 503")
            return "docs hit"

        try:
            hit = await ctx.task("docs", fetch)
        except TimeoutError:
            hit = await ctx.task("docs", fetch)  # a second call: a fresh key
        return {"notes": [hit]}

    @wf.step
    async def draft(ctx: StepContext) -> Any:
        text = await ctx.task("llm.draft", lambda: " | ".join(ctx.state["notes"]))
        return goto("approve", draft=text)

    @wf.step
    async def approve(ctx: StepContext) -> Any:
        answer = ctx.interrupt({"draft": ctx.state["draft"]}, expects={"approved": "bool"})
        if not answer["approved"]:
            return end(sent=None)
        receipt = await ctx.task("email", lambda: "msg-0001")
        return end(sent=receipt)

    return wf


async def generate() -> tuple[list[bytes], dict[str, Any]]:
    log = MemoryEventLog()
    config = RuntimeConfig(owner="golden-host:1", lease_seconds=60)
    async with Runtime(log, workflows=[build("1")], config=config) as rt:
        for run_id in RUNS:
            await rt.start(
                "golden", run_id=run_id, input={"topic": "event sourcing"}, durability="sync"
            )
            await rt.wait(run_id)
        await rt.cancel("golden-cancelled", "the request was withdrawn")
    v2 = build("2")
    v2.migration("1")(lambda values: {**values, "reviewer": "ops"})
    async with Runtime(log, workflows=[v2], config=config) as rt:
        await rt.resume("golden-main", {"approved": True})
        await rt.wait("golden-main")
    raw: list[bytes] = []
    expected: dict[str, Any] = {}
    for run_id in RUNS:
        events = [e async for e in log.read(run_id)]
        raw.extend(encode_event(e) for e in events)
        expected[run_id] = json.loads(json.dumps(fold(events).to_dict(), sort_keys=True))
    return raw, expected


async def generate_retried() -> tuple[list[bytes], dict[str, Any]]:
    """The ``golden-retried`` run: a failure, a retry with fixed code, completion."""
    log = MemoryEventLog()
    config = RuntimeConfig(owner="golden-host:1", lease_seconds=60)
    broken = {"yes": True}
    wf = Workflow("golden-retry", state={"topic": "replace", "answer": "replace"},
                  retry=RetryPolicy(max_attempts=1))  # fmt: skip

    @wf.step
    async def answer(ctx: StepContext) -> Any:
        text = await ctx.task("llm.answer", lambda: f"about {ctx.state['topic']}")
        if broken["yes"]:
            raise ConnectionError("the model is down")
        return end(answer=text)

    async with Runtime(log, workflows=[wf], config=config) as rt:
        await rt.start(wf, run_id="golden-retried", input={"topic": "retries"}, durability="sync")
        await rt.wait("golden-retried")
        broken["yes"] = False
        await rt.retry("golden-retried")
        await rt.wait("golden-retried")
    events = [e async for e in log.read("golden-retried")]
    expected = json.loads(json.dumps(fold(events).to_dict(), sort_keys=True))
    return [encode_event(e) for e in events], {"golden-retried": expected}


async def generate_timers() -> tuple[list[bytes], dict[str, Any]]:
    """The ``golden-timers`` run: progress, a durable sleep, an interrupt that times out."""
    log = MemoryEventLog()
    config = RuntimeConfig(owner="golden-host:1", lease_seconds=60, worker=True)
    wf = Workflow("golden-timers", state={"topic": "replace", "answer": "replace"})

    @wf.step
    async def nap(ctx: StepContext) -> Any:
        await ctx.progress({"phase": "sleeping"})
        await ctx.sleep(0.01)
        answer = ctx.interrupt("still there?", expects="bool", timeout=0.01, default=False)
        return end(answer=answer)

    async with Runtime(log, workflows=[wf], config=config) as rt:
        await rt.start(wf, run_id="golden-timers", input={"topic": "timers"}, durability="sync")
        while (await log.get_run("golden-timers")).status != "completed":  # noqa: ASYNC110 - the worker fires the timeout
            await asyncio.sleep(0.05)
    events = [e async for e in log.read("golden-timers")]
    expected = json.loads(json.dumps(fold(events).to_dict(), sort_keys=True))
    return [encode_event(e) for e in events], {"golden-timers": expected}


class Chat(TypedDict):
    """The state of the ``golden-langgraph`` thread."""

    messages: Annotated[list[str], operator.add]
    approved: bool


async def generate_langgraph() -> tuple[list[bytes], dict[str, Any]]:
    """The ``golden-langgraph`` thread, written by AgentlogSaver through LangGraph."""
    import tempfile

    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command, interrupt

    from agentlog.eventlog._urls import open_log
    from agentlog.langgraph import AgentlogSaver

    def draft(state: Chat) -> dict[str, Any]:
        return {"messages": [f"draft {len(state['messages'])}"]}

    def approve(state: Chat) -> dict[str, Any]:
        answer = interrupt({"question": "send it?", "draft": state["messages"][-1]})
        return {"approved": answer == "yes", "messages": [f"human: {answer}"]}

    builder = StateGraph(Chat)
    builder.add_node("draft", draft)
    builder.add_node("approve", approve)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "approve")
    builder.add_edge("approve", END)
    config: Any = {"configurable": {"thread_id": "golden-langgraph"}}
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/golden.db"
        async with AgentlogSaver.from_url(url) as saver:
            graph = builder.compile(checkpointer=saver)
            await graph.ainvoke({"messages": ["user: write a haiku"], "approved": False}, config)
            await graph.ainvoke(Command(resume="yes"), config)
            await saver.aprune(["golden-langgraph"])
        log = await open_log(url)
        events = [e async for e in log.read("golden-langgraph")]
        await log.close()
    expected = json.loads(json.dumps(fold(events).to_dict(), sort_keys=True))
    return [encode_event(e) for e in events], {"golden-langgraph": expected}


async def generate_shredded() -> tuple[list[bytes], dict[str, Any]]:
    """The ``golden-shredded`` run: parked on an interrupt, then shredded."""
    import dataclasses
    import tempfile

    from agentlog.crypto import LocalKeyStore
    from agentlog.eventlog._urls import open_log

    wf = Workflow("golden-shredded", state={"topic": "replace", "answer": "replace"})

    @wf.step
    async def ask(ctx: StepContext) -> Any:
        return end(answer=ctx.interrupt("may we keep this?"))

    config = RuntimeConfig(owner="golden-host:1", lease_seconds=60, worker=False)
    with tempfile.TemporaryDirectory() as folder:
        url, keys = f"sqlite:///{folder}/golden.db", LocalKeyStore(f"{folder}/keyring.json")
        async with await Runtime.open(url, workflows=[wf], config=config, keys=keys) as rt:
            await rt.start(wf, run_id="golden-shredded", input={"topic": "gdpr"})
            await rt.wait("golden-shredded")
            # A second reader caches the run's key before the shred, so it can
            # still read the whole run afterwards (the cache's max_age).
            reader = await open_log(url, keys=keys)
            _ = [e async for e in reader.read("golden-shredded")]
            await rt.shred("golden-shredded")
            events = [
                dataclasses.replace(e, sealed=None) async for e in reader.read("golden-shredded")
            ]
            await reader.close()
    expected = json.loads(json.dumps(fold(events).to_dict(), sort_keys=True))
    return [encode_event(e) for e in events], {"golden-shredded": expected}


async def generate_forked() -> tuple[list[bytes], dict[str, Any]]:
    """The ``golden-forked`` run: a fork (RunForked) with an update, driven to its end."""
    log = MemoryEventLog()
    config = RuntimeConfig(owner="golden-host:1", lease_seconds=60, worker=False)
    wf = Workflow("golden-fork", state={"topic": "replace", "notes": "append"})

    @wf.step
    async def note(ctx: StepContext) -> Any:
        text = await ctx.task("llm.note", lambda: f"on {ctx.state['topic']}")
        return goto("again", notes=[text])

    @wf.step
    async def again(ctx: StepContext) -> Any:
        text = await ctx.task("llm.again", lambda: f"more on {ctx.state['topic']}")
        return end(notes=[text])

    async with Runtime(log, workflows=[wf], config=config) as rt:
        await rt.start(wf, run_id="golden-origin", input={"topic": "a"}, durability="sync")
        await rt.wait("golden-origin")
        committed = [e async for e in log.read("golden-origin") if e.type == "SuperstepCommitted"]
        await rt.fork(
            "golden-origin", committed[0].seq, new_run_id="golden-forked", updates={"topic": "b"}
        )
        await rt.wait("golden-forked")
    events = [e async for e in log.read("golden-forked")]
    expected = json.loads(json.dumps(fold(events).to_dict(), sort_keys=True))
    return [encode_event(e) for e in events], {"golden-forked": expected}


async def generate_messages() -> tuple[list[bytes], dict[str, Any]]:
    """The ``golden-messages`` run: messages sent, received and published."""
    log = MemoryEventLog()
    config = RuntimeConfig(owner="golden-host:1", lease_seconds=60, worker=False)
    wf = Workflow("golden-messages", state={"got": "append"})

    @wf.step(then="take")
    async def ask(ctx: StepContext) -> Any:
        ctx.interrupt("go?")

    @wf.step
    async def take(ctx: StepContext) -> Any:
        first = await ctx.recv("orders")
        await ctx.publish("status", {"first": first})
        second = await ctx.recv("orders")
        return end(got=[first, second])

    async with Runtime(log, workflows=[wf], config=config) as rt:
        await rt.start(wf, run_id="golden-messages", durability="sync")
        await rt.wait("golden-messages")
        await rt.send("golden-messages", "orders", {"id": 1}, idempotency_key="order-1")
        await rt.resume("golden-messages", "go")
        await rt.wait("golden-messages")  # parked on its second recv
        await rt.send("golden-messages", "orders", {"id": 2})
        await rt.wait("golden-messages")
    events = [e async for e in log.read("golden-messages")]
    expected = json.loads(json.dumps(fold(events).to_dict(), sort_keys=True))
    return [encode_event(e) for e in events], {"golden-messages": expected}


async def generate_queued() -> tuple[list[bytes], dict[str, Any]]:
    """The ``golden-queued`` run: submitted to a queue, admitted by a worker."""
    log = MemoryEventLog()
    config = RuntimeConfig(owner="golden-host:1", lease_seconds=60, worker=True)
    wf = Workflow("golden-queued", state={"sent": "replace"}, queue=Queue("emails", concurrency=1))

    @wf.step
    async def send(ctx: StepContext) -> Any:
        return end(sent="msg-0002")

    async with Runtime(log, workflows=[wf], config=config) as rt:
        await rt.submit(wf, run_id="golden-queued", durability="sync", priority=3)
        await rt.wait("golden-queued")
    events = [e async for e in log.read("golden-queued")]
    expected = json.loads(json.dumps(fold(events).to_dict(), sort_keys=True))
    return [encode_event(e) for e in events], {"golden-queued": expected}


#: Runs added after the first three (same schema version, new event types),
#: appended to the committed files without touching the bytes already there.
APPENDED = {
    "--append-retried": generate_retried,
    "--append-timers": generate_timers,
    "--append-langgraph": generate_langgraph,
    "--append-shredded": generate_shredded,
    "--append-forked": generate_forked,
    "--append-messages": generate_messages,
    "--append-queued": generate_queued,
}


def append(flag: str) -> int:
    raw, expected = asyncio.run(APPENDED[flag]())
    with LOG_FILE.open("a") as out:
        out.write("".join(json.dumps({"event": base64.b64encode(b).decode()}) + "\n" for b in raw))
    committed = json.loads(EXPECTED_FILE.read_text())
    EXPECTED_FILE.write_text(json.dumps({**committed, **expected}, indent=2, sort_keys=True) + "\n")
    sys.stderr.write(f"appended {len(raw)} events of {sorted(expected)}\n")
    return 0


def main() -> int:
    if sys.argv[1:2] and sys.argv[1] in APPENDED:
        return append(sys.argv[1])
    raw, expected = asyncio.run(generate())
    LOG_FILE.write_text(
        "".join(json.dumps({"event": base64.b64encode(b).decode()}) + "\n" for b in raw)
    )
    EXPECTED_FILE.write_text(json.dumps(expected, indent=2, sort_keys=True) + "\n")
    sys.stderr.write(f"wrote {len(raw)} events to {LOG_FILE} and {EXPECTED_FILE}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
