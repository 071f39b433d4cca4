"""The ``archive`` and ``sql`` commands."""

from __future__ import annotations

import dataclasses
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agentlog.archive._archiver import ArchiverConfig, ArchiveSummary
from agentlog.archive._errors import ArchiveConfigError
from agentlog.archive._retention import (
    RetentionPolicies,
    RetentionPolicy,
    parse_duration,
    parse_policy,
)
from agentlog.archive._sql import VIEWS, python_rows
from agentlog.archive._sql_values import csv_ready
from agentlog.archive._store import DEFAULT_ARCHIVE_URL, open_archive
from agentlog.cli._app import command, run_async
from agentlog.cli._options import ArchiveOpt, EndpointOpt, JsonOpt, LogOpt, size_bytes
from agentlog.cli._render import err, print_json, print_line, print_table, table, to_json
from agentlog.crypto import LocalKeyStore
from agentlog.errors import ConfigError
from agentlog.eventlog._urls import DEFAULT_LOG_URL, open_log

__all__ = ["OutputFormat"]


class OutputFormat(StrEnum):
    """How ``agentlog sql`` writes its rows."""

    TABLE = "table"
    CSV = "csv"
    JSON = "json"
    PARQUET = "parquet"


def _policies(retention: list[str], idle_after: str | None) -> RetentionPolicies:
    idle = parse_duration(idle_after) if idle_after else None
    default = RetentionPolicy(idle_after=idle) if idle else RetentionPolicy()
    per: dict[str, RetentionPolicy] = {}
    for text in retention:
        name, policy = parse_policy(text, idle_after=idle)
        if name == "*":
            default = policy
        else:
            per[name] = policy
    return RetentionPolicies(default=default, per_workflow=per)


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def _print_summary(summary: ArchiveSummary) -> None:
    if summary.dry_run:
        print_line("dry run: nothing was written, pruned or deleted")
    rows: list[tuple[str, str]] = [("runs", f"{summary.runs:,}"), ("events", f"{summary.events:,}")]
    if not summary.dry_run:
        rows += [
            ("files written", f"{summary.files:,}"),
            ("bytes before (hot, est.)", _human(summary.bytes_before)),
            ("bytes after (parquet)", _human(summary.bytes_after)),
            ("runs pruned from hot log", f"{summary.pruned:,}"),
            ("files expired (ttl)", f"{summary.expired_files:,}"),
        ]
        if summary.orphans_removed:
            rows.append(("orphan files removed", f"{summary.orphans_removed:,}"))
    grid = table("archive", ("", ""), rows)
    grid.show_header = False
    print_table(grid)


