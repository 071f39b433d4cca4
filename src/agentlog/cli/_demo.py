"""``agentlog demo``: a research agent that survives a crash and a human pause.

What it shows, on the embedded SQLite default, with no network and no LLM
(a fake model with latency):

1. A worker process plans, then fans out to three searches in parallel; one
   search tool fails once and is retried.
2. The demo SIGKILLs the worker while the searches are in flight.
3. A new worker takes the run over once the dead writer's lease expires;
   branches whose writes were recorded do not run again.
4. The run parks on an approval interrupt and the worker exits: the parked
   run is only rows in the log.
5. The demo approves; the run sends one email through an outbox that drops
   duplicates by idempotency key, and completes.
6. It prints the replay timeline and where the data lives.

``python -m agentlog.cli._demo worker LOG RUN_ID`` is the worker process. The
demo is presentation (Rich), so it lives with the CLI that runs it.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rich.console import Console
from rich.markup import escape

from agentlog.crypto import LocalKeyStore
from agentlog.errors import ConfigError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog._urls import open_log, redact_url
from agentlog.eventlog.codec import jsonable
from agentlog.eventlog.events import Event, StepCompleted, TaskStarted, utcnow
from agentlog.runtime import (
    RetryPolicy,
    Runtime,
    RuntimeConfig,
    StepContext,
    Workflow,
    current_idempotency_key,
    end,
    goto,
)
from agentlog.runtime._workflow import Next

__all__ = ["Outbox", "demo_workflow", "run_demo"]

LEASE_SECONDS = 2.0
MODEL_LATENCY = 0.25


class ToolTimeout(Exception):
    """The fake paper-search tool times out on its first try."""


async def fake_llm(prompt: str) -> str:
    """A stand-in model: slow, deterministic, free."""
    await asyncio.sleep(MODEL_LATENCY)
    return f"[model] {prompt}"


async def fake_search(source: str, topic: str, latency: float, fail: bool) -> list[str]:
    """A stand-in search tool."""
    await asyncio.sleep(latency)
    if fail:
        raise ToolTimeout(f"{source} search timed out")
    return [f"{source}: {topic} #{i}" for i in (1, 2)]


class Outbox:
    """A mail server stand-in in its own SQLite file that drops duplicates by key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with self._connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS emails (key TEXT PRIMARY KEY, recipient TEXT, "
                "subject TEXT, body TEXT, first_sent TEXT, deliveries INTEGER)"
            )

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return sqlite3.connect(self.path, timeout=10)

    def send(
        self, recipient: str, subject: str, body: str, *, idempotency_key: str | None = None
    ) -> str:
        """Deliver once per key; a repeat only bumps the delivery count.

        Run as a task, the runtime fills in ``idempotency_key`` (it is also
        :func:`~agentlog.runtime.current_idempotency_key`).
        """
        idempotency_key = idempotency_key or current_idempotency_key()
        with self._connect() as db:
            db.execute(
                "INSERT INTO emails VALUES (?, ?, ?, ?, ?, 1) ON CONFLICT(key) "
                "DO UPDATE SET deliveries = deliveries + 1",
                (idempotency_key, recipient, subject, body, utcnow().isoformat()),
            )
        return idempotency_key

    def sent(self, prefix: str = "") -> list[tuple[str, str, int]]:
        """(key, subject, deliveries) of every email whose subject starts with ``prefix``."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT key, subject, deliveries FROM emails WHERE subject LIKE ? ORDER BY rowid",
                (prefix + "%",),
            ).fetchall()
        return [(str(k), str(s), int(d)) for k, s, d in rows]


def outbox_path(log_url: str) -> Path:
    """The outbox file: beside the SQLite log, or in .agentlog/ for other logs."""
    if log_url.startswith("sqlite:///"):
        return Path(log_url[len("sqlite:///") :]).parent / "outbox.db"
    return Path(".agentlog") / "outbox.db"


@functools.cache
def demo_workflow() -> Workflow[Any, Any]:
    """The demo's research agent (one instance per process)."""
    wf = Workflow(
        "research-agent",
        version="1",
        state={
            "topic": "replace",
            "plan": "replace",
            "findings": "append",
            "draft": "replace",
            "approval": "replace",
            "email": "replace",
            "outbox": "replace",
        },
        retry=RetryPolicy(max_attempts=3, initial_interval=0.3),
    )

    @wf.step
    async def plan(ctx: StepContext) -> Next:
        outline = await ctx.task("llm.plan", fake_llm, f"plan research on {ctx.state['topic']}")
        return goto("search_web", "search_papers", "search_news", plan=outline)

    def search(source: str, latency: float, flaky: bool = False) -> None:
        async def step(ctx: StepContext) -> dict[str, Any]:
            fail = flaky and ctx.attempt == 1
            hits = await ctx.task(
                f"search.{source}", fake_search, source, ctx.state["topic"], latency, fail
            )
            return {"findings": hits}

        step.__name__ = f"search_{source}"
        wf.step(then="draft")(step)

    search("web", 0.2)
    search("papers", 0.5, flaky=True)
    search("news", 1.2)

    @wf.step
    async def draft(ctx: StepContext) -> Next:
        text = await ctx.task("llm.draft", fake_llm, f"summarize {len(ctx.state['findings'])} hits")
        return goto("approve", draft=text)

    @wf.step
    async def approve(ctx: StepContext) -> Next:
        decision = ctx.interrupt(
            {"question": "send this summary?", "draft": ctx.state["draft"]},
            expects={"approved": "bool"},
        )
        if not decision["approved"]:
            return end(approval=decision)
        return goto("send_email", approval=decision)

    @wf.step
    async def send_email(ctx: StepContext) -> Next:
        outbox = Outbox(Path(ctx.state["outbox"]))
        key = await ctx.task(
            "email.send",
            outbox.send,
            "team@example.com",
            f"research: {ctx.state['topic']} ({ctx.run_id})",
            ctx.state["draft"],
        )
        return end(email=key)

    return wf


