"""A workflow that carries a canary string through every content path of a run."""

from __future__ import annotations

from pathlib import Path

from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunShredded
from agentlog.runtime import RuntimeConfig, StepContext, Workflow, end, goto
from agentlog.runtime._workflow import Next

#: Never part of a run id, step or task name: found on disk only if content leaked.
CANARY = "CANARY-7f3a9c-plaintext"

#: One-shot runtimes: no background worker racing the test.
ONE_SHOT = RuntimeConfig(worker=False)


def canary_workflow() -> Workflow:
    """The canary in the input, a task result and the state; then it parks."""
    wf = Workflow("canary", state={"secret": "replace", "found": "replace", "answer": "replace"})

    @wf.step
    async def fetch(ctx: StepContext) -> Next:
        found = await ctx.task("lookup", lambda: f"{CANARY}-task-result")
        return goto("ask", found=found, secret=f"{CANARY}-state")

    @wf.step
    async def ask(ctx: StepContext) -> Next:
        answer = ctx.interrupt({"question": f"{CANARY}-question"})
        return end(answer=answer)

    return wf


def raw_bytes(*paths: Path) -> bytes:
    """The bytes of every file that exists among ``paths``."""
    return b"".join(p.read_bytes() for p in paths if p.exists())


def sqlite_files(db: Path) -> list[Path]:
    """A SQLite log's file and its write-ahead log."""
    return [db, db.with_name(db.name + "-wal")]


async def metadata(event_log: EventLog, run_id: str) -> list[tuple[int, str, str]]:
    """(seq, type, step or task name) of every event: what stays readable."""
    rows = []
    async for event in event_log.read(run_id):
        fields = event.data.to_dict()
        rows.append((event.seq, event.type, str(fields.get("name") or fields.get("step") or "")))
    return rows


async def shred_record(event_log: EventLog, run_id: str) -> list[RunShredded]:
    """The run's RunShredded events."""
    return [e.data async for e in event_log.read(run_id) if isinstance(e.data, RunShredded)]
