"""The read commands: ``runs``, ``show``, ``state``, ``diff``. They never write.

``show RUN --follow`` prints the run's events as they are recorded, from any
process, until the run completes, fails or is cancelled (a parked run is
followed through its park); Ctrl-C stops it with exit code 130, as a shell
reports an interrupted command.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.text import Text

from agentlog.archive import ArchivedEventReader
from agentlog.archive._run_index import run_location
from agentlog.archive._store import DEFAULT_ARCHIVE_URL
from agentlog.cli._app import command, run_async
from agentlog.cli._options import ArchiveOpt, InternalOpt, JsonOpt, LogOpt, read_history
from agentlog.cli._render import (
    age,
    out,
    print_json,
    print_json_line,
    print_line,
    print_table,
    print_timeline,
    short,
    table,
    timeline_note,
    to_json,
)
from agentlog.eventlog._base import EventReader, RunInfo
from agentlog.eventlog._urls import DEFAULT_LOG_URL, redact_url
from agentlog.eventlog.codec import jsonable
from agentlog.eventlog.events import LANGGRAPH_WORKFLOW, RunStatus, utcnow
from agentlog.projector import diff_states, load_state
from agentlog.projector._state import INTERNAL_FIELDS
from agentlog.replay._rows import event_row, event_rows
from agentlog.runtime._stream import StreamUpdate, stream

__all__ = ["FollowMode", "Status", "info_json"]

RunIdArg = Annotated[str, typer.Argument(help="The run id.")]


class Status(StrEnum):
    """The statuses ``runs --status`` accepts (any other value is exit code 2)."""

    RUNNING = RunStatus.RUNNING
    QUEUED = RunStatus.QUEUED
    WAITING = RunStatus.WAITING
    COMPLETED = RunStatus.COMPLETED
    FAILED = RunStatus.FAILED
    CANCELLED = RunStatus.CANCELLED
    SHREDDED = RunStatus.SHREDDED


class FollowMode(StrEnum):
    """What ``show --follow --mode`` prints (the stream modes of ``Runtime.stream``)."""

    EVENTS = "events"
    UPDATES = "updates"
    VALUES = "values"
    PROGRESS = "progress"


def info_json(info: RunInfo) -> dict[str, Any]:
    """A run's index row as a JSON object."""
    return {
        "run_id": info.run_id,
        "workflow": info.workflow,
        "version": info.version,
        "status": info.status,
        "steps": info.steps,
        "last_seq": info.last_seq,
        "started_at": info.started_at,
        "updated_at": info.updated_at,
        "writer": info.lease_owner,
        "wake_at": info.wake_at,
        "driver": driver(info),
        "queue": info.queue,
        "priority": info.priority,
        "admitted_at": info.admitted_at,
    }


def driver(info: RunInfo, now: datetime | None = None) -> str:
    """Who moves the run on, in words: its live writer, its timer, or nobody yet."""
    now = now or utcnow()
    if info.workflow == LANGGRAPH_WORKFLOW:  # a thread: LangGraph drives it, not a worker
        if info.status == RunStatus.WAITING:
            return "an answer: invoke with Command(resume=...)"
        return "its LangGraph app" if info.status == RunStatus.RUNNING else ""
    live = info.lease_live(now)
    if info.status == RunStatus.QUEUED and live:
        return f"worker {info.lease_owner} (admitting it)"
    if info.waits_for_room(now):  # queued, or admitted before and needing room again
        why = f"priority {info.priority}" if info.status == RunStatus.QUEUED else "admitted before"
        return f"room in queue {info.queue!r} ({why})"
    if info.status == RunStatus.RUNNING:
        if live:
            return f"worker {info.lease_owner}"
        return f"no worker yet (needs one that knows {info.workflow!r})"
    if info.status == RunStatus.WAITING and info.wake_at is not None:
        due = "due, waits for a worker" if info.wake_at <= now else "timer"
        return f"{due} at {info.wake_at:%Y-%m-%d %H:%M:%S} UTC"
    if info.status == RunStatus.WAITING:
        return "a human's answer (resume)"
    return ""


