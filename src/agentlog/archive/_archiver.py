"""The archiver: finished (or idle) runs from the hot log to Parquet, then prune.

One pass (:meth:`Archiver.run`):

1. Check the store and load the manifest; delete orphan files, left by a
   crash between a file write and its manifest entry (one archiver at a time).
2. Plan: every hot run that is completed, failed or cancelled, or idle past
   its policy's window, with events the archive does not hold yet.
3. For each chunk of runs (grouped by workflow and day): read their events,
   write one Parquet file and its tasks table (:mod:`agentlog.archive._tasks_table`)
   (confirmed), then its manifest entry (confirmed).
4. Only then prune those runs from the hot log, as their policy says, and
   only if nothing was appended to them meanwhile. A pruned run keeps its
   index row as a tombstone (``RunInfo.archived``): its id stays taken, and
   a later pass skips it unless it has new hot events.
5. Expire archive files whose runs are all past their workflow's TTL.

A run that is not finished (running, or parked on an interrupt) is pruned
only once its newest hot snapshot is a good one at its last seq: resume loads
that snapshot instead of the pruned events. When the newest snapshot is
older, the pass folds the run and saves a fresh one first; when it cannot
(a reducer this process does not know, or a live writer's lease), the run
stays hot.

A LangGraph thread (:mod:`agentlog.langgraph`) is archived when idle, so
that SQL and replay see it, but its hot events are never pruned here: only
the saver can write the snapshot it continues a thread from, and a thread
may be continued at any time. Its archived history expires with its
workflow's TTL, counted from its last event, unless it is parked on an
interrupt. LangGraph's own ``delete_thread`` and ``prune`` trim it.

A crash at any point leaves a state the next pass completes: a file without
a manifest entry is an orphan (deleted, then rewritten); a run whose entry
exists but is still hot is pruned; nothing is ever written twice to the
manifest, so rows are never duplicated.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from agentlog._logging import get_logger
from agentlog.archive._errors import ArchiveCorruptError, RunNotArchivableError
from agentlog.archive._parquet import Manifest, ManifestEntry, file_key, remove_orphans
from agentlog.archive._retention import (
    RetentionMode,
    RetentionPolicies,
    RetentionPolicy,
    format_duration,
)
from agentlog.archive._run_read import RunRead, encode_file
from agentlog.archive._store import ArchiveStore
from agentlog.archive._tasks_table import tasks_key
from agentlog.errors import EventLogError, ReplayError, RunArchivedError
from agentlog.eventlog._base import EventLog, RunInfo
from agentlog.eventlog._indexed import IndexedEventLog
from agentlog.eventlog.events import LANGGRAPH_WORKFLOW, RunStatus, utcnow
from agentlog.projector import REDUCERS, decode_state, load_state, save_state

__all__ = ["ArchiveSummary", "Archiver", "ArchiverConfig", "Progress", "RunPlan"]

_log = get_logger("agentlog.archive")


@dataclass(frozen=True)
class ArchiverConfig:
    """How the archiver chooses, writes and prunes."""

    retention: RetentionPolicies = field(default_factory=RetentionPolicies)
    """The retention policy of each workflow."""
    row_group_size: int = 65_536
    """Rows per Parquet row group: smaller prunes one run's reads tighter."""
    max_events_per_file: int = 1_000_000
    """Events per Parquet file (and per chunk held in memory) at most."""


@dataclass(frozen=True, slots=True)
class RunPlan:
    """One run the pass will archive (``first_seq..last_seq``) and/or prune."""

    info: RunInfo
    first_seq: int
    reason: str
    """``"finished"`` or ``"idle"``."""
    policy: RetentionPolicy

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.info.run_id

    @property
    def events(self) -> int:
        """How many events the pass writes for the run (0: prune only)."""
        return max(0, self.info.last_seq - self.first_seq + 1)


@dataclass(frozen=True)
class ArchiveSummary:
    """What one pass did (or, with ``dry_run``, would do)."""

    runs: int
    """Runs written to the archive."""
    events: int
    """Events written to the archive."""
    files: int = 0
    """Parquet files written."""
    bytes_before: int = 0
    """Hot-store bytes of those events (payload bytes plus an envelope estimate)."""
    bytes_after: int = 0
    """Parquet bytes written."""
    pruned: int = 0
    """Runs pruned from the hot log."""
    expired_files: int = 0
    """Archive files deleted because every run in them passed its TTL."""
    orphans_removed: int = 0
    """Files of an earlier crashed pass, found without a manifest entry and deleted."""
    dry_run: bool = False
    """True when nothing was written, pruned or deleted."""
    run_ids: tuple[str, ...] = ()
    """The runs archived, in order."""


