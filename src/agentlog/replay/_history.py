"""One run, hot or archived, read a page at a time: events, state at a seq, diff, timeline.

:class:`RunHistory` is what the run page of ``agentlog ui`` (and any other
debugger) reads. The run is found in the hot log or the archive through the
same calls (:class:`~agentlog.archive.ArchivedEventReader` joins the two), and
every answer is JSON-ready: plain dicts, lists, strings, numbers, booleans
and None.

Nothing reads the whole run per request: :meth:`RunHistory.events` reads one
page of seqs, :meth:`~RunHistory.state_at` folds from the newest snapshot at
or before the seq (from seq 1 only where there is none), and
:meth:`~RunHistory.diff_at` folds one event more, and a window of the
timeline reads the events of its supersteps
(:mod:`~agentlog.replay._timeline_window`). Only the whole run's timeline
needs every event, and it is built once and then extended with the new ones.

Encrypted events whose keys are withheld come back as rows marked
``unreadable`` (their metadata shown, their content as the mark); folding
them into a state raises the typed encryption error, never a wrong state.
"""

from __future__ import annotations

from typing import Any

from agentlog.archive import ArchivedEventReader, ArchiveReader, ArchiveStore
from agentlog.archive._run_index import ArchiveRunIndex, run_location
from agentlog.crypto import KeyStore, PayloadCipher
from agentlog.errors import (
    ConfigError,
    EncryptionError,
    SeqOutOfRangeError,
    ShreddedError,
    TamperedPayloadError,
    UnknownRunError,
)
from agentlog.eventlog._base import EventReader, RunInfo
from agentlog.eventlog.codec import jsonable
from agentlog.eventlog.events import (
    Event,
    RunShredded,
    RunStatus,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
)
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.projector import diff_states, load_state
from agentlog.projector._fold import apply
from agentlog.projector._state import RunState, input_interrupts, interrupt_id
from agentlog.replay._catalog import RunRow, run_row
from agentlog.replay._forks import fork_origin
from agentlog.replay._rows import event_row, short
from agentlog.replay._timeline import TimelineBuilder
from agentlog.replay._timeline_window import TimelineWindows
from agentlog.runtime._telemetry import trace_id

__all__ = ["RunHistory", "history_reader"]

#: How far back a page looks for the TaskStarted that names a task it completes.
_NAME_LOOKBACK = 500
#: How many of a shredded run's last events are read for its RunShredded
#: (recorded last; a few more in case an append raced the shred).
_SHRED_LOOK = 16
#: How many events past the last state folded a state is folded on from it
#: rather than loaded from the newest snapshot.
_FOLD_ON = 2_000
#: The folded summary of a payload, beside the full one.
SUMMARY_WIDTH = 120

Keys = KeyStore | PayloadCipher | None


def _cipher(keys: Keys) -> PayloadCipher | None:
    return keys if isinstance(keys, PayloadCipher) or keys is None else PayloadCipher(keys)


def history_reader(
    log: EventReader | None,
    archive: ArchiveStore | ArchiveRunIndex | None,
    keys: Keys = None,
) -> EventReader:
    """The hot log and the archive as one read side (the hot log alone if no archive).

    With no hot log, an empty in-memory one stands in, so an archive alone
    reads the same way. ``keys`` open archived sealed content (None: the hot
    log's cipher).
    """
    hot = log if log is not None else MemoryEventLog()
    if archive is None:
        return hot
    cipher = _cipher(keys) or hot.cipher
    source: ArchiveStore | ArchiveReader = (
        archive
        if isinstance(archive, ArchiveStore)
        else (
            ArchiveReader(archive.store, archive.manifest, cipher=cipher)  # its loaded manifest
        )
    )
    return ArchivedEventReader(hot, source, cipher=cipher)


