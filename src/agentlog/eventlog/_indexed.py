"""The indexed read path, written once over a few backend hooks.

A backend whose run index row says how many events a run has (memory,
SQLite, PostgreSQL, Redis) reads a run the same way: the index row says
which seqs to return (:meth:`IndexedEventLog._read_start`), the events come
in batches of ``read_batch`` (the next one fetched while this one is decoded
and folded, so that the store and the loop work at once), and every batch
is checked for a gap against the seq expected next, so a deleted or damaged
record is a CorruptEventError naming the missing seq (or RunArchivedError
if the run was pruned meanwhile). A corrupt event is logged once, here, as the debug
line ``corrupt_event``, before it is raised. The tail is
:meth:`EventReader.tail <agentlog.eventlog._reader.EventReader.tail>`, which a
backend only tells how to wait.

What a backend gives, as DBOS's system database asks its SQLite and
PostgreSQL files for a few hooks:

* :meth:`~IndexedEventLog.find_run`, the run's index row;
* :meth:`~IndexedEventLog._stored_seq`, the lowest or highest seq it still
  stores for a run (a pruned run keeps none; a damaged index has no row);
* :meth:`~IndexedEventLog._event_rows`, up to ``limit`` stored rows of a run
  between two seqs, in seq order, and :attr:`~IndexedEventLog._stored`, how
  to read one (:class:`StoredRows`: its seq, its event, how a gap names it).

The run list of a backend with a SQL run index table is
:class:`~agentlog.eventlog._sql_index.SqlRunIndex`.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from itertools import islice
from operator import itemgetter
from typing import Any, ClassVar

import xxhash

from agentlog._logging import get_logger
from agentlog.crypto import PayloadCipher
from agentlog.errors import AgentlogError, CorruptEventError, RunArchivedError, UnknownRunError
from agentlog.eventlog._base import EventLog, RunInfo, Snapshot, check_run_id
from agentlog.eventlog._batch_decode import decode_rows
from agentlog.eventlog._row_format import MAX_SEQ, event_from_row, seq_param
from agentlog.eventlog.codec import row_checksum
from agentlog.eventlog.events import Event

__all__ = [
    "SQL_ROWS",
    "ColdRead",
    "IndexedEventLog",
    "StoredPayload",
    "StoredRows",
    "missing_seq_error",
]

_log = get_logger(__name__)
_HASH = xxhash.xxh3_64_intdigest
_SIGNED = 2**63
_WRAP = 2**64


def missing_seq_error(
    info: RunInfo | None, run_id: str, missing: int, found: str, where: str
) -> AgentlogError:
    """What a read that finds seq ``missing`` absent raises (``found`` is what
    came instead): RunArchivedError if the run was pruned meanwhile (``info``,
    its index row read again), else CorruptEventError naming the seq."""
    if info is not None and info.archived:
        return RunArchivedError(run_id, where)  # pruned while we read
    return CorruptEventError(
        run_id,
        missing,
        f"seq {missing} is missing: {found} follows seq {missing - 1} (a deleted or "
        "damaged record)",
        where,
    )


#: A stored payload's msgpack bytes and the schema version they were written at.
StoredPayload = tuple[bytes, int] | None


@dataclass(frozen=True, slots=True)
class StoredRows:
    """How the read path reads one backend's stored event rows."""

    seq: Callable[[Any], int]
    """The seq a row holds."""
    event: Callable[[str, Any, str, PayloadCipher | None], Event]
    """``(run_id, row, where, cipher)`` -> the verified, decoded event.
    Raises CorruptEventError naming the run and seq."""
    found: Callable[[Any], str]
    """How a gap names the row found instead of the seq expected."""
    nothing: str = "no event"
    """How a gap says that no row came at all."""
    stored: Callable[[Any], StoredPayload] = lambda _row: None
    """``(payload bytes, schema_v)`` as the row stores them, for copies that
    pass them through (the archive); None where a backend keeps no bytes."""
    batch: Callable[[str, Sequence[Any], int, PayloadCipher | None, bool], list[Event]] = (
        lambda _run_id, _rows, _first, _cipher, _checked: []
    )
    """``(run_id, rows, first seq, cipher, checked)`` -> the events of the
    longest run of rows from the first that a shortcut decodes at once
    (``checked``: their checksums were verified already); the read path
    decodes the rest one by one with :attr:`event`, which names what is wrong
    (:func:`~agentlog.eventlog._batch_decode.decode_rows`)."""


def _sql_payload(row: Any) -> StoredPayload:
    payload = row[5]
    return (payload if isinstance(payload, bytes) else bytes(payload)), row[3]


