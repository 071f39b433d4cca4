"""The ``agentlog`` command.

Every command reads the log named by ``--log`` (default
``sqlite:///.agentlog/agentlog.db``, or the ``AGENTLOG_LOG`` environment
variable). ``--json`` prints machine-readable output. Bad input (an unknown
run, an unreadable file, a bad URL) prints one line and exits with code 2.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import structlog
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agentlog.archive import ArchivedEventLog, open_archive
from agentlog.archive.commands import register as register_archive_commands
from agentlog.archive.store import DEFAULT_ARCHIVE_URL
from agentlog.errors import AgentlogError, ConfigError
from agentlog.eventlog.base import EventLog, RunInfo
from agentlog.eventlog.codec import jsonable
from agentlog.eventlog.events import Event, utcnow
from agentlog.eventlog.urls import DEFAULT_LOG_URL, open_log
from agentlog.projector import diff_states, load_state
from agentlog.runtime import RecoveryReport, Runtime, Workflow

__all__ = ["app", "main", "timeline_rows"]

T = TypeVar("T")

app = typer.Typer(
    name="agentlog",
    help="Durable, event-sourced runs for long-running AI agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

ArchiveOpt = Annotated[
    str,
    typer.Option(
        "--archive", envvar="AGENTLOG_ARCHIVE", help="Archive URL (file:// or s3://bucket/prefix)."
    ),
]
LogOpt = Annotated[
    str, typer.Option("--log", envvar="AGENTLOG_LOG", help="Event log URL (sqlite://, kafka://).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
AppOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--app",
        help="module:attribute holding a Workflow or a list of them (repeatable); "
        "the demo's workflow is always known.",
    ),
]


def run_async(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine; turn agentlog errors into one line and exit code 2."""
    try:
        return asyncio.run(make())  # type: ignore[arg-type]
    except AgentlogError as exc:
        err.print(f"[bold red]error:[/bold red] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@contextlib.asynccontextmanager
async def history(log_url: str, archive_url: str) -> AsyncIterator[EventLog]:
    """The hot log, with archived runs readable through it when an archive exists.

    ``show``, ``state`` and ``diff`` read through this, so they work the same
    on a run that was archived and pruned from the hot log.
    """
    hot = await open_log(log_url)
    try:
        local = archive_url.startswith("file://")
        if local and not Path(archive_url[len("file://") :]).exists():  # noqa: ASYNC240
            yield hot  # no archive was ever written
            return
        combined = ArchivedEventLog(hot, open_archive(archive_url))
        try:
            yield combined
        finally:
            await combined.close()
    finally:
        await hot.close()


def _age(ts: datetime | None) -> str:
    if ts is None:
        return ""
    seconds = (utcnow() - ts).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _short(value: Any, width: int = 70) -> str:
    """Compact JSON, cut to ``width``, safe to print as rich markup."""
    text = json.dumps(jsonable(value), separators=(",", ":"), ensure_ascii=False)
    return escape(text if len(text) <= width else text[: width - 1] + "…")


def timeline_rows(events: Iterable[Event]) -> list[dict[str, Any]]:
    """One row per event: seq, time, type, step, and a short payload."""
    rows = []
    for event in events:
        payload = event.data.to_dict()
        step = payload.pop("step", "") or payload.get("name", "")
        rows.append(
            {
                "seq": event.seq,
                "ts": event.ts.isoformat(),
                "type": event.type,
                "step": step,
                "payload": jsonable(payload),
            }
        )
    return rows


def print_timeline(rows: list[dict[str, Any]], title: str) -> None:
    """The timeline as a table."""
    table = Table(title=title, title_justify="left")
    for column in ("seq", "time", "type", "step"):
        table.add_column(column, justify="right" if column == "seq" else "left", no_wrap=True)
    table.add_column("payload", no_wrap=True, overflow="ellipsis")
    room = max(20, out.width - 64)  # what the first four columns leave over
    for row in rows:
        table.add_row(
            str(row["seq"]),
            row["ts"][11:23],
            row["type"],
            row["step"],
            _short(row["payload"], room),
        )
    out.print(table)


def _info_json(info: RunInfo) -> dict[str, Any]:
    return {
        "run_id": info.run_id,
        "workflow": info.workflow,
        "version": info.version,
        "status": info.status,
        "steps": info.steps,
        "last_seq": info.last_seq,
        "started_at": info.started_at.isoformat() if info.started_at else None,
        "updated_at": info.updated_at.isoformat() if info.updated_at else None,
        "writer": info.lease_owner,
    }


@app.command()
def runs(
    log: LogOpt = DEFAULT_LOG_URL,
    archive: ArchiveOpt = DEFAULT_ARCHIVE_URL,
    status: Annotated[str | None, typer.Option(help="Only runs in this status.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List runs: workflow, status, steps, last event, age."""

    async def go() -> list[RunInfo]:
        async with history(log, archive) as event_log:
            return await event_log.list_runs(status=status)

    infos = run_async(go)
    if as_json:
        out.print_json(data=[_info_json(i) for i in infos])
        return
    table = Table(title=f"runs in {log}", title_justify="left")
    table.add_column("run", overflow="fold")
    for column in ("workflow", "status", "steps", "last event", "age"):
        table.add_column(column)
    for info in infos:
        table.add_row(
            escape(info.run_id),
            f"{info.workflow} v{info.version}",
            info.status,
            str(info.steps),
            str(info.last_seq),
            _age(info.updated_at),
        )
    out.print(table)


@app.command()
def show(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    log: LogOpt = DEFAULT_LOG_URL,
    archive: ArchiveOpt = DEFAULT_ARCHIVE_URL,
    as_json: JsonOpt = False,
) -> None:
    """The run's timeline: seq, time, type, step, payload."""

    async def go() -> list[dict[str, Any]]:
        async with history(log, archive) as event_log:
            await event_log.get_run(run_id)
            return timeline_rows([e async for e in event_log.read(run_id)])

    rows = run_async(go)
    if as_json:
        out.print_json(data=rows)
    else:
        print_timeline(rows, f"run {run_id}")


@app.command()
def state(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    at: Annotated[int | None, typer.Option("--at", help="Rebuild the state at this seq.")] = None,
    log: LogOpt = DEFAULT_LOG_URL,
    archive: ArchiveOpt = DEFAULT_ARCHIVE_URL,
    as_json: JsonOpt = False,
) -> None:
    """The run's state now, or at any seq (time travel)."""

    async def go() -> dict[str, Any]:
        async with history(log, archive) as event_log:
            return (await load_state(event_log, run_id, at_seq=at)).to_dict()

    data = jsonable(run_async(go))
    if as_json:
        out.print_json(data=data)
        return
    out.print(
        f"[bold]{run_id}[/bold] at seq {data['seq']}: {data['status']}, "
        f"{data['steps']} steps, superstep {data['superstep']}, next {data['next_steps']}"
    )
    if data["interrupts"]:
        out.print(f"waiting on: {_short(data['interrupts'][0]['payload'], 200)}")
    if data["error"]:
        out.print(f"[red]error:[/red] {data['error']}")
    out.print_json(data=data["values"])


@app.command()
def diff(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    seq_a: Annotated[int, typer.Argument(help="From this seq.")],
    seq_b: Annotated[int, typer.Argument(help="To this seq.")],
    log: LogOpt = DEFAULT_LOG_URL,
    archive: ArchiveOpt = DEFAULT_ARCHIVE_URL,
    as_json: JsonOpt = False,
) -> None:
    """What changed in the run's state between two seqs."""

    async def go() -> list[dict[str, Any]]:
        async with history(log, archive) as event_log:
            before = await load_state(event_log, run_id, at_seq=seq_a)
            after = await load_state(event_log, run_id, at_seq=seq_b)
            return [c.to_dict() for c in diff_states(before, after)]

    changes = jsonable(run_async(go))
    if as_json:
        out.print_json(data=changes)
        return
    table = Table(title=f"run {run_id}: seq {seq_a} -> {seq_b}", title_justify="left")
    for column in ("path", "change", "before", "after"):
        table.add_column(column)
    for change in changes:
        before, after = _short(change["before"], 50), _short(change["after"], 50)
        table.add_row(change["path"], change["op"], before, after)
    out.print(table if changes else "no changes")


def load_workflows(specs: list[str] | None) -> list[Workflow]:
    """The demo's workflow plus every workflow named by ``module:attribute``."""
    from agentlog.demo import demo_workflow

    found: list[Workflow] = [demo_workflow()]
    for spec in specs or []:
        module_name, _, attr = spec.partition(":")
        try:
            target: Any = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"--app {spec!r}: cannot import it ({exc})") from exc
        items = target if isinstance(target, list | tuple) else [target]
        if not all(isinstance(item, Workflow) for item in items):
            raise ConfigError(f"--app {spec!r} is not a Workflow or a list of Workflows")
        found.extend(items)
    return found


@app.command()
def resume(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    value: Annotated[str, typer.Option("--value", help="The answer, as JSON.")] = "null",
    log: LogOpt = DEFAULT_LOG_URL,
    apps: AppOpt = None,
) -> None:
    """Answer a parked run's interrupt and run it until it parks or ends."""
    try:
        answer = json.loads(value)
    except json.JSONDecodeError as exc:
        err.print(f"[bold red]error:[/bold red] --value is not JSON: {exc}")
        raise typer.Exit(2) from None

    async def go() -> dict[str, Any]:
        async with await Runtime.open(log, workflows=load_workflows(apps)) as runtime:
            await runtime.resume(run_id, answer)
            final = await runtime.wait(run_id)
            return {"status": final.status, "seq": final.seq, "steps": final.steps}

    result = run_async(go)
    out.print(f"run {run_id}: {result['status']} at seq {result['seq']}, {result['steps']} steps")


@app.command()
def cancel(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    reason: Annotated[str, typer.Option(help="Recorded with the cancellation.")] = "cancelled",
    log: LogOpt = DEFAULT_LOG_URL,
) -> None:
    """Cancel a run at its next step boundary."""

    async def go() -> str:
        async with await Runtime.open(log) as runtime:
            return (await runtime.cancel(run_id, reason)).status

    out.print(f"run {run_id}: {run_async(go)}")


@app.command()
def recover(log: LogOpt = DEFAULT_LOG_URL, apps: AppOpt = None) -> None:
    """Continue every running run whose writer died (its lease expired)."""

    async def go() -> RecoveryReport:
        async with await Runtime.open(log, workflows=load_workflows(apps)) as runtime:
            report = await runtime.recover()
            for run_id in report.recovered:
                final = await runtime.wait(run_id)
                out.print(f"run {run_id}: {final.status} at seq {final.seq}")
            return report

    report = run_async(go)
    out.print(f"recovered {len(report.recovered)} run(s)")
    for run_id, error in report.failed.items():
        typer.echo(f"run {run_id}: not recovered: {error}", err=True)
    if report.failed:
        raise typer.Exit(1)


@app.command()
def demo(
    log: LogOpt = DEFAULT_LOG_URL,
    run_id: Annotated[
        str | None, typer.Option(help="Run id to use (default: demo-<UTC time>).")
    ] = None,
) -> None:
    """A research agent that crashes, resumes, waits for approval and sends one email."""
    from agentlog.demo import run_demo

    chosen = run_id or "demo-" + utcnow().strftime("%Y%m%d-%H%M%S")
    run_async(lambda: run_demo(log, chosen, out))


def _stderr_logger(*args: Any) -> structlog.PrintLogger:
    # sys.stderr looked up per logger, not captured once: it may be swapped
    # (pytest, CliRunner) after the CLI configured structlog
    return structlog.PrintLogger(sys.stderr)


@app.callback()
def _configure(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show info logs.")] = False,
) -> None:
    level = logging.INFO if verbose else logging.WARNING
    structlog.configure(  # logs go to stderr: stdout is for results (--json, sql)
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=_stderr_logger,
    )


register_archive_commands(app)  # archive, sql


def main() -> None:
    """Entry point of the ``agentlog`` script."""
    app()


if __name__ == "__main__":
    main()
