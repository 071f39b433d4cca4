"""The Redis backend: events in Redis Streams, one stream per run.

The low-latency store of the pattern article, whose durability is a server
setting: :mod:`agentlog.eventlog.redis._connection` refuses a server that
would lose or evict acknowledged events before anything is written. The key
layout and the Lua scripts are in :mod:`agentlog.eventlog.redis._schema`.

Why a stream per run, with the seq as its entry id (``SEQ-0``): a read of
seqs is one XRANGE, a tail blocks in XREAD until the next seq exists, and
the stream refuses an id at or below its top, under the index check. A hash
per run holds the index row and the writer claim; an append is one Lua
script that checks the row's last seq and writer epoch, adds the events and
updates the row and the listing sets, atomically.

An append sends the next index row, computed by :meth:`RunInfo.after` from
the row it last saw for the run (cached per run, so a writer's steady appends
cost one round trip). The script applies it only if the row's last seq is
still the one it was computed from; otherwise the row is read again and the
append retried, or refused with the error :func:`check_next` gives.

A ``durable=True`` write returns once the server has it on disk: with
``appendfsync always`` the server fsyncs before it replies; on Redis >= 7.2
with AOF on and another fsync policy, the write is followed by ``WAITAOF 1 0``
on the same connection. Redis Cluster is not supported (a script touches the
run's keys and the shared listing sets, which live in different slots).
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

import redis.asyncio as aioredis

from agentlog._logging import get_logger
from agentlog.crypto import PayloadCipher
from agentlog.errors import BackendUnavailableError, CorruptEventError, UnknownRunError
from agentlog.eventlog._base import (
    Capabilities,
    RunInfo,
    Snapshot,
    check_batch,
    check_lease,
    check_next,
    check_run_id,
    select_runs,
    snapshots_kept_from,
)
from agentlog.eventlog._indexed import IndexedEventLog, StoredRows
from agentlog.eventlog._records import status_ended
from agentlog.eventlog._row_format import MAX_SEQ, event_rows, from_us, seq_param, to_us
from agentlog.eventlog._run_pages import RunQuery, RunsPage, page_from_counts, page_in_memory
from agentlog.eventlog._tail import TailWake
from agentlog.eventlog.events import Event, RunStatus, utcnow
from agentlog.eventlog.redis._connection import (
    Durability,
    RedisConfig,
    connect,
    durability_error,
    translating,
)
from agentlog.eventlog.redis._mailbox import RedisMailbox
from agentlog.eventlog.redis._pages import RunOrder
from agentlog.eventlog.redis._queues import QueueSets
from agentlog.eventlog.redis._rows import (
    event_args,
    event_from_entry,
    info_from_hash,
    snapshot_blob,
    snapshot_from_blob,
    time_arg,
)
from agentlog.eventlog.redis._schema import (
    APPEND,
    BUILD_ORDER,
    BUILD_QUEUES,
    CHECK_QUEUE_SET,
    CLAIM,
    LEASE,
    LOAD_SNAPSHOT,
    PRUNE,
    READ_QUEUE,
    SAVE_SNAPSHOT,
    TRIM_SNAPSHOTS,
    Keys,
)

__all__ = ["RedisEventLog"]

_log = get_logger(__name__)
_ROW_CACHE = 4096  # runs whose index row an instance remembers for its appends
_RETRIES = 8  # rounds of an optimistic script call before giving up
#: The statuses of an ended run, for the prune script (its mailbox goes too).
_ENDED = sorted(str(status) for status in RunStatus if status_ended(status))
_WAITAOF_MS = 10_000


def _member(member: bytes) -> tuple[int, int]:
    """``(seq, base_seq)`` of a snapshot index member ``b"SEQ:BASE"``."""
    seq, _, base = member.partition(b":")
    return int(seq), int(base or 0)


def _entry_seq(entry_id: bytes) -> int:
    """The seq of a stream entry id ``b"SEQ-0"``."""
    return int(entry_id.split(b"-", 1)[0])


def _entry_event(
    run_id: str, entry: tuple[bytes, Any], where: str, cipher: PayloadCipher | None
) -> Event:
    return event_from_entry(run_id, entry[0], entry[1], where, cipher)


#: Stream entries ``(b"SEQ-0", fields)`` as the indexed read path reads them.
_ENTRIES = StoredRows(
    seq=lambda entry: _entry_seq(entry[0]),
    event=_entry_event,
    found=lambda entry: f"entry {entry[0].decode()}",
    nothing="no entry",
)


class _StreamWake(TailWake):
    """XREAD BLOCK wakes a tail as soon as an entry after the last one seen
    exists, from any process; the timeout only bounds how long a blocked
    connection is held before the tail looks again."""

    waits_for_start = True

    def __init__(self, log: RedisEventLog, run_id: str, poll_seconds: float) -> None:
        super().__init__(poll_seconds)
        self._log, self._run_id = log, run_id
        self._block_ms = max(1, int(max(poll_seconds, 1.0) * 1000))

    async def wait(self, armed: object, after_seq: int) -> None:
        log, run_id = self._log, self._run_id
        with log._translating(f"following run {run_id!r} failed"):
            stream = {log._keys.events(run_id): f"{after_seq}-0"}
            await log._client.xread(stream, count=1, block=self._block_ms)


class RedisEventLog(RedisMailbox, IndexedEventLog):
    """Events, run index, writer claims and snapshots in one Redis database.

    Open it with :meth:`connect` (or ``open_log("redis://...")``), which
    checks the server's persistence settings first.
    """

    capabilities = Capabilities(live_tail=True)  # a tail wakes on XREAD BLOCK
    _stored = _ENTRIES

    def __init__(
        self,
        client: aioredis.Redis,
        config: RedisConfig,
        *,
        durability: Durability,
        version: str,
        cipher: PayloadCipher | None = None,
    ) -> None:
        self.config = config
        self.cipher = cipher
        self.keep_snapshots = config.keep_snapshots
        self.durability = durability
        self.server_version = version
        volatile = "&allow_volatile=true" if config.allow_volatile else ""
        self.url = f"redis://{config.host}:{config.port}/{config.db}?prefix={config.prefix}"
        self.url += volatile
        # Typed Any: redis-py's stubs answer bytes | str for decode_responses
        # True and False alike; this client never decodes, so replies are bytes.
        self._client: Any = client
        self._keys = Keys(config.prefix)
        self._rows: collections.OrderedDict[str, RunInfo] = collections.OrderedDict()
        self._closed = False
        register = client.register_script
        self._append, self._claim, self._lease = register(APPEND), register(CLAIM), register(LEASE)
        self._save_snap, self._trim_snaps = register(SAVE_SNAPSHOT), register(TRIM_SNAPSHOTS)
        self._load_snap, self._prune = register(LOAD_SNAPSHOT), register(PRUNE)
        self._order = RunOrder(client, self._keys, register(BUILD_ORDER))
        scripts = register(BUILD_QUEUES), register(CHECK_QUEUE_SET), register(READ_QUEUE)
        self._queues = QueueSets(client, self._keys, scripts)

    @classmethod
    async def connect(
        cls, config: RedisConfig, *, cipher: PayloadCipher | None = None
    ) -> RedisEventLog:
        """Reach the server (retrying with backoff) and check its settings.

        Raises:
            BackendUnavailableError: the server did not answer (names host:port).
            RedisAuthError: the server refused the password; not retryable.
            RedisDurabilityError: no persistence (and no ``allow_volatile``),
                or a ``maxmemory-policy`` that evicts keys.
        """
        client, durability, version = await connect(config)
        return cls(client, config, durability=durability, version=version, cipher=cipher)

    # -- plumbing -------------------------------------------------------------------

    def _translating(self, doing: str) -> contextlib.AbstractContextManager[None]:
        if self._closed:
            raise BackendUnavailableError(
                f"Redis log {self.url} is closed; open it again with open_log()."
            )
        return translating(self.config, doing)

    def _check_durable(self) -> None:
        """Refuse a durable write the server cannot make durable, before writing it."""
        if self.durability == "none":
            raise durability_error(self.config, self.server_version)

    async def _write(self, script: Any, keys: list[str], args: list[Any], durable: bool) -> Any:
        """Run a writing script; with ``durable`` on a WAITAOF server, wait for its fsync."""
        if not (durable and self.durability == "waitaof"):
            return await script(keys=keys, args=args)
        async with self._client.pipeline(transaction=False) as pipe:
            await script(keys=keys, args=args, client=pipe)
            pipe.execute_command("WAITAOF", 1, 0, _WAITAOF_MS)
            reply, (local, _replicas) = await pipe.execute()
        if int(local) < 1:
            raise BackendUnavailableError(
                f"Redis at {self.config.where} did not confirm the write on disk within "
                f"{_WAITAOF_MS} ms (WAITAOF): it is recorded but may not survive a crash; "
                "read the run before writing it again"
            )
        return reply

    async def _fetch_row(self, run_id: str) -> RunInfo | None:
        raw = await self._client.hgetall(self._keys.run(run_id))
        return info_from_hash(run_id, raw) if raw else None

    def _remember(self, info: RunInfo) -> None:
        self._rows[info.run_id] = info
        self._rows.move_to_end(info.run_id)
        while len(self._rows) > _ROW_CACHE:
            self._rows.popitem(last=False)

    # -- events ---------------------------------------------------------------------

    async def append(self, events: Sequence[Event], *, durable: bool = True) -> None:
        run_id, first_seq, epoch = check_batch(events)
        # Encode before anything is sent: a bad payload fails with nothing written.
        rows = event_rows(events, epoch, self.cipher)
        per_event = [arg for row in rows for arg in event_args(row)]
        if durable:
            self._check_durable()
        k = self._keys
        with self._translating(f"append to run {run_id!r} failed; its outcome is unknown"):
            base = self._rows.get(run_id)
            for _ in range(_RETRIES):
                if base is None or base.last_seq + 1 != first_seq:
                    base = await self._fetch_row(run_id) or RunInfo(run_id)
                nxt = base.after(events)
                keys = [k.run(run_id), k.events(run_id), k.runs, k.status(base.status)]
                keys += [k.status(nxt.status), k.wake, k.order, k.order_in(base.status)]
                keys += [k.order_in(nxt.status)]
                args = [run_id, epoch, first_seq, len(events), base.last_seq, nxt.workflow]
                args += [nxt.version, nxt.status, nxt.last_seq, nxt.steps]
                args += [time_arg(nxt.started_at), time_arg(nxt.updated_at)]
                args += [time_arg(nxt.wake_at), nxt.queue, nxt.priority]
                args += [time_arg(nxt.admitted_at), k.prefix, *per_event]
                reply = await self._write(self._append, keys, args, durable)
                verdict = reply[0]
                if verdict == b"ok":
                    self._remember(nxt)
                    return
                if verdict == b"corrupt":
                    raise CorruptEventError(
                        run_id,
                        first_seq,
                        f"the run's stream already holds seq {reply[1]} "
                        "but its index row does not: the index was damaged",
                        self.url,
                    )
                last, current = int(reply[1]), int(reply[2])
                check_next(run_id, last, first_seq, epoch, current)
                base = None  # the row moved since we computed the next one: read it again
        raise BackendUnavailableError(
            f"run {run_id!r}: the index row kept changing under {_RETRIES} appends of seq "
            f"{first_seq}; nothing was written. Retry the append"
        )

    async def _stored_seq(self, run_id: str, *, newest: bool) -> int | None:
        stream = self._keys.events(run_id)
        with self._translating(f"reading run {run_id!r} failed"):
            if newest:
                end = await self._client.xrevrange(stream, count=1)
            else:
                end = await self._client.xrange(stream, count=1)
        return _entry_seq(end[0][0]) if end else None

    async def _event_rows(self, run_id: str, after: int, last: int, limit: int) -> list[Any]:
        stream = self._keys.events(run_id)
        with self._translating(f"reading run {run_id!r} failed"):
            entries: list[Any] = await self._client.xrange(
                stream, f"{after + 1}-0", f"{last}-0", count=limit
            )
        return entries

    async def _tail_wake(self, run_id: str, poll_seconds: float) -> TailWake:
        return _StreamWake(self, run_id, poll_seconds)

    # -- the run index --------------------------------------------------------------

    async def find_run(self, run_id: str) -> RunInfo | None:
        check_run_id(run_id)
        with self._translating(f"reading run {run_id!r} failed"):
            return await self._fetch_row(run_id)

    async def _rows_of(self, run_ids: Sequence[bytes]) -> list[RunInfo]:
        async with self._client.pipeline(transaction=False) as pipe:
            for raw_id in run_ids:
                pipe.hgetall(self._keys.run(raw_id.decode()))
            hashes = await pipe.execute()
        return [
            info_from_hash(raw_id.decode(), raw)
            for raw_id, raw in zip(run_ids, hashes, strict=True)
            if raw
        ]

    async def list_runs(self, *, status: str | None = None) -> list[RunInfo]:
        key = self._keys.runs if status is None else self._keys.status(status)
        with self._translating("listing runs failed"):
            rows = await self._rows_of(list(await self._client.smembers(key)))
        return select_runs(rows, status)

    async def page_runs(self, query: RunQuery) -> RunsPage:
        """One page of the run list, paged in the server (see ``_pages``)."""
        with self._translating("paging runs failed"):
            await self._order.ensure()
            if query.run_ids is not None:
                ids = [run_id.encode() for run_id in query.run_ids]
                return page_in_memory(await self._rows_of(ids), query)
            if query.workflow is not None or query.text:
                return page_in_memory(await self._rows_of(await self._order.in_range(query)), query)
            ids, counts = await self._order.page(query)
            rows = await self._rows_of(ids)
        return page_from_counts(query, rows, counts.items())

    async def runnable(self, *, now: datetime | None = None, limit: int = 1000) -> list[RunInfo]:
        now = now or utcnow()
        with self._translating("listing runnable runs failed"):
            running = await self._client.smembers(self._keys.status(RunStatus.RUNNING))
            running |= await self._client.smembers(self._keys.status(RunStatus.QUEUED))
            due = await self._client.zrangebyscore(self._keys.wake, "-inf", to_us(now))
            rows = await self._rows_of(list(dict.fromkeys([*due, *sorted(running)])))
        # The rule is RunInfo.needs_worker's, as on every backend; the sets only narrow it.
        chosen = [info for info in rows if info.needs_worker(now)]
        chosen.sort(key=lambda info: info.wake_at or info.updated_at or now)
        return chosen[:limit]

    async def queue_runs(
        self, queue: str, workflows: Collection[str], now: datetime, limit: int
    ) -> tuple[list[RunInfo], list[RunInfo]]:
        """A queue's admission reads in one atomic script over its queue sets:
        the runs holding its slots and its ``limit`` best-ranked waiting runs
        (see ``_queues``), not the backlog."""
        with self._translating(f"reading queue {queue!r} failed"):
            return await self._queues.read(queue, workflows, now, limit)

    async def next_wake(self) -> datetime | None:
        with self._translating("reading timers failed"):
            first = await self._client.zrange(self._keys.wake, 0, 0, withscores=True)
        return from_us(int(first[0][1])) if first else None

    # -- writers --------------------------------------------------------------------

    async def claim_writer(
        self,
        run_id: str,
        *,
        owner: str = "",
        lease_seconds: float | None = None,
        force: bool = True,
    ) -> int:
        check_run_id(run_id)
        self._check_durable()
        with self._translating(f"claiming run {run_id!r} failed"):
            for _ in range(_RETRIES):
                now = utcnow()
                expires = None if lease_seconds is None else now + timedelta(seconds=lease_seconds)
                args = [run_id, owner, time_arg(expires), "1" if force else "0", to_us(now)]
                args.append(self._keys.prefix)
                reply = await self._write(self._claim, [self._keys.run(run_id)], args, True)
                if reply[0] == b"ok":
                    epoch = int(reply[1])
                    _log.info("writer_claimed", run_id=run_id, epoch=epoch, owner=owner)
                    return epoch
                held = RunInfo(
                    run_id, lease_owner=reply[1].decode(), lease_expires_at=from_us(int(reply[2]))
                )
                check_lease(held)  # raises while it is live; else it just ran out: again
        raise BackendUnavailableError(f"run {run_id!r}: the claim did not settle; retry it")

    async def _lease_update(self, run_id: str, epoch: int, expires: datetime | None) -> None:
        check_run_id(run_id)
        self._check_durable()
        with self._translating(f"updating the lease of run {run_id!r} failed"):
            args = [epoch, time_arg(expires), self._keys.prefix, run_id]
            reply = await self._write(self._lease, [self._keys.run(run_id)], args, True)
        if reply[0] == b"unknown":
            raise UnknownRunError(run_id, self.url)
        if reply[0] == b"refused":
            check_next(run_id, 0, 1, epoch, int(reply[1]))

    async def renew_lease(self, run_id: str, epoch: int, lease_seconds: float) -> None:
        await self._lease_update(run_id, epoch, utcnow() + timedelta(seconds=lease_seconds))

    async def release_lease(self, run_id: str, epoch: int) -> None:
        await self._lease_update(run_id, epoch, None)

    # -- snapshots ------------------------------------------------------------------

    async def save_snapshot(self, snapshot: Snapshot) -> None:
        check_run_id(snapshot.run_id)
        stored = self._sealed_snapshot(snapshot)
        blob = snapshot_blob(stored)
        keys = [self._keys.snapidx(snapshot.run_id), self._keys.snaps(snapshot.run_id)]
        with self._translating(f"saving a snapshot of run {snapshot.run_id!r} failed"):
            # A snapshot can always be rebuilt from the events: no wait for its fsync.
            members = await self._save_snap(keys=keys, args=[stored.seq, stored.base_seq, blob])
            floor = snapshots_kept_from(map(_member, members), self.keep_snapshots)
            if floor > _member(members[0])[0]:
                await self._trim_snaps(keys=keys, args=[floor, members[-1]])

    async def load_snapshot(
        self, run_id: str, *, at_or_before: int | None = None
    ) -> Snapshot | None:
        check_run_id(run_id)
        upto = MAX_SEQ if at_or_before is None else seq_param(at_or_before)
        keys = [self._keys.snapidx(run_id), self._keys.snaps(run_id)]
        with self._translating(f"loading a snapshot of run {run_id!r} failed"):
            reply = await self._load_snap(keys=keys, args=[upto])
        if not reply:
            return None
        seq = _member(reply[0])[0]
        if reply[1] is None:
            raise CorruptEventError(run_id, seq, "the snapshot's record is missing", self.url)
        return self._opened_snapshot(snapshot_from_blob(run_id, seq, reply[1], self.url))

    # -- retention ------------------------------------------------------------------

    async def prune(self, run_id: str, *, keep_latest_snapshot: bool = False) -> None:
        check_run_id(run_id)
        self._check_durable()
        k = self._keys
        keys = [k.run(run_id), k.events(run_id), k.snapidx(run_id), k.snaps(run_id)]
        keys += self._mailbox_keys(run_id)[1:]  # an ended run's go with its events
        with self._translating(f"pruning run {run_id!r} failed"):
            for _ in range(_RETRIES):
                floor: int | str = ""
                newest = await self._client.zrevrange(k.snapidx(run_id), 0, 0)
                if keep_latest_snapshot and newest:
                    floor = snapshots_kept_from([_member(newest[0])], 1)
                top = newest[0] if newest else b""
                args = [floor, top, *_ENDED]
                if await self._write(self._prune, keys, args, True) != 2:
                    break
        self._rows.pop(run_id, None)
        _log.info("run_pruned", run_id=run_id, url=self.url, kept_snapshot=keep_latest_snapshot)

    # -- lifecycle ------------------------------------------------------------------

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._client.aclose()
