"""The replay check: does today's code still do what the recorded runs did?

Before a deploy, :func:`verify_runs` re-executes recorded histories against
the workflows about to ship, as Temporal's Replayer is used by hand. It runs
the runtime's own executor (what a resume runs) with a
:class:`~agentlog.replay._verify_writer.ReplayWriter`: tasks return their
recorded results, their bodies never run, retries do not wait, and nothing is
appended to any log. Every event the code emits is compared with the history:

* ``step``: the step sequence differs (another step ran, it went elsewhere,
  it parked or failed where the history did not, or it stopped early);
* ``task``: a task call differs in name or order (its key), is new, or is
  missing;
* ``write``: a step's writes differ;
* ``version``: the run was recorded under another workflow version or state
  schema (with no migration registered), or the app does not register its
  workflow at all: a resume would refuse it;
* ``history``: the history could not be read (corrupt, or archived and its
  archive not given).

The first divergence of a run stops its replay: after it, the code and the
history no longer describe the same run. LangGraph threads are skipped: their
steps are LangGraph's, not a Workflow's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, TypeAlias

from agentlog.archive import ArchivedEventReader, ArchiveStore
from agentlog.errors import (
    AgentlogError,
    ConfigError,
    InvalidWriteError,
    NondeterminismError,
    RunArchivedError,
)
from agentlog.eventlog._base import EventReader, RunInfo
from agentlog.eventlog.events import LANGGRAPH_WORKFLOW, Event, RunStatus
from agentlog.projector._state import RunState
from agentlog.replay._verify_compare import Mismatch, describe
from agentlog.replay._verify_writer import (
    Diverged,
    HistoryEnds,
    ReplayExecutor,
    ReplayWriter,
    SessionEnds,
)
from agentlog.runtime._workflow import Workflow

__all__ = [
    "Divergence",
    "DivergenceKind",
    "RunCheck",
    "RunSelection",
    "VerifyReport",
    "select_runs",
    "verify_history",
    "verify_run",
    "verify_runs",
]

DivergenceKind: TypeAlias = Literal["step", "task", "write", "version", "history"]
#: Which runs to check: the open ones, all, or the N most recently updated.
RunSelection: TypeAlias = Literal["open", "all"] | int


@dataclasses.dataclass(frozen=True, slots=True)
class Divergence:
    """One place where the code no longer matches a run's history."""

    run_id: str
    """The run."""
    seq: int
    """The recorded event where they part (the run's last seq if the code went further)."""
    kind: DivergenceKind
    """What differed: step, task, write, version or history."""
    expected: Any
    """What the history has there (None: nothing)."""
    got: Any
    """What the code did instead (None: nothing)."""
    message: str
    """The difference, in a sentence."""


@dataclasses.dataclass(frozen=True, slots=True)
class RunCheck:
    """The verdict on one run."""

    run_id: str
    workflow: str
    version: str
    status: Literal["matched", "diverged", "skipped"]
    """matched; diverged (see ``divergences``); skipped (see ``note``: not checkable)."""
    events: int = 0
    """How many recorded events were checked against."""
    divergences: tuple[Divergence, ...] = ()
    note: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class VerifyReport:
    """The verdicts on every run checked, most recently updated first."""

    runs: tuple[RunCheck, ...]

    @property
    def matched(self) -> int:
        """Runs whose history the code reproduces."""
        return sum(1 for r in self.runs if r.status == "matched")

    @property
    def diverged(self) -> int:
        """Runs with a divergence."""
        return sum(1 for r in self.runs if r.status == "diverged")

    @property
    def skipped(self) -> int:
        """Runs verify cannot check (LangGraph threads, runs a migration moves on)."""
        return sum(1 for r in self.runs if r.status == "skipped")

    @property
    def ok(self) -> bool:
        """True when no run diverged: the deploy gate passes."""
        return self.diverged == 0


async def verify_history(workflow: Workflow[Any, Any], events: Sequence[Event]) -> list[Divergence]:
    """Replay one run's recorded ``events`` under ``workflow``; return its divergences.

    Nothing runs outside this process: no task body, no timer, no write.
    """
    return list((await _check(workflow, events)).divergences)


async def verify_run(
    log: EventReader, workflows: Iterable[Workflow[Any, Any]], info: RunInfo
) -> RunCheck:
    """Check the run ``info`` names, read from ``reader``, against ``workflows``."""
    base = RunCheck(info.run_id, info.workflow, info.version, "skipped")
    if info.workflow == LANGGRAPH_WORKFLOW:
        note = "a LangGraph thread: its steps are LangGraph's; not checkable by verify"
        return dataclasses.replace(base, note=note)
    by_name = {wf.name: wf for wf in workflows}
    workflow = by_name.get(info.workflow)
    if workflow is None:
        message = (
            f"run {info.run_id!r} is a run of workflow {info.workflow!r}, which the app does "
            f"not register (it registers {sorted(by_name)}); a resume would refuse it. Pass "
            "the code that runs it (agentlog verify --app module:attribute)"
        )
        return _diverged(base, Mismatch(1, "version", info.workflow, None, message))
    try:
        events = [event async for event in log.read(info.run_id)]
    except RunArchivedError:
        message = (
            f"run {info.run_id!r} was archived and the archive it moved to was not read: "
            "pass it (agentlog verify --archive URL, or verify_runs(..., archive=store))"
        )
        return _diverged(base, Mismatch(info.last_seq, "history", None, None, message))
    except AgentlogError as exc:
        message = f"the history of run {info.run_id!r} cannot be read: {exc}"
        return _diverged(base, Mismatch(info.last_seq, "history", None, None, message))
    return await _check(workflow, events)