def describe(event: Event, tasks: dict[str, str] | None = None) -> str:
    """One human line (rich markup) for a recorded event.

    ``tasks`` maps idempotency keys to task names: a task's result and failure
    record only its key, and a line must still say which task it was.
    """
    data = jsonable(event.data.to_dict())
    kind = event.type
    task = escape((tasks or {}).get(str(data.get("key")), "?"))
    if kind == "StepCompleted":
        return f"[green]✓ {data['step']}[/green] wrote {', '.join(data['writes']) or 'nothing'}"
    if kind == "StepFailed":
        error = escape(data["error"])
        return f"[yellow]✗ {data['step']} attempt {data['attempt']}[/yellow]: {error}"
    if kind == "TaskCompleted":
        return f"  task {task} done in {data['duration_ms']:.0f} ms"
    if kind == "TaskFailed":
        return f"  task {task} failed: {escape(data['error'])}"
    if kind == "TaskStarted":
        return f"  task {escape(data['name'])} (key {data['key'][:8]}…)"
    if kind == "SuperstepCommitted":
        return f"[blue]⏭ superstep {data['superstep']} committed[/blue] → {data['next'] or 'end'}"
    if kind == "InterruptRaised":
        question = escape(str(data["payload"]["question"]))
        return f"[magenta]⏸ waiting for a human:[/magenta] {question}"
    return f"[bold]{kind}[/bold]"


class Follower:
    """Prints a run's events as they land in the log."""

    def __init__(self, log: EventLog, run_id: str, console: Console) -> None:
        self.log, self.run_id, self.console, self.seq = log, run_id, console, 0
        #: Task names by idempotency key, from the TaskStarted events seen so far.
        self.tasks: dict[str, str] = {}

    async def poll(self) -> list[Event]:
        """Print and return the events recorded since the last poll."""
        if await self.log.find_run(self.run_id) is None:
            return []
        events = [e async for e in self.log.read(self.run_id, after_seq=self.seq)]
        for event in events:
            if isinstance(event.data, TaskStarted):
                self.tasks[event.data.key] = event.data.name
            line = describe(event, self.tasks)
            self.console.print(f"  seq {event.seq:>3}  {line}", highlight=False)
            self.seq = event.seq
        return events