class Progress(Protocol):
    """Told after each file: runs and events done so far, out of the totals."""

    def __call__(self, runs: int, events: int, total_runs: int, total_events: int) -> None: ...


class Archiver:
    """Moves runs from a hot :class:`EventLog` into an :class:`ArchiveStore`."""

    def __init__(
        self, log: EventLog, store: ArchiveStore, config: ArchiverConfig | None = None
    ) -> None:
        self.log = log
        self.store = store
        self.config = config or ArchiverConfig()

    async def plan(
        self,
        *,
        run_ids: Sequence[str] | None = None,
        now: datetime | None = None,
        manifest: Manifest | None = None,
    ) -> list[RunPlan]:
        """The runs a pass would archive or prune, in archive order.

        Args:
            run_ids: only these runs; each must be archivable.
            now: the time idleness and TTLs are judged against.

        Raises:
            RunNotArchivableError: a named run is running and not idle-expired.
            UnknownRunError: a named run does not exist.
        """
        now = now or utcnow()
        manifest = (
            manifest if manifest is not None else await asyncio.to_thread(Manifest.load, self.store)
        )
        if run_ids is None:
            infos = await self.log.list_runs()
        else:
            infos = [await self.log.get_run(run_id) for run_id in run_ids]
        plans = []
        for info in infos:
            upto = manifest.archived_upto(info.run_id)
            if info.archived and upto >= info.last_seq:
                continue  # pruned, and the archive holds all of it: nothing to do
            policy = self.config.retention.for_workflow(info.workflow)
            reason = _reason(info, policy, now)
            if reason is None:
                if run_ids is not None:
                    raise RunNotArchivableError(
                        info.run_id, info.status, format_duration(policy.idle_after)
                    )
                continue
            if upto > info.last_seq:
                continue  # the hot row outlived its events (latest_snapshot); nothing to do
            if upto == info.last_seq and not await self._has_hot_events(info.run_id, upto):
                continue
            if info.archived and not await self._has_hot_events(info.run_id, upto + 1):
                # Pruned into an archive that is not this one: its events are not here.
                _log.warning("archived run not in this archive", run_id=info.run_id, seq=upto)
                continue
            plans.append(RunPlan(info, upto + 1, reason, policy))
        plans.sort(key=lambda p: (p.info.workflow, _day(p.info), p.run_id))
        return plans

    async def _has_hot_events(self, run_id: str, seq: int) -> bool:
        """Whether seq ``seq`` of the run is still in the hot log."""
        try:
            async for _ in self.log.read(run_id, after_seq=max(0, seq - 1), upto_seq=seq):
                return True
        except RunArchivedError:
            pass
        return False

    async def run(
        self,
        *,
        dry_run: bool = False,
        run_ids: Sequence[str] | None = None,
        now: datetime | None = None,
        progress: Progress | None = None,
    ) -> ArchiveSummary:
        """One archive pass (see the module docstring).

        Raises:
            RunNotArchivableError: a named run cannot be archived; nothing was written.
            ArchiveError: the store failed; runs not yet confirmed stay hot.
        """
        now = now or utcnow()
        if not dry_run:  # a dry run must not even create the archive folder
            await asyncio.to_thread(self.store.check)
        manifest = await asyncio.to_thread(Manifest.load, self.store)
        plans = await self.plan(run_ids=run_ids, now=now, manifest=manifest)
        to_write = [p for p in plans if p.events]
        total_events = sum(p.events for p in to_write)
        if dry_run:
            return ArchiveSummary(
                runs=len(to_write),
                events=total_events,
                dry_run=True,
                run_ids=tuple(p.run_id for p in to_write),
            )
        orphans = await asyncio.to_thread(remove_orphans, self.store, manifest)
        files = bytes_before = bytes_after = runs_done = events_done = pruned = 0
        # Confirmed by an earlier pass (a crash came before or during their prune).
        pruned += await self._prune_all([p for p in plans if not p.events], manifest)
        # A file's runs are pruned while the next file is read and encoded: pruning
        # waits on the hot log's commits (one fsync a file on SQLite), encoding on the
        # CPU. The next file's rows are read while this one is encoded on its threads;
        # reading writes nothing, and a file is still confirmed before its runs are pruned.
        chunks = self._chunks(to_write)
        pruning: asyncio.Task[int] | None = None
        reading: asyncio.Task[list[RunRead]] | None = None
        try:
            for i, chunk in enumerate(chunks):
                reads = await (reading or self._read_chunk(chunk))
                reading = None
                if i + 1 < len(chunks):
                    reading = asyncio.create_task(self._read_chunk(chunks[i + 1]))
                entry, hot_bytes = await self._write_chunk(chunk, reads, manifest, now)
                files += 1
                bytes_before += hot_bytes
                bytes_after += entry.size_bytes
                if pruning is not None:
                    pruned += await pruning
                pruning = asyncio.create_task(self._prune_all(chunk, manifest))
                runs_done += len(chunk)
                events_done += entry.rows
                if progress is not None:
                    progress(runs_done, events_done, len(to_write), total_events)
            if pruning is not None:
                pruned += await pruning
                pruning = None
        finally:
            if reading is not None:  # failing: the next file is not written
                reading.cancel()
                await asyncio.wait([reading])
            if pruning is not None:  # failing: the confirmed file's prunes end first
                await asyncio.wait([pruning])
                _ = pruning.cancelled() or pruning.exception()  # the first error is raised
        expired = await asyncio.to_thread(self._expire, manifest, now)
        summary = ArchiveSummary(
            runs=len(to_write),
            events=events_done,
            files=files,
            bytes_before=bytes_before,
            bytes_after=bytes_after,
            pruned=pruned,
            expired_files=expired,
            orphans_removed=orphans,
            run_ids=tuple(p.run_id for p in to_write),
        )
        _log.info("archive pass done", **{k: v for k, v in vars(summary).items() if k != "run_ids"})
        return summary

    def _chunks(self, plans: list[RunPlan]) -> list[list[RunPlan]]:
        chunks: list[list[RunPlan]] = []
        size = 0
        key: tuple[str, str] | None = None
        for plan in plans:
            plan_key = (plan.info.workflow, _day(plan.info))
            if (
                not chunks
                or plan_key != key
                or size + plan.events > self.config.max_events_per_file
            ):
                chunks.append([])
                key, size = plan_key, 0
            chunks[-1].append(plan)
            size += plan.events
        return chunks

    async def _read_chunk(self, chunk: list[RunPlan]) -> list[RunRead]:
        """The stored events of a file's runs, each checked to start where planned."""
        reads = []
        for plan in chunk:
            read = await self._read_run(plan)
            first = read.first_seq()
            if first != plan.first_seq:
                raise ArchiveCorruptError(
                    f"{self.log.url} run {plan.run_id}",
                    f"the hot log returned seq {first or 'nothing'} "
                    f"where seq {plan.first_seq} was expected",
                )
            reads.append(read)
        return reads

    async def _write_chunk(
        self, chunk: list[RunPlan], reads: list[RunRead], manifest: Manifest, now: datetime
    ) -> tuple[ManifestEntry, int]:
        workflow, day = chunk[0].info.workflow, _day(chunk[0].info)
        previous = [manifest.latest(plan.run_id) for plan in chunk]
        cipher, where = self.log.cipher, self.log.url

        raw, tasks_raw, rows, hot_bytes, segments = await asyncio.to_thread(
            encode_file, reads, previous, cipher, where, self.config.row_group_size
        )
        key = file_key(workflow, day, segments)
        await asyncio.to_thread(self.store.put, key, raw)
        await asyncio.to_thread(self.store.put, tasks_key(key), tasks_raw)
        entry = ManifestEntry(
            file=key,
            rows=rows,
            size_bytes=len(raw),
            workflow=workflow,
            day=day,
            created_at=now.isoformat(),
            segments=tuple(segments),
            tasks_file=tasks_key(key),
        )
        # The entry is what makes the file count; it is written only after the file is confirmed.
        await asyncio.to_thread(self.store.put, entry.key, entry.to_json())
        manifest.add(entry)
        _log.info("archived file", file=key, runs=len(segments), rows=rows, bytes=len(raw))
        return entry, hot_bytes

    async def _read_run(self, plan: RunPlan) -> RunRead:
        """The plan's events as the hot log stores them where it can: a SQL log's
        rows, checksums verified, never decoded to payload objects
        (:mod:`agentlog.archive._rows`); other logs' events, packed again."""
        after, upto = plan.first_seq - 1, plan.info.last_seq
        read = RunRead(plan.info)
        if isinstance(self.log, IndexedEventLog) and self.log.reads_rows:
            read.rows = []
            async for rows in self.log.read_rows(plan.run_id, after_seq=after, upto_seq=upto):
                read.rows += rows
        elif isinstance(self.log, IndexedEventLog):
            async for batch, payloads in self.log.read_stored(
                plan.run_id, after_seq=after, upto_seq=upto
            ):
                read.events += batch
                read.stored += payloads
        else:
            read.events = [
                e async for e in self.log.read(plan.run_id, after_seq=after, upto_seq=upto)
            ]
            read.stored = [None] * len(read.events)
        return read

    async def _prune_all(self, plans: list[RunPlan], manifest: Manifest) -> int:
        """Prune the runs of a confirmed file; how many were pruned.

        The runs that may go are pruned together with :meth:`EventLog.prune_many`:
        one transaction (one commit) on a SQL log, instead of one a run. A crash
        before it commits leaves them all hot, and the next pass prunes them.
        """
        batches: dict[bool, list[str]] = {False: [], True: []}
        for plan in plans:
            keep = await self._prunable(plan, manifest)
            if keep is not None:
                batches[keep].append(plan.run_id)
        for keep, run_ids in batches.items():
            if run_ids:
                await self.log.prune_many(run_ids, keep_latest_snapshot=keep)
                _log.info("pruned hot runs", runs=len(run_ids), keep_latest_snapshot=keep)
        return sum(map(len, batches.values()))

    async def _prunable(self, plan: RunPlan, manifest: Manifest) -> bool | None:
        """None to keep the run hot, else whether its prune keeps the latest snapshot."""
        info = await self.log.find_run(plan.run_id)
        upto = manifest.archived_upto(plan.run_id)
        if info is None or info.last_seq != upto:
            # Appended to since it was read (an idle run woke up): keep it hot; the
            # next pass archives the new events as a further segment.
            _log.warning("not pruning run that changed", run_id=plan.run_id, archived=upto)
            return None
        if info.workflow == LANGGRAPH_WORKFLOW:
            _log.info("LangGraph thread archived, kept hot for its saver", run_id=plan.run_id)
            return None
        if not self.log.capabilities.prune:
            _log.info("run archived, kept hot: the log does not prune", run_id=plan.run_id)
            return None
        if info.status not in RunStatus.TERMINAL and not await self._resumable(info):
            return None
        return plan.policy.mode is RetentionMode.LATEST_SNAPSHOT or plan.reason == "idle"

    async def _resumable(self, info: RunInfo) -> bool:
        """Make the unfinished run's newest snapshot a good one at its last seq, if possible.

        Resume loads that snapshot instead of the pruned events; a snapshot
        older than the last seq would make the resumed writer append at a
        seq that is taken (a ConflictError, and a run nobody can recover).
        """
        run_id = info.run_id
        if info.lease_live(utcnow()):
            _log.info("unfinished run kept hot: a live writer holds it", run_id=run_id)
            return False
        try:
            # An encrypted snapshot opens only with the run's key: an archiver without
            # keys (or a shredded run) cannot check it, nor save a new one, so it keeps
            # the run hot; archiving itself copies ciphertext and needs no key.
            snapshot = await self.log.load_snapshot(run_id)
            if snapshot is not None and snapshot.seq == info.last_seq and decode_state(snapshot):
                return True
            state = await load_state(self.log, run_id)
        except (EventLogError, ReplayError) as exc:
            _log.warning(
                "unfinished run kept hot: its state does not load", run_id=run_id, error=str(exc)
            )
            return False
        unknown = sorted(set(state.reducers.values()) - set(REDUCERS))
        if state.seq != info.last_seq or unknown:
            # Folding with a reducer this process does not know would save a wrong state.
            _log.warning(
                "unfinished run kept hot: cannot snapshot it here",
                run_id=run_id,
                seq=state.seq,
                unknown_reducers=unknown,
            )
            return False
        await save_state(self.log, state)
        _log.info("snapshot saved before pruning an unfinished run", run_id=run_id, seq=state.seq)
        return True

    def _expire(self, manifest: Manifest, now: datetime) -> int:
        expired = 0
        for entry in list(manifest.entries.values()):
            policy = self.config.retention.for_workflow(entry.workflow)
            if policy.mode is not RetentionMode.TTL or policy.ttl is None:
                continue
            ended = max(
                datetime.fromisoformat(s.updated_at or entry.created_at) for s in entry.segments
            )
            if ended + policy.ttl > now:
                continue
            if any(not _expirable(entry.workflow, s.status) for s in entry.segments):
                continue
            # Entry first: a crash in between leaves an orphan file, never a dangling entry.
            self.store.delete(entry.key)
            self.store.delete(entry.file)
            if entry.tasks_file:
                self.store.delete(entry.tasks_file)
            manifest.remove(entry.file)
            expired += 1
            _log.info("expired archive file", file=entry.file, ttl=format_duration(policy.ttl))
        return expired


def _expirable(workflow: str, status: str) -> bool:
    """Whether an archived segment may expire: a run once it ended; a LangGraph
    thread (which never ends) unless it is parked on an interrupt."""
    if workflow == LANGGRAPH_WORKFLOW:
        return status != RunStatus.WAITING
    return status in RunStatus.TERMINAL


def _reason(info: RunInfo, policy: RetentionPolicy, now: datetime) -> str | None:
    if info.status in RunStatus.TERMINAL:
        return "finished"
    updated = info.updated_at or info.started_at
    if updated is not None and now - updated >= policy.idle_after:
        return "idle"
    return None


def _day(info: RunInfo) -> str:
    when = info.started_at or info.updated_at
    return when.date().isoformat() if when else "unknown"
