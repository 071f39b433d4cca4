"""The commands that drive runs: ``resume``, ``send``, ``cancel``, ``recover``,
``retry``, ``shred``, ``demo``."""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Any

import typer
from rich.console import Console

from agentlog.archive._store import DEFAULT_ARCHIVE_URL
from agentlog.cli._app import command, run_async
from agentlog.cli._leases import held_json, held_line, wait_for_leases
from agentlog.cli._options import (
    AppOpt,
    ArchiveOpt,
    EndpointOpt,
    JsonOpt,
    LogOpt,
    existing_archive,
    open_runtime,
)
from agentlog.cli._render import print_error, print_json, print_line
from agentlog.cli._workflows import load_workflows
from agentlog.errors import ConfigError, RunFailedError
from agentlog.eventlog._urls import DEFAULT_LOG_URL
from agentlog.eventlog.events import RunStatus, utcnow
from agentlog.runtime import RuntimeConfig, ShredReport
from agentlog.runtime._shred import check_shreddable

__all__: list[str] = []

RunIdArg = Annotated[str, typer.Argument(help="The run id.")]

#: Where a command's workflows come from, in every "workflow not registered" error.
APP_HINT = "load its code with --app module:attr (or --app path/to/file.py:attr)"

#: A one-shot command drives the run it touches, and only that one: no
#: background worker (``agentlog worker`` is the long-running one).
ONE_SHOT = RuntimeConfig(worker=False, workflow_hint=APP_HINT)


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
        async with await open_runtime(log, workflows=workflows, config=ONE_SHOT) as runtime:
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
def send(
    run_id: RunIdArg,
    topic: Annotated[str, typer.Argument(help="The topic a step's ctx.recv(topic) takes.")],
    value: Annotated[str, typer.Argument(help="The message, as JSON.")],
    key: Annotated[
        str | None, typer.Option("--key", help="An idempotency key: sent once, stored once.")
    ] = None,
    log: LogOpt = DEFAULT_LOG_URL,
    apps: AppOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Send a message into a run; with --app, run it here until it parks or ends."""
    try:
        message = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"the message is not JSON: {exc}; for a string write '\"text\"'"
        ) from None
    workflows = load_workflows(apps)
    # Without the code, record the message for a worker (the run is not driven here).
    config = ONE_SHOT if apps else dataclasses.replace(ONE_SHOT, execute=False)

    async def go() -> dict[str, Any]:
        async with await open_runtime(log, workflows=workflows, config=config) as runtime:
            recorded = await runtime.send(run_id, topic, message, key)
            state = await (runtime.wait(run_id) if apps else runtime.get_state(run_id))
            return {"run_id": run_id, "recorded": recorded, "status": state.status}

    result = run_async(go)
    if as_json:
        print_json(result)
        return
    said = "sent" if result["recorded"] else "already sent (same --key): nothing recorded"
    print_line(f"run {run_id}: message on {topic!r} {said}; the run is {result['status']}")


@command()
def cancel(
    run_id: RunIdArg,
    reason: Annotated[str, typer.Option(help="Recorded with the cancellation.")] = "cancelled",
    log: LogOpt = DEFAULT_LOG_URL,
    as_json: JsonOpt = False,
) -> None:
    """Cancel a run (a running step and its tasks are interrupted)."""

    async def go() -> str:
        async with await open_runtime(log, config=ONE_SHOT) as runtime:
            return (await runtime.cancel(run_id, reason)).status

    status = run_async(go)
    if as_json:
        print_json({"run_id": run_id, "status": status})
    else:
        print_line(f"run {run_id}: {status}")


@command()
def shred(
    run_id: RunIdArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    log: LogOpt = DEFAULT_LOG_URL,
    archive: ArchiveOpt = DEFAULT_ARCHIVE_URL,
    endpoint: EndpointOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Crypto-shred a run: destroy its data key, so its payloads are unreadable in
    every copy (log, snapshots, Kafka, archive) for good; its metadata stays and
    its status becomes shredded.

    Needs the key store that encrypted the run (AGENTLOG_KEYRING=PATH). A run
    that has not ended is cancelled first. A run archived and pruned from the
    log is read through --archive; its Parquet files are not rewritten. Its
    forks keep their own keys: shred each one to erase their copies too.
    Shredding again changes nothing.
    """
    store = existing_archive(archive, endpoint)

    async def check() -> None:
        async with await open_runtime(log, config=ONE_SHOT, archive=store) as runtime:
            await check_shreddable(runtime.log, run_id, runtime.archive)

    async def go() -> ShredReport:
        async with await open_runtime(log, config=ONE_SHOT, archive=store) as runtime:
            return await runtime.shred(run_id)

    run_async(check)  # an unknown, plain or foreign run fails before the question
    if not yes:
        typer.confirm(
            f"Shred run {run_id}? Its data key is destroyed and its payloads become "
            "unreadable everywhere, for good (its metadata stays).",
            abort=True,
            err=True,
        )
    report = run_async(go)
    if as_json:
        print_json(dataclasses.asdict(report))
        return
    if report.already:
        print_line(f"run {run_id}: already shredded at {report.shredded_at}; nothing recorded")
        return
    cancelled = "; it had not ended, so it was cancelled first" if report.cancelled else ""
    recorded = f"; RunShredded recorded at seq {report.recorded_seq}" if report.recorded_seq else ""
    print_line(
        f"run {run_id}: shredded at {report.shredded_at}: its data key was destroyed in "
        f"{report.key_store}{cancelled}{recorded}. Its payloads are unreadable in every copy; "
        "its metadata can still be listed and audited."
    )


@command()
def recover(
    log: LogOpt = DEFAULT_LOG_URL,
    apps: AppOpt = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="Also wait for the leases that still hold runs to end (a dead writer's "
            "lives on until it runs out), showing progress, then recover those runs; "
            "a writer that renews its lease meanwhile is alive and keeps its run.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Continue every running run whose writer died (its lease expired).

    A run whose writer's lease is still live is named, with its writer and
    when the lease ends: right after a crash the dead writer's lease lives on
    until it runs out; --wait waits for it. LangGraph threads are left to the
    application that invokes their graph. Every run that can be recovered is;
    each one that cannot (a workflow not loaded with --app, changed code, a
    corrupt event) is reported with the reason, and only then does the
    command exit non-zero (1).
    """
    workflows = load_workflows(apps)

    async def go() -> tuple[list[dict[str, Any]], dict[str, str], list[dict[str, Any]]]:
        async with await open_runtime(log, workflows=workflows, config=ONE_SHOT) as runtime:
            report = await runtime.recover()
            if not as_json:
                for info in report.held:
                    print_line(held_line(info))
            if wait and report.held:
                report = await wait_for_leases(runtime, report, progress=not as_json)
            done = []
            for run_id in report.recovered:
                final = await runtime.wait(run_id)
                done.append({"run_id": run_id, "status": final.status, "seq": final.seq})
                if not as_json:
                    print_line(f"run {run_id}: {final.status} at seq {final.seq}")
            failed = {run_id: f"{type(e).__name__}: {e}" for run_id, e in report.failed.items()}
            return done, failed, [held_json(info) for info in report.held]

    done, failed, held = run_async(go)
    if as_json:
        print_json({"recovered": done, "failed": failed, "held": held})
    else:
        alive = f"; {len(held)} held by a live writer" if wait and held else ""
        print_line(f"recovered {len(done)} run(s){alive}")
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
    """Continue a failed run under the same id, from its last committed superstep.

    Exit codes: 0 when the run completed or parked on an interrupt; 1 when it
    failed again (or was cancelled meanwhile), with its error on stderr; 2
    when nothing was retried (an unknown run, a run that has not failed, a
    workflow not loaded with --app).
    """
    workflows = load_workflows(apps)

    async def go() -> dict[str, Any]:
        async with await open_runtime(log, workflows=workflows, config=ONE_SHOT) as runtime:
            await runtime.retry(run_id)
            try:
                final = await runtime.wait(run_id)
            except RunFailedError:  # a step's code error failed it again, on record
                final = await runtime.get_state(run_id)
            return {
                "run_id": run_id,
                "status": final.status,
                "seq": final.seq,
                "error": final.error,
            }

    result = run_async(go)
    if as_json:
        print_json(result)
    else:
        print_line(f"run {run_id}: {result['status']} at seq {result['seq']}")
    if result["status"] in (RunStatus.FAILED, RunStatus.CANCELLED):
        print_error(f"run {run_id} {result['status']} after the retry: {result['error']}")
        raise typer.Exit(1)


@command()
def demo(
    log: LogOpt = DEFAULT_LOG_URL,
    run_id: Annotated[
        str | None, typer.Option(help="Run id to use (default: demo-<UTC time>).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """A research agent that crashes, resumes, waits for approval and sends one email."""
    from agentlog.cli._demo import run_demo

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
    """Print a workflow's step graph as a Mermaid flowchart: every edge each step can take.

    Solid edges are where a returned dict leads (then=, or the end); dotted ones
    are the goto and end its code returns, bounded by its declared routes=.
    """
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
