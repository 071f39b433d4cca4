"""``agentlog fork``: a new run from another run's state at a seq (``Runtime.fork``)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from agentlog.archive._store import DEFAULT_ARCHIVE_URL
from agentlog.cli._app import command, run_async
from agentlog.cli._control import ONE_SHOT, RunIdArg
from agentlog.cli._options import (
    AppOpt,
    ArchiveOpt,
    JsonOpt,
    LogOpt,
    existing_archive,
    open_runtime,
)
from agentlog.cli._render import print_json, print_line
from agentlog.cli._workflows import load_workflows
from agentlog.errors import ConfigError
from agentlog.eventlog._urls import DEFAULT_LOG_URL

__all__: list[str] = []


def _updates(text: str | None) -> dict[str, Any] | None:
    """``--set``'s JSON object, or None without it."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f'--set is not JSON: {exc}; write an object such as \'{{"topic": "cats"}}\''
        ) from None
    if not isinstance(value, dict):
        raise ConfigError(
            f"--set must be a JSON object of state keys to values, got {type(value).__name__}; "
            'write for example \'{"topic": "cats"}\''
        )
    return value


@command()
def fork(
    run_id: RunIdArg,
    at: Annotated[int, typer.Option("--at", help="The origin's seq to fork at.")],
    new_run_id: Annotated[str, typer.Option("--as", help="The id of the new run.")],
    set_: Annotated[
        str | None,
        typer.Option("--set", help="State updates at the fork point, as a JSON object."),
    ] = None,
    log: LogOpt = DEFAULT_LOG_URL,
    archive: ArchiveOpt = DEFAULT_ARCHIVE_URL,
    apps: AppOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Start a new run from RUN's state at seq --at, reusing its recorded task
    results up to there, and run it (under the code --app loads) until it
    parks or ends. The origin is not changed; it may be archived (--archive).
    """
    updates = _updates(set_)
    workflows = load_workflows(apps)

    async def go() -> dict[str, Any]:
        async with await open_runtime(log, workflows=workflows, config=ONE_SHOT) as runtime:
            origin_archive = existing_archive(archive)
            await runtime.fork(
                run_id, at, new_run_id=new_run_id, updates=updates, archive=origin_archive
            )
            final = await runtime.wait(new_run_id)
            return {
                "run_id": new_run_id,
                "forked_from": final.forked_from,
                "updates": sorted(updates or {}),
                "status": final.status,
                "seq": final.seq,
                "steps": final.steps,
            }

    result = run_async(go)
    if as_json:
        print_json(result)
        return
    updated = f", updated {', '.join(result['updates'])}" if result["updates"] else ""
    print_line(
        f"run {new_run_id}: forked from run {run_id} at seq {at}{updated}; "
        f"{result['status']} at seq {result['seq']}, {result['steps']} steps"
    )
