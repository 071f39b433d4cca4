"""Bounded reads of the Kafka topics, for :class:`~agentlog.eventlog.kafka.KafkaEventLog`.

Every read goes up to the partition's *high watermark* (asked with a
``read_uncommitted`` consumer) through a ``read_committed`` consumer. So a
read waits for transactions that were open when it started to end, and then
sees every committed record: a read up to the last stable offset alone could
miss a run's committed event that sits behind another run's open
transaction.

A read held at the same last stable offset for ``stalled_s`` aborts the
transaction that holds it (see :mod:`~agentlog.eventlog.kafka._stalled`).

The runs topic is compacted and read into memory incrementally. An events
read starts at the best known offset at or before the first wanted seq.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
from collections.abc import Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from agentlog._logging import get_logger
from agentlog.crypto import PayloadCipher
from agentlog.errors import CorruptEventError
from agentlog.eventlog.codec import decode_event
from agentlog.eventlog.events import Event
from agentlog.eventlog.kafka._admin import TopicLayout
from agentlog.eventlog.kafka._clients import start_client, stop_quietly
from agentlog.eventlog.kafka._errors import kafka_errors
from agentlog.eventlog.kafka._records import (
    IndexEntry,
    SnapshotEntry,
    decode_index,
    decode_snapshot,
    parse_key,
)
from agentlog.eventlog.kafka._stalled import StalledTransactions

__all__ = ["KafkaReader"]

_log = get_logger(__name__)

#: Known (seq, offset just after that event) points kept per run.
_POINTS_PER_RUN = 32
#: How long closing one consumer may take.
_STOP_S = 5.0
#: How long one poll of a read waits. A fetch that holds only a transaction
#: marker (the commit after a run's last event) moves the position on but
#: returns no record, so getmany() would wait its whole timeout for nothing:
#: a read that ends at a marker (every claim's and find_run's tail read) then
#: took 200 ms. Short polls see the new position at once.
_POLL_MS = 10
_READ_FIX = "is the broker up? Retry once it answers."


class KafkaReader:
    """Reads the runs topic into memory and runs' events out of their partition."""

    def __init__(
        self, layout: TopicLayout, common: dict[str, Any], timeout_s: float, stalled_s: float
    ) -> None:
        self.layout = layout
        self.last_read_records = 0
        #: Opens sealed event content (set by the log before it starts).
        self.cipher: PayloadCipher | None = None
        self._timeout, self._stalled_s, self._common = timeout_s, stalled_s, common
        self._stalled = StalledTransactions(layout, common, stalled_s)
        fetch = {
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "fetch_max_wait_ms": 100,
            "max_partition_fetch_bytes": 8 * 1024 * 1024,
            "fetch_max_bytes": 64 * 1024 * 1024,
        }
        self._events = AIOKafkaConsumer(
            **{**common, **fetch, "fetch_max_wait_ms": 10}, isolation_level="read_committed"
        )
        self._runs = AIOKafkaConsumer(**common, **fetch, isolation_level="read_committed")
        self._hw = AIOKafkaConsumer(**common, isolation_level="read_uncommitted")
        #: runs-topic partition -> the offset up to which it was applied
        self._runs_next: dict[int, int] = {}
        self._events_lock = asyncio.Lock()
        self._runs_lock = asyncio.Lock()
        #: Per runs-topic partition, the catch-up round new callers join.
        self._runs_rounds: dict[int, asyncio.Future[None]] = {}
        self._index: dict[str, IndexEntry] = {}
        #: runs-topic partition -> its runs with an entry (an ordered set), so
        #: that a partition's entries cost its runs, not every run read here.
        self._runs_on: dict[int, dict[str, None]] = {}
        self._bad: dict[str, CorruptEventError] = {}
        self._snaps: dict[str, dict[int, SnapshotEntry]] = {}
        self._points: dict[str, list[tuple[int, int]]] = {}
        #: runs-topic partition -> queue name -> its admitter's table (``q:`` keys)
        self._queues: dict[int, dict[str, bytes]] = {}

    async def start(self) -> None:
        """Connect the three consumers and start reading the runs topic at 0."""
        for consumer in (self._events, self._runs, self._hw):
            await start_client(consumer)
        # Fetch the topics' metadata now, so the first read does not wait for it.
        partitions = range(self.layout.events_partitions)
        await self._hw.end_offsets(
            [
                *(TopicPartition(self.layout.runs, p) for p in self.layout.runs_partitions()),
                *(TopicPartition(self.layout.events, p) for p in partitions),
            ]
        )

    async def stop(self) -> None:
        """Close the consumers."""
        for consumer in (self._events, self._runs, self._hw):
            await stop_quietly(consumer, _STOP_S)
        await self._stalled.stop()

    async def high_watermark(self, tp: TopicPartition) -> int:
        """The offset after the last record written to ``tp``, committed or not."""
        with kafka_errors(self._cannot_read(tp), _READ_FIX):
            async with asyncio.timeout(self._timeout):
                offsets = await self._hw.end_offsets([tp])
        return int(offsets[tp])

    def _cannot_read(self, tp: TopicPartition) -> str:
        return f"cannot read topic {tp.topic} partition {tp.partition} within {self._timeout:g}s"

    async def _fetch(
        self, consumer: AIOKafkaConsumer, tp: TopicPartition, target: int, *, exact: bool = False
    ) -> list[Any]:
        """Records from the consumer's position up to ``target`` (committed only;
        ``exact``: none past it, where a fetch would return all it holds).

        A read held at the last stable offset for ``stalled_s`` aborts the
        transaction that holds it (see the module docstring).
        """
        records: list[Any] = []
        loop = asyncio.get_running_loop()
        held_at: int | None = None

        def failed() -> str:
            if held_at is None:
                return self._cannot_read(tp)
            return (
                f"reading topic {tp.topic} partition {tp.partition} did not finish within "
                f"{self._timeout:g}s: an open transaction at offset {held_at} holds the "
                "partition's last stable offset and could not be aborted"
            )

        def fix() -> str:
            if held_at is None:
                return _READ_FIX
            return (
                "the broker answers; retry, or wait for its transaction timeout to end that "
                "transaction."
            )

        with kafka_errors(failed, fix):
            async with asyncio.timeout(self._timeout):
                position = await consumer.position(tp)
                since = loop.time()
                while position < target:
                    most = max(target - position, 1) if exact else None
                    batch = await consumer.getmany(tp, timeout_ms=_POLL_MS, max_records=most)
                    records.extend(batch.get(tp, ()))
                    now_at = await consumer.position(tp)
                    if now_at != position:
                        position, since, held_at = now_at, loop.time(), None
                        continue
                    stable = consumer.last_stable_offset(tp)
                    if stable is None or not 0 <= stable <= position:
                        continue  # not held by a transaction: still fetching
                    held_at = position
                    if loop.time() - since >= self._stalled_s:
                        await self._stalled.abort(tp, position)
                        since = loop.time()
        return records

    # -- the runs topic -----------------------------------------------------------

    async def catch_up(self, partitions: Iterable[int] | None = None) -> None:
        """Apply every record written up to now to the given runs-topic partitions (all: None).

        A process reads only the partitions of the runs it touches; standalone
        there is one. Concurrent callers share a read (a *round*) of each
        partition: a caller joins the round that has not yet read the
        partition's high watermark, or starts one, so that 64 submits at once
        cost a round or two, not 64 reads one after the other (each may wait
        for an open transaction to end: read_committed).
        """
        wanted = self.layout.runs_partitions() if partitions is None else partitions
        for partition in sorted(set(wanted)):
            round_ = self._runs_rounds.get(partition)
            if round_ is None:
                round_ = asyncio.ensure_future(self._catch_up_round(partition))
                round_.add_done_callback(_retrieved)
                self._runs_rounds[partition] = round_
            await asyncio.shield(round_)  # one caller's cancel does not end it for all

    async def _catch_up_round(self, partition: int) -> None:
        async with self._runs_lock:
            # Callers from now on join the next round: this one reads the
            # high watermark after every caller that joined it had called.
            self._runs_rounds.pop(partition, None)
            tp = TopicPartition(self.layout.runs, partition)
            target = await self.high_watermark(tp)
            start = self._runs_next.get(partition, 0)
            if start >= target:
                return
            self._runs.assign([tp])
            self._runs.seek(tp, start)
            try:
                records = await self._fetch(self._runs, tp, target)
                self._runs_next[partition] = await self._runs.position(tp)
            finally:
                self._runs.pause(tp)
            for record in records:
                self._apply(tp, record)

    async def entries(self, partition: int) -> list[IndexEntry]:
        """The index entries of every run on runs-topic partition ``partition``."""
        await self.catch_up([partition])
        index, bad = self._index, self._bad
        runs = self._runs_on.get(partition, {})
        return [index[run_id] for run_id in runs if run_id in index and run_id not in bad]

    def _apply(self, tp: TopicPartition, record: Any) -> None:
        where = f"topic {tp.topic} partition {tp.partition} offset {record.offset}"
        try:
            kind, run_id, seq = parse_key(record.key or b"")
        except (ValueError, UnicodeDecodeError):
            _log.error("kafka_runs_record_unreadable", where=where, key=record.key)
            return
        if kind == "q":  # a queue's table (eventlog/kafka/_queue_grants.py)
            tables = self._queues.setdefault(tp.partition, {})
            if record.value is None:
                tables.pop(run_id, None)
            else:
                tables[run_id] = record.value
            return
        try:
            if kind == "r":
                if record.value is None:
                    self._index.pop(run_id, None)
                    self._points.pop(run_id, None)
                    self._runs_on.get(tp.partition, {}).pop(run_id, None)
                else:
                    self._index[run_id] = decode_index(record.value)
                    self._runs_on.setdefault(tp.partition, {})[run_id] = None
                self._bad.pop(run_id, None)
            elif record.value is None:
                self._snaps.get(run_id, {}).pop(seq, None)
            else:
                self._snaps.setdefault(run_id, {})[seq] = decode_snapshot(run_id, record.value)
        except ValueError as exc:
            self._bad[run_id] = CorruptEventError(run_id, None, f"bad runs record: {exc}", where)

    def queue_records(self, partition: int) -> dict[str, bytes]:
        """The queue tables on runs-topic ``partition``, as read so far (catch up first)."""
        return dict(self._queues.get(partition, {}))

    async def entry(self, run_id: str) -> IndexEntry | None:
        """The run's latest index entry (not yet extended by later events)."""
        await self.catch_up([self.layout.runs_partition(run_id)])
        if run_id in self._bad:
            raise self._bad[run_id]
        return self._index.get(run_id)

    async def snapshots(self, run_id: str, *, caught_up: bool = False) -> list[SnapshotEntry]:
        """The run's stored snapshots, oldest first (``caught_up``: as known here,
        which is whole for a run whose partition this process owns)."""
        if not caught_up:
            await self.catch_up([self.layout.runs_partition(run_id)])
        kept = self._snaps.get(run_id, {})
        return [kept[seq] for seq in sorted(kept)]

    def note_snapshot(self, entry: SnapshotEntry, dropped: Iterable[int] = ()) -> None:
        """Record a snapshot this process wrote, and drop those it tombstoned."""
        kept = self._snaps.setdefault(entry.snapshot.run_id, {})
        kept[entry.snapshot.seq] = entry
        for seq in dropped:
            kept.pop(seq, None)

    # -- where reads start ------------------------------------------------------------

    def note_point(
        self, run_id: str, seq: int, offset_after: int, *, keep: int | None = None
    ) -> None:
        """Remember that the run's event ``seq`` ends just before ``offset_after``
        (and at most ``keep`` of the run's latest points; default _POINTS_PER_RUN)."""
        points = self._points.setdefault(run_id, [])
        bisect.insort(points, (seq, offset_after))
        del points[: -(keep or _POINTS_PER_RUN)]

    async def offset_before(self, run_id: str, seq: int) -> int:
        """An events offset at or before the run's event ``seq`` (-1: none known)."""
        entry = self._index.get(run_id)
        best = -1
        if entry is not None:
            best = entry.first_offset
            if 0 < entry.info.last_seq < seq:
                best = max(best, entry.offset)
        for kept in self._snaps.get(run_id, {}).values():
            if kept.snapshot.seq < seq:
                best = max(best, kept.offset)
        for point_seq, offset_after in self._points.get(run_id, ()):
            if point_seq < seq:
                best = max(best, offset_after)
        return best

    async def snapshot_offset(self, entry: IndexEntry, seq: int) -> int:
        """The offset of the run's event ``seq + 1``, or just after its last event."""
        run_id = entry.info.run_id
        for point_seq, offset_after in self._points.get(run_id, ()):
            if point_seq == seq:
                return offset_after
        lower = await self.offset_before(run_id, seq + 1)
        if entry.first_offset < 0:
            return lower
        hits = await self.scan(entry, lower, seq, seq + 1)
        if hits:
            return hits[0][0]
        exact = (await self.exact(entry))[0]
        return exact.offset if exact.info.last_seq <= seq else lower

    # -- events -------------------------------------------------------------------------

    async def _records(self, partition: int, start: int, end: int | None = None) -> list[Any]:
        """Every committed record of an events partition from ``start`` on (up to
        ``end`` at least, when given; else to the partition's end)."""
        tp = TopicPartition(self.layout.events, partition)
        async with self._events_lock:
            target = await self.high_watermark(tp) if end is None else end
            self._events.assign([tp])
            self._events.seek(tp, max(start, 0))
            try:
                records = await self._fetch(self._events, tp, target, exact=end is not None)
            finally:
                # Idle, the consumer would keep a long-poll fetch in flight that
                # the next scan's seek has to wait out.
                self._events.pause(tp)
        self.last_read_records = len(records)
        return records

    async def scan(
        self,
        entry: IndexEntry,
        start: int,
        after_seq: int,
        upto_seq: int | None,
        records: list[Any] | None = None,
        end: int | None = None,
    ) -> list[tuple[int, Event]]:
        """The run's events with ``after_seq < seq <= upto_seq`` from ``start`` on
        (read up to ``end``, the offset just after the run's last event, if known).

        Raises:
            CorruptEventError: a record of this run does not decode, or its seq
                or epoch would fork the history; names topic, partition, offset.
        """
        run_id = entry.info.run_id
        tp = TopicPartition(self.layout.events, entry.partition)
        key = run_id.encode()
        if records is None:
            records = await self._records(entry.partition, start, end)
        hits: list[tuple[int, Event]] = []
        prev_seq, prev_epoch = after_seq, 0
        for record in records:
            if record.key != key or record.offset < start:
                continue
            where = f"topic {tp.topic} partition {tp.partition} offset {record.offset}"
            event = decode_event(record.value or b"", where=where, cipher=self.cipher)
            if event.seq <= after_seq:
                prev_epoch = max(prev_epoch, event.writer_epoch)
                continue
            if upto_seq is not None and event.seq > upto_seq:
                break
            if event.seq > prev_seq + 1:
                missing = f"missing: the next stored event is seq {event.seq}"
                raise CorruptEventError(run_id, prev_seq + 1, missing, where)
            if event.seq != prev_seq + 1:
                raise CorruptEventError(
                    run_id, event.seq, f"seq follows {prev_seq}: the history would fork", where
                )
            if event.writer_epoch < prev_epoch:
                raise CorruptEventError(
                    run_id,
                    event.seq,
                    f"writer epoch {event.writer_epoch} is older than {prev_epoch} (stale writer)",
                    where,
                )
            prev_seq, prev_epoch = event.seq, event.writer_epoch
            hits.append((record.offset, event))
        if hits:
            self.note_point(run_id, hits[-1][1].seq, hits[-1][0] + 1)
        return hits

    def check_complete(
        self,
        entry: IndexEntry,
        hits: list[tuple[int, Event]],
        after_seq: int,
        upto_seq: int | None,
    ) -> None:
        """Raise CorruptEventError if the index names events the read did not find.

        The index entry is committed in the same transaction as the events it
        counts, so every seq up to its ``last_seq`` must be on the topic.
        """
        wanted = entry.info.last_seq if upto_seq is None else min(upto_seq, entry.info.last_seq)
        got = hits[-1][1].seq if hits else after_seq
        if got < wanted:
            raise CorruptEventError(
                entry.info.run_id,
                got + 1,
                f"missing: the run index says the run has {entry.info.last_seq} events",
                f"topic {self.layout.events} partition {entry.partition}",
            )

    async def run_events(
        self, entry: IndexEntry, after_seq: int, upto_seq: int | None, end: int | None = None
    ) -> list[tuple[int, Event]]:
        """The run's events after ``after_seq``, read from the best start offset
        (to ``end``, the offset just after its last event, if known)."""
        if entry.first_offset < 0:
            return []
        # Its first event is at or before any of its events: never read from below it.
        start = max(await self.offset_before(entry.info.run_id, after_seq + 1), entry.first_offset)
        return await self.scan(entry, start, after_seq, upto_seq, end=end)

    async def exact(self, entry: IndexEntry) -> tuple[IndexEntry, list[tuple[int, Event]]]:
        """The entry extended by the events written after it, and those events."""
        if entry.first_offset < 0 or entry.offset < 0:
            return entry, []
        hits = await self.scan(entry, entry.offset, entry.info.last_seq, None)
        if not hits:
            return entry, []
        info = entry.info.after([event for _, event in hits])
        return dataclasses.replace(entry, info=info, offset=hits[-1][0] + 1), hits

    async def caught_up(self) -> list[IndexEntry]:
        """Every run's latest index entry, read to the end of the runs topic
        (not yet extended by later events: see :meth:`exact_many`)."""
        await self.catch_up()
        return [e for run_id, e in list(self._index.items()) if run_id not in self._bad]

    async def exact_many(self, entries: list[IndexEntry]) -> list[IndexEntry]:
        """These entries, each extended by its later events, reading each partition once."""
        out: list[IndexEntry] = []
        by_partition: dict[int, list[IndexEntry]] = {}
        for entry in entries:
            if entry.pruned or entry.offset < 0:
                out.append(entry)
            else:
                by_partition.setdefault(entry.partition, []).append(entry)
        for partition, group in by_partition.items():
            # Each run looks at its own records only: scanning every record read
            # for each run cost a worker's start-up the square of its runs.
            by_run: dict[bytes | None, list[Any]] = {}
            for record in await self._records(partition, min(e.offset for e in group)):
                by_run.setdefault(record.key, []).append(record)
            for entry in group:
                own = by_run.get(entry.info.run_id.encode(), [])
                hits = await self.scan(entry, entry.offset, entry.info.last_seq, None, own)
                if hits:
                    info = entry.info.after([event for _, event in hits])
                    entry = dataclasses.replace(entry, info=info, offset=hits[-1][0] + 1)
                out.append(entry)
        return out


def _retrieved(round_: asyncio.Future[None]) -> None:
    """A round's error reaches its callers; one left with none is not logged as lost."""
    if not round_.cancelled():
        round_.exception()
