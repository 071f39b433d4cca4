"""The ``agentlog archive`` and ``agentlog sql`` commands.

The lead's ``cli.py`` calls :func:`register` on its Typer app. Every error is
printed as one clear line on stderr, with exit code 2.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agentlog.archive.archiver import ArchiverConfig, ArchiveSummary
from agentlog.archive.errors import ArchiveConfigError
from agentlog.archive.retention import (
    RetentionPolicies,
    RetentionPolicy,
    parse_duration,
    parse_policy,
)
from agentlog.archive.sql import VIEWS
from agentlog.archive.store import DEFAULT_ARCHIVE_URL, open_archive
from agentlog.errors import AgentlogError, ConfigError
from agentlog.eventlog.urls import DEFAULT_LOG_URL, open_log

__all__ = ["OutputFormat", "register"]

_T = TypeVar("_T")

LogOption = Annotated[
    str, typer.Option("--log", envvar="AGENTLOG_LOG", help="The hot event log URL.")
]
ArchiveOption = Annotated[
    str,
    typer.Option(
        "--archive",
        envvar="AGENTLOG_ARCHIVE",
        help="The archive URL: file://DIR or s3://BUCKET/PREFIX.",
    ),
]
EndpointOption = Annotated[
    str | None,
    typer.Option(
        "--endpoint",
        envvar="AGENTLOG_S3_ENDPOINT",
        help="An S3 endpoint such as http://127.0.0.1:9000 (MinIO); default: AWS settings.",
    ),
]


class OutputFormat(StrEnum):
    """How ``agentlog sql`` writes its rows."""

    TABLE = "table"
    CSV = "csv"
    JSON = "json"
    PARQUET = "parquet"


def _fail(err: Console, exc: Exception) -> typer.Exit:
    err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
    return typer.Exit(2)


def _run(err: Console, make: Callable[[], Awaitable[_T]]) -> _T:
    try:
        return asyncio.run(make())  # type: ignore[arg-type]
    except AgentlogError as exc:
        raise _fail(err, exc) from exc


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


def _print_summary(out: Console, summary: ArchiveSummary) -> None:
    if summary.dry_run:
        out.print("dry run: nothing was written, pruned or deleted")
    table = Table(title="archive", show_header=False)
    table.add_row("runs", f"{summary.runs:,}")
    table.add_row("events", f"{summary.events:,}")
    if not summary.dry_run:
        table.add_row("files written", f"{summary.files:,}")
        table.add_row("bytes before (hot, est.)", _human(summary.bytes_before))
        table.add_row("bytes after (parquet)", _human(summary.bytes_after))
        table.add_row("runs pruned from hot log", f"{summary.pruned:,}")
        table.add_row("files expired (ttl)", f"{summary.expired_files:,}")
        if summary.orphans_removed:
            table.add_row("orphan files removed", f"{summary.orphans_removed:,}")
    out.print(table)


def register(app: typer.Typer) -> None:
    """Add the ``archive`` and ``sql`` commands to ``app``."""

    @app.command("archive")
    def archive_command(
        dry_run: Annotated[
            bool, typer.Option("--dry-run", help="Show what would be archived; change nothing.")
        ] = False,
        log: LogOption = DEFAULT_LOG_URL,
        archive: ArchiveOption = DEFAULT_ARCHIVE_URL,
        endpoint: EndpointOption = None,
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
    ) -> None:
        """Move finished (and idle-expired) runs from the hot log to Parquet."""
        from agentlog.archive.archiver import Archiver

        out, err = Console(), Console(stderr=True)

        async def go() -> ArchiveSummary:
            config = ArchiverConfig(retention=_policies(retention or [], idle_after))
            store = open_archive(archive, endpoint_url=endpoint)
            # A mistyped --log must not create an empty log (and report nothing to do).
            async with await open_log(log, create=False) as hot:
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

                    def progress(
                        runs: int, events: int, total_runs: int, total_events: int
                    ) -> None:
                        bar.update(task, completed=events, total=total_events)

                    return await archiver.run(run_ids=run, progress=progress)

        _print_summary(out, _run(err, go))

    @app.command("sql")
    def sql_command(
        query: Annotated[str, typer.Argument(help=f"SQL over the views {', '.join(VIEWS)}.")],
        fmt: Annotated[
            OutputFormat, typer.Option("--format", "-f", help="Output format.")
        ] = OutputFormat.TABLE,
        out_path: Annotated[
            Path | None,
            typer.Option("--out", "-o", help="Write to this file (needed for parquet)."),
        ] = None,
        log: LogOption = DEFAULT_LOG_URL,
        archive: ArchiveOption = DEFAULT_ARCHIVE_URL,
        endpoint: EndpointOption = None,
    ) -> None:
        """Run SQL over the archive and the hot log (views: events, runs, tasks, interrupts)."""
        from agentlog.archive.sql import open_sql

        out, err = Console(), Console(stderr=True)
        if fmt is OutputFormat.PARQUET and out_path is None:
            raise _fail(err, ArchiveConfigError("--format parquet needs --out FILE.parquet"))

        async def go() -> Any:
            store = open_archive(archive, endpoint_url=endpoint)
            try:
                hot = await open_log(log, create=False)
            except ConfigError:
                if log != DEFAULT_LOG_URL:
                    raise
                # No hot log where the default says: the archive alone is queried.
                with await open_sql(store, None) as db:
                    return db.arrow(query)
            async with hot:
                with await open_sql(store, hot) as db:
                    return db.arrow(query)

        rows = _run(err, go)
        try:
            _emit(rows, fmt, out_path, out)
        except OSError as exc:
            raise _fail(err, ArchiveConfigError(f"cannot write {out_path}: {exc}")) from exc


def _emit(rows: Any, fmt: OutputFormat, out_path: Path | None, out: Console) -> None:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if fmt is OutputFormat.PARQUET:
        assert out_path is not None
        pq.write_table(rows, out_path, compression="zstd")
        return
    if fmt is OutputFormat.CSV:
        if out_path is not None:
            pacsv.write_csv(rows, out_path)
        else:
            sink = sys.stdout.buffer
            pacsv.write_csv(rows, sink)
            sink.flush()
        return
    records = rows.to_pylist()
    if fmt is OutputFormat.JSON:
        text = json.dumps(records, default=_json_value, ensure_ascii=False, indent=None)
        if out_path is not None:
            out_path.write_text(text + "\n")
        else:
            sys.stdout.write(text + "\n")
        return
    table = Table(*rows.column_names)
    for record in records:
        table.add_row(*("NULL" if v is None else str(v) for v in record.values()))
    if out_path is not None:
        with open(out_path, "w") as fh:
            Console(file=fh, width=200).print(table)
    else:
        out.print(table)


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        import base64

        return base64.b64encode(value).decode("ascii")
    return str(value)