def _spawn_worker(log_url: str, run_id: str, topic: str, outbox: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentlog.cli._demo", "worker", log_url, run_id, topic, str(outbox)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _reap(worker: subprocess.Popen[bytes]) -> str:
    """Wait for the worker and return what it wrote to stderr."""
    _, stderr = worker.communicate()
    return stderr.decode(errors="replace")


async def _follow_until_exit(follower: Follower, worker: subprocess.Popen[bytes]) -> None:
    while worker.poll() is None:
        await follower.poll()
        await asyncio.sleep(0.05)
    await follower.poll()
    output = _reap(worker)
    if worker.returncode != 0:
        raise RuntimeError(f"demo worker failed: {output}")


async def run_demo(log_url: str, run_id: str, console: Console) -> dict[str, Any]:
    """The whole demo (see the module docstring); returns what it did.

    Raises:
        ConfigError: ``log_url`` names a log that only this process can see
            (``memory://``): the demo's workers run in processes of their own.
    """
    shown_url = redact_url(log_url)  # a URL's password is never printed
    if urlsplit(log_url).scheme == "memory":
        raise ConfigError(
            f"the demo needs a log that other processes can share, and {shown_url} lives in "
            "this process only: use the default (sqlite:///.agentlog/agentlog.db), another "
            "sqlite:///FILE, or kafka://HOST:PORT/NAME"
        )
    topic = "durable execution for AI agents"
    outbox = outbox_path(log_url)
    shown = escape(run_id)
    console.rule(f"agentlog demo · run [bold]{shown}[/bold] · log {escape(shown_url)}")
    # AGENTLOG_KEYRING=PATH encrypts the run's payloads; the workers inherit it.
    async with await open_log(log_url, keys=LocalKeyStore.from_env()) as event_log:
        follower = Follower(event_log, run_id, console)

        console.print("[bold]1. A worker process starts the run[/bold] (durability: sync)")
        worker = _spawn_worker(log_url, run_id, topic, outbox)
        while True:
            events = await follower.poll()
            if any(isinstance(e.data, StepCompleted) and e.data.superstep == 1 for e in events):
                break
            if worker.poll() is not None:
                raise RuntimeError(f"the worker ended before the fan-out: {_reap(worker)}")
            await asyncio.sleep(0.02)
        worker.send_signal(signal.SIGKILL)
        _reap(worker)
        await follower.poll()
        console.print(
            f"[bold red]💥 2. SIGKILL worker pid {worker.pid}[/bold red] mid fan-out; "
            "finished branches' writes are recorded, the others were in flight"
        )

        console.print(
            f"[bold]3. A new worker takes over[/bold] once the dead writer's "
            f"{LEASE_SECONDS:.0f}s lease expires; recorded branches do not run again"
        )
        await asyncio.sleep(LEASE_SECONDS + 0.5)
        await _follow_until_exit(follower, _spawn_worker(log_url, run_id, topic, outbox))
        console.print(
            "[bold]4. Parked.[/bold] No process is running: the run is only rows in the log, "
            "and could wait like this for days."
        )

        console.print(
            "[bold]5. A human approves[/bold] "
            "(what `agentlog resume RUN --value '{\"approved\": true}'` does)"
        )
        async with Runtime(event_log, workflows=[demo_workflow()]) as runtime:
            await runtime.resume(run_id, {"approved": True, "by": "demo"})
            waiting = asyncio.create_task(runtime.wait(run_id))
            while not waiting.done():
                await follower.poll()
                await asyncio.sleep(0.05)
            final = await waiting
            await follower.poll()

        from agentlog.cli._render import print_timeline
        from agentlog.replay._rows import event_rows

        console.rule("6. replay timeline")
        rows = event_rows([e async for e in event_log.read(run_id)])
        print_timeline(rows, f"run {run_id}", console)
        emails = Outbox(outbox).sent(f"research: {topic} ({run_id})")
        deliveries = [d for _, _, d in emails]
        console.print(
            f"run [bold]{shown}[/bold]: [bold green]{final.status}[/bold green] after "
            f"{final.steps} steps and 1 crash; emails sent: {len(emails)} "
            f"(deliveries per key: {deliveries})"
        )
        console.print(f"event log:  {escape(shown_url)}")
        console.print(f"outbox:     {escape(str(outbox))}")
        console.print(
            f"look again: agentlog show {shown} · agentlog state {shown} --at 5 · "
            f"agentlog diff {shown} 1 {final.seq} · agentlog runs"
        )
    return {
        "run_id": run_id,
        "status": final.status,
        "steps": final.steps,
        "seq": final.seq,
        "emails_sent": len(emails),
        "deliveries_per_key": deliveries,
        "log": shown_url,
        "outbox": str(outbox),
    }


async def _worker(log_url: str, run_id: str, topic: str, outbox: str) -> None:
    config = RuntimeConfig(lease_seconds=LEASE_SECONDS, durability="sync")
    keys = LocalKeyStore.from_env()
    workflows = [demo_workflow()]
    async with await Runtime.open(log_url, workflows=workflows, config=config, keys=keys) as rt:
        await rt.start(demo_workflow(), run_id=run_id, input={"topic": topic, "outbox": outbox})
        await rt.wait(run_id)


if __name__ == "__main__":
    import structlog

    if len(sys.argv) != 6 or sys.argv[1] != "worker":
        sys.exit("usage: python -m agentlog.cli._demo worker LOG_URL RUN_ID TOPIC OUTBOX")
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    asyncio.run(_worker(*sys.argv[2:]))
    os._exit(0)