async def _locations(reader: EventReader, infos: list[RunInfo]) -> dict[str, str]:
    """Where each run's events are (hot, archived, both), by the run lists' one rule."""
    if not isinstance(reader, ArchivedEventReader):
        return {i.run_id: run_location(i, False) for i in infos}
    hot = {i.run_id: i for i in await reader.log.list_runs()}
    manifest = reader.archive.manifest
    return {
        i.run_id: run_location(hot.get(i.run_id), manifest.latest(i.run_id) is not None)
        for i in infos
    }


async def _parents(reader: EventReader, infos: list[RunInfo]) -> dict[str, str]:
    """The parent run of each child run (its RunStarted's link), "" for others."""
    parents: dict[str, str] = {}
    for info in infos:
        parents[info.run_id] = ""
        async for event in reader.read(info.run_id, upto_seq=1):
            link = getattr(event.data, "limits", {}).get("parent")
            if isinstance(link, dict):
                parents[info.run_id] = str(link.get("run_id", ""))
    return parents


@command()
def runs(
    log: LogOpt = DEFAULT_LOG_URL,
    archive: ArchiveOpt = DEFAULT_ARCHIVE_URL,
    status: Annotated[Status | None, typer.Option(help="Only runs in this status.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List runs: workflow, status, steps, last event, age, where its events are
    (hot log, archive, or both when partly archived), what moves it on, and the
    parent run of a child run (a column shown when there is one)."""

    async def go() -> tuple[list[RunInfo], dict[str, str], dict[str, str]]:
        async with read_history(log, archive) as event_log:
            infos = await event_log.list_runs(status=status.value if status else None)
            where = await _locations(event_log, infos)
            return infos, where, await _parents(event_log, infos)

    infos, where, parents = run_async(go)
    if as_json:
        print_json(
            [{**info_json(i), "where": where[i.run_id], "parent": parents[i.run_id]} for i in infos]
        )
        return
    family = any(parents.values())  # the parent column only when a run has one
    queues = any(i.queue for i in infos)  # the queue column only when a run has one
    rows = [
        (
            i.run_id,
            f"{i.workflow} v{i.version}" if i.version else i.workflow,
            i.status,
            i.steps,
            i.last_seq,
            age(i.updated_at),
            where[i.run_id],
            driver(i),
            *([i.queue] if queues else []),
            *([parents[i.run_id]] if family else []),
        )
        for i in infos
    ]
    columns: tuple[str, ...] = ("run", "workflow", "status", "steps", "last event", "age")
    columns += ("where", "moved on by", *(["queue"] if queues else []))
    columns += tuple(["parent"] if family else [])
    print_table(table(f"runs in {redact_url(log)}", columns, rows))


@command()
def show(
    run_id: RunIdArg,
    log: LogOpt = DEFAULT_LOG_URL,
    archive: ArchiveOpt = DEFAULT_ARCHIVE_URL,
    as_json: JsonOpt = False,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="Print events as they are recorded until the run ends (one line, or one "
            "JSON object per line with --json); Ctrl-C stops (exit code 130).",
        ),
    ] = False,
    mode: Annotated[
        FollowMode,
        typer.Option(
            "--mode",
            help="With --follow: every event, or only step writes, progress and "
            "interrupts (updates), the state's values after each superstep, or progress.",
        ),
    ] = FollowMode.EVENTS,
) -> None:
    """The run's timeline: seq, time, type, step, payload."""
    if follow:
        _follow(run_id, log, archive, as_json, mode)
        return

    async def go() -> tuple[RunInfo, list[dict[str, Any]]]:
        async with read_history(log, archive) as event_log:
            info = await event_log.get_run(run_id)
            return info, event_rows([e async for e in event_log.read(run_id)])

    info, rows = run_async(go)
    if as_json:
        print_json(rows)
    else:
        waits = ""
        if info.status == RunStatus.QUEUED or info.waits_for_room(utcnow()):
            label = "queued" if info.status == RunStatus.QUEUED else "waiting for room"
            waits = f" ({label}: {driver(info)})"
        print_timeline(rows, f"run {run_id}{waits}{timeline_note(rows)}")


def _follow(run_id: str, log: str, archive: str, as_json: bool, mode: FollowMode) -> None:
    """``show --follow``: print each update of the run as it is recorded."""

    async def go() -> None:
        async with read_history(log, archive) as event_log:
            async for update in stream(event_log, run_id, mode=mode.value):
                _print_update(update, as_json)

    try:
        run_async(go)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def _print_update(update: StreamUpdate, as_json: bool) -> None:
    if update.mode == "events":  # the same row as ``show`` prints
        row = event_row(update.event)
        shown = row["payload"]
    else:
        row = {"seq": update.seq, "ts": update.event.ts.isoformat(), "type": update.type}
        row.update(step=update.step, superstep=update.superstep, branch=update.branch)
        row["data"] = shown = jsonable(update.data)
    if as_json:
        print_json_line(row)
        return
    step = f" {row['step']}" if row["step"] else ""
    when = f"{row['seq']:>5} {row['ts'][11:23]} "
    print_line(when, (row["type"], "bold"), step, " ", short(shown, 200))


@command()
def state(
    run_id: RunIdArg,
    at: Annotated[int | None, typer.Option("--at", help="Rebuild the state at this seq.")] = None,
    log: LogOpt = DEFAULT_LOG_URL,
    archive: ArchiveOpt = DEFAULT_ARCHIVE_URL,
    as_json: JsonOpt = False,
    internal: InternalOpt = False,
) -> None:
    """The run's state now, or at any seq (time travel)."""

    async def go() -> dict[str, Any]:
        async with read_history(log, archive) as event_log:
            return (await load_state(event_log, run_id, at_seq=at)).to_dict()

    data = jsonable(run_async(go))
    bookkeeping = {k: data.pop(k) for k in sorted(INTERNAL_FIELDS)}
    if as_json:
        print_json({**data, **bookkeeping} if internal else data)
        return
    print_line(
        (run_id, "bold"),
        f" at seq {data['seq']}: {data['status']}, {data['steps']} steps, "
        f"superstep {data['superstep']}, next {short(data['next_steps'], 200)}",
    )
    if data["interrupts"]:
        print_line(f"waiting on: {short(data['interrupts'][0]['payload'], 200)}")
    if data["error"]:
        print_line(("error:", "red"), f" {data['error']}")
    out.print(Text(to_json(data["values"])))
    if internal:
        print_line(("internal:", "dim"))
        out.print(Text(to_json(bookkeeping)))


@command()
def diff(
    run_id: RunIdArg,
    seq_a: Annotated[int, typer.Argument(help="From this seq.")],
    seq_b: Annotated[int, typer.Argument(help="To this seq.")],
    log: LogOpt = DEFAULT_LOG_URL,
    archive: ArchiveOpt = DEFAULT_ARCHIVE_URL,
    as_json: JsonOpt = False,
    internal: InternalOpt = False,
) -> None:
    """What changed in the run's state between two seqs."""

    async def go() -> list[dict[str, Any]]:
        async with read_history(log, archive) as event_log:
            before = await load_state(event_log, run_id, at_seq=seq_a)
            after = await load_state(event_log, run_id, at_seq=seq_b)
            changes = diff_states(before, after, internal=internal)
            return [c.to_dict() for c in changes]

    changes = jsonable(run_async(go))
    if as_json:
        print_json(changes)
        return
    if not changes:
        print_line("no changes")
        return
    rows = [(c["path"], c["op"], short(c["before"], 50), short(c["after"], 50)) for c in changes]
    title = f"run {run_id}: seq {seq_a} -> {seq_b}"
    print_table(table(title, ("path", "change", "before", "after"), rows))