class RunHistory:
    """One run's history, hot or archived, read through the same calls."""

    def __init__(self, run_id: str, log: EventReader, info: RunInfo, where: str) -> None:
        """Use :meth:`open`; this takes an opened reader and the run's index row."""
        self.run_id = run_id
        self.where = where
        self._reader = log
        self._row = run_row(info, where)
        self._names: dict[str, str] = {}  # task key -> task name, as pages teach them
        self._timeline = TimelineBuilder()  # the whole run's, once asked for
        self._windows = TimelineWindows(log, run_id)
        self._fork: tuple[dict[str, Any] | None] | None = None  # (origin,) once read
        self._kept: tuple[RunState, RunState] | None = None  # see _states

    @classmethod
    async def open(
        cls,
        run_id: str,
        log: EventReader | None,
        archive: ArchiveStore | ArchiveRunIndex | None = None,
        *,
        keys: Keys = None,
    ) -> RunHistory:
        """The run ``run_id`` from the hot ``log`` or the ``archive``.

        Args:
            log: the hot log (None: the archive alone); it stays the caller's to close.
            archive: the archive's store, or a :class:`ArchiveRunIndex` whose
                loaded manifest to share (a :class:`~agentlog.replay.RunCatalog`'s).
            keys: a key store or cipher that opens archived sealed content.

        Raises:
            UnknownRunError: the run is in neither.
        """
        reader = history_reader(log, archive, keys)
        info = await reader.find_run(run_id)
        if info is None or info.last_seq == 0:
            if reader is not log:
                await reader.close()
            raise UnknownRunError(run_id, log.url if log is not None else "the archive")
        in_archive = isinstance(reader, ArchivedEventReader) and bool(
            reader.archive.manifest.latest(run_id)
        )
        hot = info if reader is log else await log.find_run(run_id) if log is not None else None
        where = run_location(hot, in_archive)
        history = cls(run_id, reader, info, where)
        history._owned = reader is not log
        return history

    _owned = False

    @property
    def info(self) -> RunRow:
        """The run's index row (as of :meth:`open` or the last :meth:`refresh`)."""
        return self._row

    @property
    def last_seq(self) -> int:
        """The run's last seq as last read."""
        return self._row.last_seq

    async def refresh(self) -> RunRow:
        """Read the run's index row again (a live run grows)."""
        info = await self._reader.find_run(self.run_id)
        if info is not None and info.last_seq:
            self._row = run_row(info, self.where)
        return self._row

    async def _read(self, after: int, upto: int) -> list[Event]:
        return [e async for e in self._reader.read(self.run_id, after_seq=after, upto_seq=upto)]

    async def events(self, *, after: int = 0, limit: int = 200) -> list[dict[str, Any]]:
        """Up to ``limit`` events after seq ``after``, as display rows.

        Each row is :func:`~agentlog.replay._rows.event_row`'s (``seq``, ``ts``,
        ``type``, ``step``, ``payload``, ``unreadable`` when sealed) plus
        ``task`` (the task's name, for task events) and ``summary`` (the
        payload folded to one short line).
        """
        if after < 0:
            raise SeqOutOfRangeError(self.run_id, after, self.last_seq)
        if limit < 1:
            raise ConfigError(f"a page of events needs a limit of 1 or more; got {limit}")
        events = await self._read(after, after + limit)
        self._learn(events)
        unnamed = [e for e in events if _task_key(e) and _task_key(e) not in self._names]
        if unnamed and after > 0:
            self._learn(await self._read(max(0, after - _NAME_LOOKBACK), after))
        rows = []
        shredded = self._row.status == RunStatus.SHREDDED
        for event in events:
            row = event_row(event, shredded=shredded)
            key = _task_key(event)
            row["task"] = self._names.get(key, "") if key else ""
            row["summary"] = row.get("unreadable") or short(row["payload"], SUMMARY_WIDTH)
            rows.append(row)
        if events and events[-1].seq > self.last_seq:
            await self.refresh()
        return rows

    def _learn(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event.data, TaskStarted):
                self._names[event.data.key] = event.data.name

    async def _check_seq(self, seq: int) -> None:
        if isinstance(seq, int) and not isinstance(seq, bool) and seq > self.last_seq >= 1:
            await self.refresh()  # a live run may have grown since it was opened
        if not isinstance(seq, int) or isinstance(seq, bool) or not 1 <= seq <= self.last_seq:
            raise SeqOutOfRangeError(self.run_id, seq, self.last_seq)

    async def _states(self, seq: int) -> tuple[RunState, RunState]:
        """The states folded through ``seq - 1`` and through ``seq``.

        Kept for the next call: a debugger asks for a seq's state and its diff
        together, then steps to a neighbouring seq, which folds on from here
        (up to ``_FOLD_ON`` events ahead) instead of from a snapshot.
        """
        kept, self._kept = self._kept, None  # a fold that fails leaves no half state
        if kept is not None and kept[1].seq == seq:
            self._kept = kept
            return kept
        if seq == 1:
            before = RunState()
        elif kept is not None and kept[1].seq <= seq - 1 <= kept[1].seq + _FOLD_ON:
            before = kept[1]  # folded on in place: the kept pair is dropped anyway
            for event in await self._read(before.seq, seq - 1):
                apply(before, event)
        else:
            before = await load_state(self._reader, self.run_id, at_seq=seq - 1)
        after = before.copy()
        for event in await self._read(seq - 1, seq):
            apply(after, event)
        self._kept = (before, after)
        return self._kept

    async def _opened_states(self, seq: int) -> tuple[RunState, RunState]:
        """:meth:`_states`, where a shredded run's sealed content says it was
        shredded (a reader without keys cannot tell that from a missing key)."""
        try:
            return await self._states(seq)
        except EncryptionError as exc:
            shred = await self.shredded()
            if shred is None or isinstance(exc, ShreddedError | TamperedPayloadError):
                raise
            raise ShreddedError(self.run_id, shred["at"], self.where) from None

    async def shredded(self) -> dict[str, Any] | None:
        """``{"at", "by", "seq"}`` of the run's ``RunShredded`` (its data key
        was destroyed then, by that owner), or None if it was not shredded."""
        if self._row.status != RunStatus.SHREDDED:
            return None
        last = self.last_seq
        for event in reversed(await self._read(max(0, last - _SHRED_LOOK), last)):
            if isinstance(event.data, RunShredded):
                return {"at": event.data.at, "by": event.data.by, "seq": event.seq}
        return {"at": None, "by": "", "seq": None}  # listed shredded; its record not read here

    async def pending(self) -> list[dict[str, Any]]:
        """The questions a waiting run asks, oldest first (empty unless it waits).

        Each is ``{"id", "step", "payload", "expects", "due_at"}``: ``expects``
        is the shape ``Runtime.resume`` checks its answer against (a type
        name, a dict of them, or None for any value), as the workflow
        declared it in ``ctx.interrupt(..., expects=...)``.

        Raises:
            EncryptionError: the run is sealed and the keys are withheld.
        """
        row = await self.refresh()
        if row.status != RunStatus.WAITING:
            return []
        state = await load_state(self._reader, self.run_id, at_seq=row.last_seq)
        return jsonable(  # type: ignore[no-any-return]
            [
                {
                    "id": interrupt_id(i),
                    "step": i["step"],
                    "payload": i["payload"],
                    "expects": i.get("expects"),
                    "due_at": i.get("due_at"),
                }
                for i in input_interrupts(state)
            ]
        )

    async def state_at(self, seq: int) -> dict[str, Any]:
        """The run's state folded through ``seq``, JSON-ready.

        Raises:
            SeqOutOfRangeError: ``seq`` is below 1 or past the run's last event.
            EncryptionError: an event up to ``seq`` is sealed and the keys are withheld.
        """
        await self._check_seq(seq)
        return jsonable((await self._opened_states(seq))[1].to_dict())  # type: ignore[no-any-return]

    async def diff_at(self, seq: int) -> list[dict[str, Any]]:
        """What event ``seq`` changed: ``path``, ``op``, ``before``, ``after`` per change.

        Raises:
            SeqOutOfRangeError: ``seq`` is below 1 or past the run's last event.
        """
        await self._check_seq(seq)
        before, after = await self._opened_states(seq)
        return jsonable([c.to_dict() for c in diff_states(before, after)])  # type: ignore[no-any-return]

    async def timeline(
        self, *, first_step: int | None = 0, max_steps: int | None = None
    ) -> dict[str, Any]:
        """The run's :mod:`~agentlog.replay._timeline`, JSON-ready.

        With ``max_steps``, a window of supersteps built from only the events
        it needs (:mod:`~agentlog.replay._timeline_window`): its ``counts``
        hold the run's ``supersteps`` and ``steps`` (finished, from the run's
        index row) and the window's lanes, bars and marks (``counts_scope``
        is ``"window"``, or ``"run"`` when the window holds the whole run).
        Without, the whole run, folded once and then extended
        with the events recorded since the last call.

        Args:
            first_step: the first superstep to include; None: the latest
                ``max_steps`` (where a live run moves).
            max_steps: at most this many supersteps (1 or more); None: all.

        Raises:
            ConfigError: ``max_steps`` is below 1.
        """
        if max_steps is None:
            builder = self._timeline
            async for event in self._reader.read(self.run_id, after_seq=builder.timeline.last_seq):
                builder.add(event)
            return builder.timeline.to_json(first_step=first_step or 0)
        if max_steps < 1:
            raise ConfigError(f"a window of the timeline needs 1 step or more; got {max_steps}")
        row = await self.refresh()  # its steps: counted as the window's events are
        if first_step is None:
            return await self._windows.latest(max_steps, row.last_seq, row.steps)
        return await self._windows.window(max(0, first_step), max_steps, row.last_seq, row.steps)

    async def forked_from(self) -> dict[str, Any] | None:
        """``{"run_id", "seq"}`` of the run this one was forked from
        (``Runtime.fork``), or None; read once, cheaply, then kept.

        A fork's first append is the history it copied (without
        ``WriterClaimed``) and its ``RunForked``; a run a writer started
        records ``WriterClaimed`` among its first events. So the first of the
        two decides, and the newest snapshot (taken after an append, so
        after a fork's ``RunForked``) decides for a long copied history.
        """
        if self._fork is None:
            self._fork = (await fork_origin(self._reader, self.run_id),)
        return self._fork[0]

    async def parent(self) -> str | None:
        """The parent run's id of a child run (its ``RunStarted`` links it,
        ``ctx.start_child``), or None."""
        for event in await self._read(0, 1):
            link = getattr(event.data, "limits", {}).get("parent")
            if isinstance(link, dict):
                return str(link.get("run_id", ""))
        return None

    async def trace_id(self) -> str | None:
        """The run's OpenTelemetry trace id, if its ``RunStarted`` stored one
        (runtime/_telemetry.py), else None."""
        for event in await self._read(0, 1):
            return trace_id(getattr(event.data, "limits", {}))
        return None

    async def close(self) -> None:
        """Close what :meth:`open` opened (never the caller's hot log)."""
        if self._owned:
            await self._reader.close()

    async def __aenter__(self) -> RunHistory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _task_key(event: Event) -> str:
    data = event.data
    return data.key if isinstance(data, TaskStarted | TaskCompleted | TaskFailed) else ""