async def select_runs(log: EventReader, runs: RunSelection = "open") -> list[RunInfo]:
    """The runs a check covers, most recently updated first.

    Raises:
        ConfigError: ``runs`` is not "open", "all" or a whole number of at least 1.
    """
    if isinstance(runs, bool) or not (runs in ("open", "all") or isinstance(runs, int)):
        raise ConfigError(f"runs must be 'open', 'all' or a number of runs, got {runs!r}")
    if isinstance(runs, int) and runs < 1:
        raise ConfigError(f"runs must be at least 1 (the N most recent runs), got {runs}")
    infos = await log.list_runs()
    if runs == "open":
        return [info for info in infos if info.status not in RunStatus.TERMINAL]
    return infos if runs == "all" else infos[:runs]


async def verify_runs(
    log: EventReader,
    workflows: Iterable[Workflow[Any, Any]],
    *,
    runs: RunSelection = "open",
    archive: ArchiveStore | None = None,
    progress: Callable[[RunCheck, int, int], None] | None = None,
) -> VerifyReport:
    """Check recorded runs against ``workflows`` (the code about to ship).

    Args:
        event_log: the hot log (only read).
        workflows: the workflows of the app; a run of any other diverges.
        runs: "open" (not finished; the default: what a deploy resumes),
            "all", or the N most recently updated runs.
        archive: also read archived runs (and archived heads of runs).
        progress: called after each run with its check, how many are done,
            and how many there are.

    Raises:
        ConfigError: a bad ``runs``.
    """
    workflows = list(workflows)
    reader: EventReader = log if archive is None else ArchivedEventReader(log, archive)
    try:
        infos = await select_runs(reader, runs)
        checks: list[RunCheck] = []
        for info in infos:
            checks.append(await verify_run(reader, workflows, info))
            if progress is not None:
                progress(checks[-1], len(checks), len(infos))
    finally:
        if reader is not log:
            await reader.close()  # the archive's reader; the hot log is the caller's
    return VerifyReport(tuple(checks))


async def _check(workflow: Workflow[Any, Any], events: Sequence[Event]) -> RunCheck:
    """Replay ``events`` under ``workflow`` as resume would, session by session."""
    writer = ReplayWriter(events, workflow)
    writer.take_inputs()  # the start, and the first writer's claim
    state = writer.state
    base = RunCheck(state.run_id, state.workflow, state.version, "matched", len(events))
    if state.workflow == LANGGRAPH_WORKFLOW or not state.workflow:
        note = "not a Workflow run (no RunStarted): not checkable by verify"
        return dataclasses.replace(base, status="skipped", note=note)
    migrated = writer.last_migration(workflow)
    if not _same(state, workflow) and migrated is not None:
        # Migrated to this code on the way: what came before was other code's.
        writer.skip_through(migrated)
        writer.take_inputs()
        seq = writer.history[migrated].seq
        note = f"checked from seq {seq} on, where it was migrated to v{workflow.version}"
        base = dataclasses.replace(base, note=note)
    if not _same(state, workflow):
        if state.version in workflow.migrations:
            note = f"recorded by v{state.version}: a resume migrates it to v{workflow.version}"
            return dataclasses.replace(base, status="skipped", note=note)
        return _diverged(base, _version_mismatch(writer, workflow))
    try:
        while state.status == RunStatus.RUNNING:
            try:
                await ReplayExecutor(writer, workflow).run()
            except SessionEnds:  # its process stopped there (a crash, a fork...)
                writer.end_session()
            writer.take_inputs()  # a claim, an answer, a timer, a retry: the next session
    except Diverged as diverged:
        return _diverged(base, diverged.mismatch)
    except HistoryEnds:
        return base  # an open run: all recorded so far matched
    except NondeterminismError as exc:
        return _diverged(base, Mismatch(_here(writer), "task", None, None, str(exc)))
    except AgentlogError as exc:  # the code broke its own contract on this history
        kind = "write" if isinstance(exc, InvalidWriteError) else "step"
        return _diverged(base, Mismatch(_here(writer), kind, None, None, str(exc)))
    left = writer.leftover()
    if left is not None:
        message = f"the code stopped before {describe(left.data)}, which the history has"
        return _diverged(base, Mismatch(left.seq, "step", describe(left.data), None, message))
    return base


def _same(state: RunState, workflow: Workflow[Any, Any]) -> bool:
    return state.version == workflow.version and state.fingerprint in workflow.fingerprints


def _version_mismatch(writer: ReplayWriter, workflow: Workflow[Any, Any]) -> Mismatch:
    state = writer.state
    expected = f"{state.workflow} v{state.version} (state schema {state.fingerprint})"
    got = f"{workflow.name} v{workflow.version} (state schema {workflow.fingerprint})"
    message = (
        f"run {state.run_id!r} was recorded by {expected}; this code is {got}, and it "
        f"registers no migration from v{state.version}: a resume would refuse the run"
    )
    return Mismatch(writer.history[0].seq, "version", expected, got, message)


def _here(writer: ReplayWriter) -> int:
    """The seq of the first recorded event not yet matched (or the last seq)."""
    if writer.cursor < len(writer.history):
        return writer.history[writer.cursor].seq
    return writer.last_seq


def _diverged(base: RunCheck, mismatch: Mismatch) -> RunCheck:
    divergence = Divergence(base.run_id, **dataclasses.asdict(mismatch))
    return dataclasses.replace(base, status="diverged", divergences=(divergence,))
