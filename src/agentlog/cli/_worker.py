"""``agentlog worker``: a long-running process that drives the runs of a log."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
from typing import Annotated

import typer

from agentlog.cli._app import command, run_async
from agentlog.cli._control import ONE_SHOT
from agentlog.cli._options import AppOpt, JsonOpt, LogOpt, open_runtime
from agentlog.cli._render import print_json_line, print_line
from agentlog.cli._workflows import load_workflows
from agentlog.errors import ConfigError
from agentlog.eventlog._urls import DEFAULT_LOG_URL, log_location, redact_url, sqlite_file
from agentlog.runtime import WorkerConfig

__all__: list[str] = []


def _limits(values: list[str] | None) -> dict[str, int]:
    limits: dict[str, int] = {}
    for value in values or []:
        name, eq, number = value.partition("=")
        if not eq or not name or not number.strip().isdigit():
            raise ConfigError(
                f"--workflow-limit {value!r}: write NAME=N, such as --workflow-limit research=5"
            )
        limits[name] = int(number)
    return limits


def _served(url: str, create: bool) -> str:
    """Where the log the worker serves is (:func:`log_location`).

    Raises:
        ConfigError: a SQLite log that does not exist, and no ``--create``.
    """
    path = sqlite_file(url)
    if path is not None and not create and not os.path.exists(path):
        raise ConfigError(
            f"no log at {path} (--log {redact_url(url)}, read from {os.getcwd()}): run the "
            "worker in the folder your runs were started from, point --log (or AGENTLOG_LOG) "
            "at the log file, or pass --create to start a new, empty log there"
        )
    return log_location(url)


@command()
def worker(
    apps: AppOpt = None,
    log: LogOpt = DEFAULT_LOG_URL,
    concurrency: Annotated[
        int, typer.Option(help="Runs this worker drives at once (parked runs do not count).")
    ] = 50,
    workflow_limit: Annotated[
        list[str] | None,
        typer.Option(help="NAME=N: at most N runs of workflow NAME at once here (repeatable)."),
    ] = None,
    lease: Annotated[
        float,
        typer.Option(
            help="Seconds a run's lease lives without renewal; after a crash, "
            "another worker takes the run over once it ends."
        ),
    ] = 30.0,
    poll: Annotated[
        float, typer.Option(help="Seconds between looks for due work when nothing wakes it.")
    ] = 0.2,
    create: Annotated[
        bool,
        typer.Option(
            "--create",
            help="Create the SQLite log if there is none at --log. Without it a worker "
            "refuses, so one started in the wrong folder does not serve a new, empty log.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Drive runs until stopped: new and resumed runs, due timers, schedules, and
    runs whose worker died. Run several, on one machine or many, on the same --log.

    SIGTERM or Ctrl-C: each run finishes its current step, is recorded and
    handed over, and the worker exits 0. SIGKILL loses nothing: another
    worker takes its runs over when their leases end.
    """
    workflows = load_workflows(apps)  # a bad --app first: it is the usual mistake
    where = _served(log, create)
    settings = WorkerConfig(
        concurrency=concurrency, workflow_concurrency=_limits(workflow_limit), poll_seconds=poll
    )
    if not lease > 0:
        raise ConfigError(f"--lease must be > 0 seconds, got {lease}")

    async def go() -> None:
        config = dataclasses.replace(ONE_SHOT, worker_config=settings, lease_seconds=lease)
        async with await open_runtime(log, workflows=workflows, config=config) as runtime:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, runtime.worker.stop)
            owner, names = runtime.config.owner, sorted(runtime.workflows)
            if as_json:
                print_json_line(
                    {"worker": owner, "status": "ready", "workflows": names, "log": where}
                )
            else:
                print_line(f"worker {owner} drives {', '.join(names)} on {where}")
            await runtime.serve()
            if as_json:
                print_json_line({"worker": owner, "status": "stopped"})
            else:
                print_line(f"worker {owner} stopped; its runs are handed over")

    run_async(go)