@command("archive")
def archive_command(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be archived; change nothing.")
    ] = False,
    log: LogOpt = DEFAULT_LOG_URL,
    archive: ArchiveOpt = DEFAULT_ARCHIVE_URL,
    endpoint: EndpointOpt = None,
    retention: Annotated[
        list[str] | None,
        typer.Option(
            "--retention",
            help="WORKFLOW=full|latest_snapshot|ttl:30d (repeatable; * = default).",
        ),
    ] = None,
    idle_after: Annotated[
        str | None,
        typer.Option("--idle-after", help="Archive unfinished runs idle this long (7d)."),
    ] = None,
    run: Annotated[
        list[str] | None,
        typer.Option("--run", help="Archive only this run (repeatable); it must be finished."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Move finished (and idle-expired) runs from the hot log to Parquet."""
    from agentlog.archive._archiver import Archiver

    async def go() -> ArchiveSummary:
        config = ArchiverConfig(retention=_policies(retention or [], idle_after))
        store = open_archive(archive, endpoint_url=endpoint)
        # Sealed payloads are archived as ciphertext, so archiving needs no keys; with
        # AGENTLOG_KEYRING an idle unfinished run can be snapshotted before it is pruned.
        keys = LocalKeyStore.from_env()
        async with await open_log(log, create=False, keys=keys) as hot:
            archiver = Archiver(hot, store, config)
            if dry_run:
                return await archiver.run(dry_run=True, run_ids=run)
            with Progress(
                TextColumn("archiving"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("events"),
                TimeElapsedColumn(),
                console=err,
                transient=True,
            ) as bar:
                task = bar.add_task("archive", total=None)

                def progress(runs: int, events: int, total_runs: int, total_events: int) -> None:
                    bar.update(task, completed=events, total=total_events)

                return await archiver.run(run_ids=run, progress=progress)

    summary = run_async(go)
    if as_json:
        print_json(dataclasses.asdict(summary))
    else:
        _print_summary(summary)


@command("sql")
def sql_command(
    query: Annotated[str, typer.Argument(help=f"SQL over the views {', '.join(VIEWS)}.")],
    fmt: Annotated[
        OutputFormat, typer.Option("--format", "-f", help="Output format.")
    ] = OutputFormat.TABLE,
    out_path: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Write to this file (needed for parquet)."),
    ] = None,
    log: LogOpt = DEFAULT_LOG_URL,
    archive: ArchiveOpt = DEFAULT_ARCHIVE_URL,
    endpoint: EndpointOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="The same as --format json.")] = False,
    memory_limit: Annotated[
        str,
        typer.Option(
            "--memory-limit",
            help="DuckDB's memory limit for the query, such as 4GB (default: 80% of the RAM). "
            "Nothing spills to disk: a query that needs more fails.",
        ),
    ] = "",
) -> None:
    """Read-only SQL over the archive and the hot log.

    Views: events, runs, tasks, interrupts, and for LangGraph threads
    checkpoints and checkpoint_writes. Encrypted runs show their payloads
    only with the keys (AGENTLOG_KEYRING); otherwise, and after a shred,
    payload_json holds just the metadata.
    """
    from agentlog.archive._sql import sql_cipher, sql_source
    from agentlog.archive._sql_process import run_query

    if memory_limit:
        size_bytes("--memory-limit", memory_limit)
    if as_json:
        fmt = OutputFormat.JSON
    if fmt is OutputFormat.PARQUET and out_path is None:
        raise ArchiveConfigError("--format parquet needs --out FILE.parquet")

    async def gather() -> Any:
        store = open_archive(archive, endpoint_url=endpoint)
        keys = LocalKeyStore.from_env()
        try:
            hot = await open_log(log, create=False, keys=keys)
        except ConfigError:
            if log != DEFAULT_LOG_URL:
                raise
            # No hot log where the default says: the archive alone is queried.
            return await sql_source(store, None), sql_cipher(keys, None)
        async with hot:
            return await sql_source(store, hot), sql_cipher(None, hot)

    source, cipher = run_async(gather)
    # In a process of its own, whose memory --memory-limit bounds as a whole.
    rows, _ = run_query(source, cipher, query, memory_limit=memory_limit)
    try:
        _emit(rows, fmt, out_path)
    except OSError as exc:
        raise ArchiveConfigError(f"cannot write {out_path}: {exc}") from exc
    if out_path is not None:
        # The rows went to the file: say so, or a success looks like nothing happened.
        noun = "row" if rows.num_rows == 1 else "rows"
        print_line(f"wrote {rows.num_rows:,} {noun} ({fmt.value}) to {out_path}")


def _emit(rows: Any, fmt: OutputFormat, out_path: Path | None) -> None:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if fmt is OutputFormat.PARQUET:
        assert out_path is not None
        pq.write_table(rows, out_path, compression="zstd")
        return
    if fmt is OutputFormat.CSV:
        # Lists and structs (checkpoints.channels...) as JSON text: CSV has no nesting.
        flat = csv_ready(rows)
        if out_path is not None:
            pacsv.write_csv(flat, out_path)
        else:
            sink = sys.stdout.buffer
            pacsv.write_csv(flat, sink)
            sink.flush()
        return
    # Per value, with DuckDB's text for what Python cannot hold (infinity, year 10000).
    values = python_rows(rows)
    records = [dict(zip(rows.column_names, row, strict=True)) for row in values]
    if fmt is OutputFormat.JSON:
        if out_path is not None:
            out_path.write_text(to_json(records) + "\n")
        else:
            print_json(records)
        return
    grid = table(None, rows.column_names, values)
    if out_path is not None:
        with open(out_path, "w") as fh:
            print_table(grid, Console(file=fh, width=200, markup=False, emoji=False))
    else:
        print_table(grid)
