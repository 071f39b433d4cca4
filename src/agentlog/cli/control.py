"""The commands that drive runs: ``resume``, ``cancel``, ``recover``, ``demo``."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console

from agentlog.cli.app import command, run_async
from agentlog.cli.options import AppOpt, JsonOpt, LogOpt
from agentlog.cli.render import print_error, print_json, print_line
from agentlog.cli.workflows import load_workflows
from agentlog.errors import ConfigError
from agentlog.eventlog.events import utcnow
from agentlog.eventlog.urls import DEFAULT_LOG_URL
from agentlog.runtime import Runtime, RuntimeConfig

__all__: list[str] = []

RunIdArg = Annotated[str, typer.Argument(help="The run id.")]

#: A one-shot command drives the run it touches, and only that one: no
#: background worker (``agentlog worker`` is the long-running one).
ONE_SHOT = RuntimeConfig(worker=False)


@command()
def resume(
    run_id: RunIdArg,
    value: Annotated[str, typer.Option("--value", help="The answer, as JSON.")] = "null",
    log: LogOpt = DEFAULT_LOG_URL,
    apps: AppOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer a parked run's interrupt and run it until it parks or ends."""
    try:
        answer = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--value is not JSON: {exc}; for a string write '\"text\"'") from None
    workflows = load_workflows(apps)

    async def go() -> dict[str, Any]:
        async with await Runtime.open(log, workflows=workflows, config=ONE_SHOT) as runtime:
            await runtime.resume(run_id, answer)
            final = await runtime.wait(run_id)
            return {
                "run_id": run_id,
                "status": final.status,
                "seq": final.seq,
                "steps": final.steps,
            }

    result = run_async(go)
    if as_json:
        print_json(result)
    else:
        print_line(
            f"run {run_id}: {result['status']} at seq {result['seq']}, {result['steps']} steps"
        )


@command()
def cancel(
    run_id: RunIdArg,
    reason: Annotated[str, typer.Option(help="Recorded with the cancellation.")] = "cancelled",
    log: LogOpt = DEFAULT_LOG_URL,
    as_json: JsonOpt = False,
) -> None:
    """Cancel a run at its next step boundary."""

    async def go() -> str:
        async with await Runtime.open(log, config=ONE_SHOT) as runtime:
            return (await runtime.cancel(run_id, reason)).status

    status = run_async(go)
    if as_json:
        print_json({"run_id": run_id, "status": status})
    else:
        print_line(f"run {run_id}: {status}")


@command()
def recover(log: LogOpt = DEFAULT_LOG_URL, apps: AppOpt = None, as_json: JsonOpt = False) -> None:
    """Continue every running run whose writer died (its lease expired).

    Every run that can be recovered is; each one that cannot (a workflow not
    loaded with --app, changed code, a corrupt event) is reported with the
    reason, and only then does the command exit non-zero (1).
    """
    workflows = load_workflows(apps)

    async def go() -> tuple[list[dict[str, Any]], dict[str, str]]:
        async with await Runtime.open(log, workflows=workflows, config=ONE_SHOT) as runtime:
            report = await runtime.recover()
            done = []
            for run_id in report.recovered:
                final = await runtime.wait(run_id)
                done.append({"run_id": run_id, "status": final.status, "seq": final.seq})
                if not as_json:
                    print_line(f"run {run_id}: {final.status} at seq {final.seq}")
            failed = {run_id: f"{type(e).__name__}: {e}" for run_id, e in report.failed.items()}
            return done, failed

    done, failed = run_async(go)
    if as_json:
        print_json({"recovered": done, "failed": failed})
    else:
        print_line(f"recovered {len(done)} run(s)")
        for run_id, reason in failed.items():
            print_error(f"run {run_id} not recovered: {reason}")
    if failed:
        raise typer.Exit(1)


@command()
def retry(
    run_id: RunIdArg,
    log: LogOpt = DEFAULT_LOG_URL,
    apps: AppOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Continue a failed run under the same id, from its last committed superstep."""
    workflows = load_workflows(apps)

    async def go() -> dict[str, Any]:
        async with await Runtime.open(log, workflows=workflows, config=ONE_SHOT) as runtime:
            await runtime.retry(run_id)
            final = await runtime.wait(run_id)
            return {"run_id": run_id, "status": final.status, "seq": final.seq}

    result = run_async(go)
    if as_json:
        print_json(result)
    else:
        print_line(f"run {run_id}: {result['status']} at seq {result['seq']}")


@command()
def demo(
    log: LogOpt = DEFAULT_LOG_URL,
    run_id: Annotated[
        str | None, typer.Option(help="Run id to use (default: demo-<UTC time>).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """A research agent that crashes, resumes, waits for approval and sends one email."""
    from agentlog.demo import run_demo

    chosen = run_id or "demo-" + utcnow().strftime("%Y%m%d-%H%M%S")
    # The demo's own narration is trusted markup; with --json it goes to stderr.
    console = Console(stderr=as_json, emoji=False, highlight=False)
    summary = run_async(lambda: run_demo(log, chosen, console))
    if as_json:
        print_json(summary)


@command()
def graph(
    name: Annotated[
        str | None, typer.Argument(help="The workflow to draw (default: every one loaded).")
    ] = None,
    apps: AppOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print a workflow's step graph as a Mermaid flowchart (then-edges and declared routes)."""
    workflows = {wf.name: wf for wf in load_workflows(apps)}
    if name is not None and name not in workflows:
        raise ConfigError(
            f"no workflow {name!r} in the loaded apps ({sorted(workflows)}); load it with --app"
        )
    chosen = [workflows[name]] if name is not None else list(workflows.values())
    charts = {wf.name: wf.mermaid() for wf in chosen}
    if as_json:
        print_json(charts)
        return
    for wf_name, chart in charts.items():
        print_line(f"%% workflow {wf_name}")
        for line in chart.splitlines():
            print_line(line)
