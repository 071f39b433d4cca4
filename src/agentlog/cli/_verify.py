"""``agentlog verify``: the replay check, a deploy gate.

Re-executes recorded runs against the workflows ``--app`` names (and the
demo's, which every command knows), with no effects and no writes (see
:mod:`agentlog.replay._verify`), and prints one row per run and a summary.
It reads runs as ``show`` and ``runs`` do: the hot log, and archived runs
through the same default ``--archive``. Exit code 0 when every checked run
matches, 1 on any divergence, 2 on bad input (the error boundary in
:mod:`agentlog.cli._app`).
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import typer
from rich.progress import Progress

from agentlog.archive._store import DEFAULT_ARCHIVE_URL
from agentlog.cli._app import command, run_async
from agentlog.cli._options import AppOpt, ArchiveOpt, JsonOpt, LogOpt, read_history
from agentlog.cli._render import err, print_json, print_line, print_table, table
from agentlog.cli._workflows import load_workflows
from agentlog.errors import ConfigError
from agentlog.eventlog._urls import DEFAULT_LOG_URL
from agentlog.replay._verify import RunCheck, RunSelection, VerifyReport, verify_runs

__all__: list[str] = []

RunsOpt = Annotated[
    str,
    typer.Option(
        "--runs", help="open (not finished; default), all, or N (the N most recently updated)."
    ),
]


def parse_runs(value: str) -> RunSelection:
    """``--runs`` as the library takes it.

    Raises:
        ConfigError: not open, all, or a whole number of at least 1.
    """
    if value in ("open", "all"):
        return value  # type: ignore[return-value]
    if value.isdigit() and int(value) >= 1:
        return int(value)
    raise ConfigError(
        f"--runs {value}: write open (runs not finished), all, or a number of runs such as 20"
    )


@command()
def verify(
    apps: AppOpt = None,
    runs: RunsOpt = "open",
    log: LogOpt = DEFAULT_LOG_URL,
    archive: ArchiveOpt = DEFAULT_ARCHIVE_URL,
    as_json: JsonOpt = False,
) -> None:
    """Replay recorded runs against your current code; exit 1 if any diverges.

    Tasks return their recorded results and nothing runs outside: no task
    body, no timer, nothing written to the log. Use it before a deploy.
    Archived runs are read from --archive, as show and runs read them.
    """
    selection = parse_runs(runs)
    workflows = load_workflows(apps)
    report = run_async(lambda: _check(log, archive, workflows, selection))
    if as_json:
        print_json(
            {
                "ok": report.ok,
                "checked": len(report.runs),
                "matched": report.matched,
                "diverged": report.diverged,
                "skipped": report.skipped,
                "runs": [dataclasses.asdict(check) for check in report.runs],
            }
        )
    else:
        _print(report)
    if not report.ok:
        raise typer.Exit(1)


async def _check(
    log_url: str, archive_url: str, workflows: list[Any], selection: RunSelection
) -> VerifyReport:
    async with read_history(log_url, archive_url) as history:
        if not err.is_terminal:
            return await verify_runs(history, workflows, runs=selection)
        with Progress(console=err, transient=True) as progress:
            bar = progress.add_task("replaying runs", total=None)

            def advance(check: RunCheck, done: int, total: int) -> None:
                progress.update(bar, completed=done, total=total)

            return await verify_runs(history, workflows, runs=selection, progress=advance)


def _print(report: VerifyReport) -> None:
    rows = []
    for check in report.runs:
        first = check.divergences[0] if check.divergences else None
        rows.append(
            [
                check.run_id,
                f"{check.workflow} v{check.version}",
                check.status,
                "" if first is None else first.seq,
                "" if first is None else first.kind,
                first.message if first is not None else check.note,
            ]
        )
    print_table(table("verify", ["run", "workflow", "verdict", "seq", "kind", "what"], rows))
    print_line(
        f"{len(report.runs)} runs checked: {report.matched} matched, "
        f"{report.diverged} diverged, {report.skipped} skipped"
    )