#: Rows of ``seq, type, ts, schema_v, writer_epoch, payload, checksum``
#: (:func:`~agentlog.eventlog._row_format.event_from_row`): SQLite and PostgreSQL.
SQL_ROWS = StoredRows(
    seq=itemgetter(0),
    event=event_from_row,
    found=lambda row: f"seq {row[0]}",
    stored=_sql_payload,
    batch=decode_rows,
)


@dataclass(frozen=True, slots=True)
class ColdRead:
    """A run's latest snapshot and the events after it, read at once
    (:meth:`IndexedEventLog.cold_read`): what a resume and a saver's first
    read need, in one statement where the backend can."""

    snapshots: list[Snapshot]
    """The newest snapshot at or below the bound and the rest of its chain
    down to its base (every snapshot stored between them), newest first,
    opened; empty if the run has none (or none was asked for)."""
    rows: list[tuple[Any, ...]]
    """The stored rows after the newest snapshot (after seq 0 without one),
    in seq order, seqs and checksums verified (:meth:`IndexedEventLog.read_rows`'s form)."""
    after: int
    """The seq the rows follow: the newest snapshot's, or 0."""
    complete: bool
    """True if the rows reach the bound (the run's last seq, or ``upto_seq``);
    False if they are a first batch of ``read_batch`` rows and more follow."""

    def snapshot_at_or_before(self, seq: int) -> Snapshot | None:
        """The newest of :attr:`snapshots` at or below ``seq``, as the log's
        ``load_snapshot`` would return it; None if the read did not fetch it."""
        if not self.snapshots or not self.snapshots[-1].seq <= seq <= self.snapshots[0].seq:
            return None
        return next(s for s in self.snapshots if s.seq <= seq)


# What a batch held instead of the next good event: a corrupt one, or a gap
# (the seq missing, and what came instead).
_Problem = CorruptEventError | tuple[int, str] | None


