"""How a runtime and its worker are set up (:class:`RuntimeConfig`, :class:`WorkerConfig`),
and the one verb table."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

from agentlog.errors import ConfigError
from agentlog.eventlog.events import RunStatus
from agentlog.projector._snapshots import SnapshotPolicy
from agentlog.runtime._telemetry import Telemetry, TelemetryChoice
from agentlog.runtime._writer import Durability

__all__ = ["VERBS", "RuntimeConfig", "WorkerConfig", "verb_hint"]


#: The one verb table: which call does what to a run (in every wrong-verb error).
VERBS = (
    "start: a new run (the same run id returns the existing run); "
    "submit: record a new run for a worker to drive; "
    "resume: answer a waiting run's interrupt; "
    "retry: continue a failed run under the same id; "
    "recover: take over running runs whose writer died; "
    "cancel: stop a run"
)


def _default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """How a worker takes work."""

    concurrency: int = 50
    """Runs this worker drives at once. A run parked on an interrupt or a
    timer does not count; it costs nothing until it is due."""

    workflow_concurrency: Mapping[str, int] = field(default_factory=dict)
    """Per workflow name, runs of it this worker drives at once (at most
    ``concurrency`` in all), so a slow workflow cannot take every slot."""

    poll_seconds: float = 0.2
    """How often the worker looks for due work when nothing wakes it sooner;
    also how late a timer can fire, at most, on an idle worker."""

    schedules: bool = True
    """Submit the runs of the workflows' cron schedules."""

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be >= 1, got {self.concurrency}")
        bad = {k: v for k, v in self.workflow_concurrency.items() if v < 1}
        if bad:
            raise ConfigError(f"workflow concurrency limits must be >= 1, got {bad}")
        if not self.poll_seconds > 0:
            raise ConfigError(f"poll_seconds must be > 0, got {self.poll_seconds}")


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """How a runtime writes."""

    owner: str = field(default_factory=_default_owner)
    """Who this writer is, shown in the run index (default: host:pid)."""

    lease_seconds: float = 30.0
    """How long a writer's claim lives without renewal; renewed every third of it."""

    durability: Durability = "async"
    """Default durability mode for new runs: "sync", "async" or "exit"."""

    snapshots: SnapshotPolicy = field(default_factory=SnapshotPolicy)
    """When to save snapshots of a run's state."""

    poll_seconds: float = 0.05
    """How often :meth:`Runtime.wait` polls a run executing in another process."""

    execute: bool = True
    """``start``, ``resume`` and ``retry`` continue the run in this process.
    False makes this runtime a client: they record the request durably (the
    run, the answer, the retry) and a worker drives the run."""

    worker: bool = True
    """Run a worker in this process, in the background, from the first call
    that moves a run: it fires due timers, drives submitted runs and takes
    over runs whose writer died (see :mod:`agentlog.runtime._worker`)."""

    worker_config: WorkerConfig = field(default_factory=WorkerConfig)
    """Concurrency limits and polling of this process's worker."""

    orphan_grace_seconds: float = 5.0
    """How long :meth:`Runtime.wait` lets a run that needs a driver go
    without one (no live worker took it) before it raises NoLiveWriterError."""

    telemetry: Telemetry | TelemetryChoice = "auto"
    """Traces and metrics of the runs driven here. ``"auto"``: through
    OpenTelemetry's global providers when ``opentelemetry-api`` is installed
    (nothing is imported otherwise); ``"off"``: none; or
    ``agentlog.otel.OpenTelemetry(tracer_provider=..., meter_provider=...)``
    (see docs/opentelemetry.md)."""

    workflow_hint: str = "pass it in Runtime(workflows=[...])"
    """What an UnknownWorkflowError (and a worker's warning about a run of a
    workflow it does not know) tells the caller to do: where this process's
    workflows come from. The ``agentlog`` command says ``--app`` instead."""


def verb_hint(status: str) -> str:
    """Which verb fits a run in ``status`` (the verb table, in an error)."""
    fits: dict[str, str] = {
        RunStatus.WAITING: "It is waiting: answer it with resume.",
        RunStatus.FAILED: "It failed: continue it with retry.",
        RunStatus.RUNNING: "It is running: wait for it, or recover it if its writer died.",
        RunStatus.COMPLETED: "It is finished: start a new run id, or fork it.",
        RunStatus.CANCELLED: "It was cancelled: start a new run id.",
        RunStatus.SHREDDED: "It was shredded: its content is gone; start a new run id.",
    }
    return f"{fits.get(status, '')} Verbs: {VERBS}."