class IndexedEventLog(EventLog):
    """An EventLog whose run index bounds every read (see the module docstring)."""

    #: Events fetched per round trip while reading, so that a long run is
    #: never loaded into memory at once.
    read_batch: int = 1000

    #: How this backend's stored rows are read.
    _stored: ClassVar[StoredRows] = SQL_ROWS

    # -- the hooks ------------------------------------------------------------------

    @abc.abstractmethod
    async def _stored_seq(self, run_id: str, *, newest: bool) -> int | None:
        """The run's highest (``newest``) or lowest seq still stored; None: none is."""

    @abc.abstractmethod
    async def _event_rows(self, run_id: str, after: int, last: int, limit: int) -> Sequence[Any]:
        """Up to ``limit`` stored rows of the run with ``after < seq <= last``, by seq."""

    async def _event_rows_ahead(
        self, run_id: str, after: int, last: int, limit: int
    ) -> Sequence[Any]:
        """:meth:`_event_rows` for the batch fetched while the caller decodes
        the one before (a backend whose reads block the caller fetches it elsewhere)."""
        return await self._event_rows(run_id, after, last, limit)

    def cold_read(
        self, run_id: str, *, upto_seq: int | None = None, snapshots: bool = True
    ) -> ColdRead | None:
        """The run's newest snapshot (at or below ``upto_seq``, with its chain)
        and the verified rows after it, read on the calling thread in one
        statement, for a backend that can (SQLite); None where it cannot, or
        when anything is out of the ordinary (no run index row, a pruned run,
        a gap, a checksum that does not match, a read-only log of another
        form): the caller then takes the usual path, which raises what it
        raises. Never blocks on the event loop.

        ``snapshots=False`` reads the events from the first, with no snapshot.
        """
        return None

    def cold_events(self, run_id: str, cold: ColdRead) -> list[Event] | None:
        """The events of a :meth:`cold_read`'s rows, decoded as :meth:`read`
        decodes them; None if one does not decode (:meth:`read` names it)."""
        end = cold.after + len(cold.rows)
        events, problem = self._scan(run_id, cold.rows, cold.after, end, checked=True)
        return None if problem is not None else events

    # -- the read path ----------------------------------------------------------------

    async def read(
        self, run_id: str, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> AsyncIterator[Event]:
        async with aclosing(self._batches(run_id, after_seq, upto_seq)) as batches:
            async for events, _rows in batches:
                for event in events:
                    yield event

    async def read_stored(
        self, run_id: str, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> AsyncIterator[tuple[list[Event], list[StoredPayload]]]:
        """:meth:`read` batch by batch, each event with its payload as stored
        (checksum verified).

        Why: a copy of the log (the archive) can keep the bytes the log
        stores instead of packing each decoded payload again. A payload is
        None where the backend keeps no bytes (the memory log).
        """
        payload_of = self._stored.stored
        async with aclosing(self._batches(run_id, after_seq, upto_seq)) as batches:
            async for events, rows in batches:
                # rows may run past the events when the batch ends at a gap
                yield events, [payload_of(row) for row in rows[: len(events)]]

    @property
    def reads_rows(self) -> bool:
        """Whether :meth:`read_rows` serves this log (its rows are :data:`SQL_ROWS`)."""
        return self._stored is SQL_ROWS

    async def read_rows(
        self, run_id: str, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> AsyncIterator[list[tuple[Any, ...]]]:
        """:meth:`read` batch by batch as stored rows, each checksum verified,
        nothing decoded: ``(seq, type, ts, schema_v, writer_epoch, payload,
        checksum)``, ``ts`` in microseconds and ``payload`` as bytes.

        Why: a copy that keeps the stored bytes (the archive) needs the
        envelope and the payload's map, not payload objects and datetimes,
        whose building was about a third of its CPU. Only for a log whose
        :attr:`reads_rows`.

        Raises:
            CorruptEventError: a checksum mismatch or a missing seq, naming
                the run and seq (as :meth:`read`).
            RunArchivedError, UnknownRunError: as :meth:`read`.
        """
        if not self.reads_rows:
            raise TypeError(f"{type(self).__name__} does not store SQL rows")
        check_run_id(run_id)
        upto = MAX_SEQ if upto_seq is None else seq_param(upto_seq)
        after, last = await self._read_start(run_id, seq_param(after_seq), upto)
        after -= 1
        batch = self.read_batch
        if after >= last:
            return
        rows = await self._event_rows(run_id, after, last, batch)
        ahead: asyncio.Future[Sequence[Any]] | None = None
        try:
            while True:
                if len(rows) == batch and rows[-1][0] < last:  # fetched while this one is used
                    ahead = asyncio.ensure_future(
                        self._event_rows_ahead(run_id, rows[-1][0], last, batch)
                    )
                    await asyncio.sleep(0)
                good, problem = _verified(run_id, rows, after, self.url)
                if good:
                    yield good
                if problem is None and len(rows) < batch and after + len(good) < last:
                    problem = (after + len(good) + 1, self._stored.nothing)
                if problem is not None:
                    raise await self._read_error(run_id, problem)
                after += len(good)
                if ahead is None:  # no full batch: this one held the last seq
                    return
                rows, ahead = await ahead, None
        finally:
            if ahead is not None:
                ahead.cancel()  # a reader that stopped early needs no more rows

    async def _batches(
        self, run_id: str, after_seq: int, upto_seq: int | None
    ) -> AsyncGenerator[tuple[list[Event], Sequence[Any]], None]:
        """The read's decoded events batch by batch, each with its stored rows."""
        check_run_id(run_id)
        upto = MAX_SEQ if upto_seq is None else seq_param(upto_seq)
        first, last = await self._read_start(run_id, seq_param(after_seq), upto)
        after, batch, seq_of = first - 1, self.read_batch, self._stored.seq
        if after >= last:
            return
        rows = await self._event_rows(run_id, after, last, batch)
        ahead: asyncio.Future[Sequence[Any]] | None = None
        try:
            while True:
                # Fetch the next batch while this one is decoded and folded: the
                # store works while the loop does (a full batch means more may come).
                if len(rows) == batch and seq_of(rows[-1]) < last:
                    ahead = asyncio.ensure_future(
                        self._event_rows_ahead(run_id, seq_of(rows[-1]), last, batch)
                    )
                    await asyncio.sleep(0)  # let it start: hand its query to the store now
                events, problem = self._scan(run_id, rows, after, last)
                yield events, rows
                if problem is not None:
                    raise await self._read_error(run_id, problem)
                after = events[-1].seq
                if ahead is None:  # no full batch: the scan saw the last seq (or a gap)
                    return
                rows, ahead = await ahead, None
        finally:
            if ahead is not None:
                ahead.cancel()  # a reader that stopped early needs no more rows

    async def _read_start(self, run_id: str, after_seq: int, upto_seq: int) -> tuple[int, int]:
        """The seqs a read must return, ``(first, last)``, from the run index.

        Raises:
            UnknownRunError: nothing was ever recorded for the run.
            RunArchivedError: the range starts before the first event still
                stored: the rest was pruned into the archive.
        """
        info = await self.find_run(run_id)
        if info is None:
            stored = await self._stored_seq(run_id, newest=True)
            if stored is not None:
                # Events but no index row: the index was damaged, the events are not.
                return after_seq + 1, min(upto_seq, stored)
            raise UnknownRunError(run_id, self.url)
        first, last = after_seq + 1, min(upto_seq, info.last_seq)
        if info.archived and first <= last:
            stored = await self._stored_seq(run_id, newest=False)
            if stored is None or first < stored:
                raise RunArchivedError(run_id, self.url)
        return first, last

    def _scan(
        self, run_id: str, rows: Sequence[Any], after: int, last: int, *, checked: bool = False
    ) -> tuple[list[Event], _Problem]:
        """The batch's good events in order, then what stopped it (the gap check).
        ``checked``: the rows' checksums were verified (by :func:`_verified`)."""
        stored = self._stored
        seq_of, decode, where, cipher = stored.seq, stored.event, self.url, self.cipher
        events = stored.batch(run_id, rows, after + 1, cipher, checked)  # the common case, at once
        for row in islice(rows, len(events), None):
            expected = after + len(events) + 1
            if seq_of(row) != expected:
                return events, (expected, stored.found(row))
            try:
                events.append(decode(run_id, row, where, cipher))
            except CorruptEventError as exc:
                return events, exc
        if len(rows) < self.read_batch and after + len(events) < last:
            return events, (after + len(events) + 1, stored.nothing)
        return events, None

    async def _read_error(
        self, run_id: str, problem: CorruptEventError | tuple[int, str]
    ) -> AgentlogError:
        """The error a read raises for ``problem``; a corrupt event is logged."""
        if isinstance(problem, tuple):
            missing, found = problem
            info = await self.find_run(run_id)  # read again: pruned meanwhile?
            error = missing_seq_error(info, run_id, missing, found, self.url)
        else:
            error = problem
        if isinstance(error, CorruptEventError):
            _log.debug("corrupt_event", run_id=error.run_id, seq=error.seq, url=self.url)
        return error


def _verified(
    run_id: str, rows: Sequence[Any], after: int, where: str
) -> tuple[list[tuple[Any, ...]], _Problem]:
    """The batch's rows up to the first bad one, and what stopped it (a gap or a
    checksum mismatch), checked as :func:`~agentlog.eventlog._row_format.event_from_row`
    checks them; payloads as bytes.

    The common batch (a list of tuples, every payload bytes, every checksum
    an int that matches, no gap) is checked in one loop with the checksum
    inline and handed back as it came (a full fold's rows: 0.7 µs a row
    before, in ``row_checksum`` and a copy of each row); anything else goes
    through :func:`_verified_one_by_one`, which names the problem.
    """
    if type(rows) is list:
        expected, hash_ = after + 1, _HASH
        for row in rows:
            if type(row) is not tuple or len(row) != 7:
                break
            seq, event_type, ts, schema_v, epoch, payload, stored = row
            if seq != expected or type(payload) is not bytes or type(stored) is not int:
                break
            try:
                head = f"{run_id}\0{seq}\0{event_type}\0{ts}\0{schema_v}\0{epoch}"
                computed = hash_(payload, seed=hash_(head.encode("utf-8", "surrogatepass")))
            except (TypeError, ValueError, OverflowError):
                break
            if (computed - _WRAP if computed >= _SIGNED else computed) != stored:
                break
            expected += 1
        else:
            return rows, None
    return _verified_one_by_one(run_id, rows, after, where)


def _verified_one_by_one(
    run_id: str, rows: Sequence[Any], after: int, where: str
) -> tuple[list[tuple[Any, ...]], _Problem]:
    """:func:`_verified` row by row, naming what stopped it."""
    good: list[tuple[Any, ...]] = []
    for row in rows:
        seq, event_type, ts, schema_v, epoch, payload, stored = row
        if seq != after + len(good) + 1:
            return good, (after + len(good) + 1, f"seq {seq}")
        if not isinstance(payload, bytes):
            payload = bytes(payload)
        if stored is not None:
            try:
                computed = row_checksum(run_id, seq, event_type, ts, schema_v, epoch, payload)
            except (TypeError, ValueError, OverflowError) as exc:
                return good, CorruptEventError(run_id, seq, f"bad envelope column: {exc}", where)
            if computed != stored:
                return good, CorruptEventError(
                    run_id,
                    seq,
                    f"checksum mismatch (stored {stored}, computed {computed}): the row "
                    "changed after it was written",
                    where,
                )
        good.append((seq, event_type, ts, schema_v, epoch, payload, stored))
    return good, None
