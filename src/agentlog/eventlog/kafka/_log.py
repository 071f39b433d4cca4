"""KafkaEventLog: the EventLog seam on Kafka topics (see the package docstring).

It wires the parts together: :mod:`~agentlog.eventlog.kafka._admin` makes the
topics, :mod:`~agentlog.eventlog.kafka._reader` reads them,
:mod:`~agentlog.eventlog.kafka._writer_pool` commits runs' events and index entries,
and snapshots and prunes go through one plain idempotent producer here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import AsyncIterator, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from agentlog._logging import get_logger
from agentlog.crypto import PayloadCipher
from agentlog.errors import (
    FencedError,
    RunArchivedError,
    UnknownRunError,
)
from agentlog.eventlog._base import (
    Capabilities,
    EventLog,
    RunInfo,
    Snapshot,
    check_batch,
    check_lease,
    check_run_id,
    claimed,
    lease_expiry,
    select_runs,
    snapshots_kept_from,
)
from agentlog.eventlog._run_pages import RunQuery, RunsPage, page_in_memory
from agentlog.eventlog.codec import encode_event
from agentlog.eventlog.events import Event
from agentlog.eventlog.kafka._admin import MAX_RECORD_BYTES, ensure_topics
from agentlog.eventlog.kafka._clients import start_client, stop_quietly
from agentlog.eventlog.kafka._config import KafkaConfig
from agentlog.eventlog.kafka._errors import kafka_errors
from agentlog.eventlog.kafka._group import GroupMember
from agentlog.eventlog.kafka._reader import KafkaReader
from agentlog.eventlog.kafka._records import (
    IndexEntry,
    SnapshotEntry,
    encode_index,
    encode_snapshot,
    index_key,
    snapshot_key,
)
from agentlog.eventlog.kafka._security import client_security, diagnose
from agentlog.eventlog.kafka._writer_pool import WriterPool

__all__ = ["KafkaEventLog"]

_log = get_logger(__name__)

#: Claims racing with other processes retry this many times before giving up.
_CLAIM_ATTEMPTS = 20
#: How long closing one client may take (a producer waits for its queue).
_STOP_S = 5.0


#: The class :meth:`KafkaEventLog.connect` opens for each topic layout but
#: the standalone one: a subclass names its layout where it is defined
#: (``PartitionedKafkaEventLog(KafkaEventLog, layout="partitioned")`` in
#: grouplog.py, which the package imports), so that this module, beneath
#: it, never imports its subclass.
_LAYOUTS: dict[str, type[KafkaEventLog]] = {}


class KafkaEventLog(EventLog):
    """The event log on Kafka topics. Open it with :meth:`connect`."""

    #: The run index is read partition by partition: a claim another process
    #: committed a moment ago need not be seen (see ``Capabilities.claims_seen``).
    capabilities = Capabilities(claims_seen=False)

    def __init_subclass__(cls, *, layout: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if layout is not None:
            _LAYOUTS[layout] = cls

    def __init__(
        self,
        config: KafkaConfig,
        admin: AIOKafkaAdminClient,
        reader: KafkaReader,
        pool: WriterPool,
        plain: AIOKafkaProducer,
        partitions: int,
        member: GroupMember | None = None,
        common: dict[str, Any] | None = None,
    ) -> None:
        """The log over the clients :meth:`connect` started (the standalone
        layout has no group ``member`` and keeps no ``common`` client arguments)."""
        del member, common
        self.config = config
        self.url = f"kafka://{config.bootstrap_servers}/{config.name}"
        self.keep_snapshots = config.keep_snapshots
        self._admin, self._reader, self._pool, self._plain = admin, reader, pool, plain
        self._partitions = partitions

    @property
    def last_read_records(self) -> int:
        """Records fetched from the events topic by the last read or find_run."""
        return self._reader.last_read_records

    @classmethod
    async def connect(
        cls, config: KafkaConfig, *, cipher: PayloadCipher | None = None
    ) -> KafkaEventLog:
        """Create or check the topics, read the run index, and return the log.

        With ``cipher``, event content, snapshots and commands are sealed at
        rest with per-run data keys (see :mod:`agentlog.eventlog._sealing`).

        Every aiokafka client the log makes (here, in the reader, the
        writers and a group member) is made from one ``common`` dict, which
        carries the config's SASL and TLS settings.

        Raises:
            KafkaAuthError: the listener refused the credentials, the
                broker's certificate is not trusted, or the security protocol
                is not the listener's (within ``config.connect_timeout_s``).
            BackendUnavailableError: the broker did not answer within
                ``config.connect_timeout_s``.
            ConfigError: the events topic is compacted or cannot be created,
                or a TLS file cannot be loaded.
        """
        if str(config.acks).lower() not in ("all", "-1"):
            _log.warning(
                "kafka_acks_not_all",
                acks=config.acks,
                hint="fencing needs a transactional producer, which uses acks=all",
            )
        security = client_security(config)
        common: dict[str, Any] = {
            "bootstrap_servers": config.bootstrap_servers,
            "request_timeout_ms": int(config.request_timeout_s * 1000),
            **security,
        }
        started: list[Any] = []
        stage = "connecting"
        deadline = asyncio.get_running_loop().time() + config.connect_timeout_s

        def failed() -> str:
            where = f"Kafka at {config.listener}"
            if stage == "connecting":
                return f"cannot reach {where} within {config.connect_timeout_s:g}s"
            return (
                f"connected to {where}, but {stage} did not finish within "
                f"{config.connect_timeout_s:g}s"
            )

        def fix() -> str:
            if stage == "connecting":
                return (
                    "start the broker (python scripts/kafka_broker.py start, or docker compose "
                    "up -d kafka) or fix the address in the log URL."
                )
            return (
                "the broker answers but is slow or overloaded; retry, or raise connect_timeout_s."
            )

        try:
            with kafka_errors(failed, fix):
                async with asyncio.timeout(config.connect_timeout_s):
                    admin = AIOKafkaAdminClient(**common)
                    try:
                        await start_client(admin)
                    except (KafkaError, OSError) as exc:
                        # aiokafka says only "Unable to bootstrap": ask why.
                        left = deadline - asyncio.get_running_loop().time()
                        refused = await diagnose(config, security, left)
                        if refused is not None:
                            raise refused from exc
                        raise
                    started.append(admin)
                    stage = "creating or checking the topics"
                    layout = await ensure_topics(
                        admin,
                        config.name,
                        config.partitions,
                        config.replication_factor,
                        "partitioned" if config.group_id else config.layout,
                        min_insync=config.min_insync_replicas,
                        bootstrap_servers=config.bootstrap_servers,
                    )
                    plain = AIOKafkaProducer(
                        **common,
                        acks="all",
                        enable_idempotence=True,
                        max_request_size=MAX_RECORD_BYTES,
                    )
                    started.append(plain)
                    await start_client(plain)
                    reader = KafkaReader(
                        layout, common, config.request_timeout_s, config.stalled_transaction_s
                    )
                    reader.cipher = cipher
                    started.append(reader)
                    await reader.start()
                    member = None
                    if not layout.partitioned:
                        # Partitioned, a process reads only the runs it touches.
                        stage = f"reading the run index (topic {layout.runs})"
                        await reader.catch_up()
                    elif config.group_id:
                        stage = f"joining consumer group {config.group_id!r}"
                        member = GroupMember(config, layout, common, reader, admin)
                        member.cipher = cipher
                        started.append(member)
                        await member.start()
        except BaseException:
            for client in reversed(started):
                await stop_quietly(client, _STOP_S)
            raise
        pool = WriterPool(config, layout, common, reader)
        _log.info(
            "kafka_log_opened",
            url=f"kafka://{config.bootstrap_servers}/{config.name}",
            partitions=layout.events_partitions,
            layout="partitioned" if layout.partitioned else "standalone",
            group_id=config.group_id,
        )
        kind = _LAYOUTS["partitioned"] if layout.partitioned else cls
        opened = kind(config, admin, reader, pool, plain, layout.events_partitions, member, common)
        opened.cipher = cipher
        return opened

    # -- events -----------------------------------------------------------------

    async def append(self, events: Sequence[Event], *, durable: bool = True) -> None:
        """Append and commit the batch (acks=all) before returning.

        ``durable`` is accepted for the seam and makes no difference here: a
        committed transaction is the only way a Kafka write becomes visible,
        and the runtime's async mode already batches in the background.
        """
        del durable
        run_id, first_seq, epoch = check_batch(events)
        # Encoded once, here, so NotSerializableError comes before anything is sent.
        raw = [encode_event(event, self.cipher) for event in events]
        await self._pool.append(run_id, list(events), raw, first_seq, epoch)

    async def read(
        self, run_id: str, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> AsyncIterator[Event]:
        check_run_id(run_id)
        entry = await self._reader.entry(run_id)
        async for event in self._read_entry(run_id, entry, after_seq, upto_seq):
            yield event

    async def _read_entry(
        self,
        run_id: str,
        entry: IndexEntry | None,
        after_seq: int,
        upto_seq: int | None,
        end: int | None = None,
    ) -> AsyncIterator[Event]:
        """The run's events as ``entry`` places them (``end``: the offset just
        after its last event, when known: the read stops there)."""
        if entry is None or (entry.info.last_seq == 0 and not entry.pruned):
            raise UnknownRunError(run_id, self.url)
        after_seq = max(after_seq, 0)  # seqs start at 1: any lower bound below is "all"
        if upto_seq is not None and upto_seq <= after_seq:
            return
        if after_seq < entry.archived_seq:
            # Seqs up to archived_seq live only in the archive now.
            raise RunArchivedError(run_id, self.url)
        if entry.pruned:
            return  # no event was stored after the archived ones
        hits = await self._reader.run_events(entry, after_seq, upto_seq, end)
        self._reader.check_complete(entry, hits, after_seq, upto_seq)
        for _offset, event in hits:
            yield event

    # -- the run index ----------------------------------------------------------

    async def find_run(self, run_id: str) -> RunInfo | None:
        check_run_id(run_id)
        entry = await self._reader.entry(run_id)
        if entry is None:
            return None
        if entry.pruned:
            return entry.info
        return (await self._reader.exact(entry))[0].info

    async def list_runs(self, *, status: str | None = None) -> list[RunInfo]:
        entries = await self._reader.exact_many(await self._reader.caught_up())
        return select_runs((e.info for e in entries), status)

    async def page_runs(self, query: RunQuery) -> RunsPage:
        """One page of the run list over the caught-up run index, exact rows for
        the page only.

        The index entries (read to the end of the runs topic, no event read)
        choose and count the page: an entry is written with every status change,
        so the counts are exact, while its ``updated_at`` may trail a run's
        latest events by up to ``index_every`` events, which can place a run
        that is busy right now by its last entry's time. Only the page's
        entries are then extended by their later events (:meth:`find_run`'s
        exact rows).
        """
        entries = {entry.info.run_id: entry for entry in await self._reader.caught_up()}
        page = page_in_memory((entry.info for entry in entries.values()), query)
        exact = await self._reader.exact_many([entries[info.run_id] for info in page.rows])
        by_id = {entry.info.run_id: entry.info for entry in exact}
        return RunsPage([by_id[info.run_id] for info in page.rows], page.total, page.counts)

    # -- writers ----------------------------------------------------------------

    async def claim_writer(
        self,
        run_id: str,
        *,
        owner: str = "",
        lease_seconds: float | None = None,
        force: bool = True,
    ) -> int:
        check_run_id(run_id)
        if not force:
            # Look before fencing, so a refused claim does not disturb the holder.
            entry = await self._reader.entry(run_id)
            if entry is not None:
                check_lease(entry.info)
        expires = lease_expiry(lease_seconds)
        for attempt in range(_CLAIM_ATTEMPTS):
            writer = await self._pool.fresh(run_id)
            epoch = claimed(
                writer.committed, owner=owner, expires=expires, force=force
            ).writer_epoch
            try:
                await self._pool.write_index(writer, epoch, owner, expires)
            except FencedError:
                # Another process opened the run's producer between our open and
                # our commit; back off a little (spread out) and claim again.
                if attempt == _CLAIM_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(random.uniform(0.005, 0.02) * (attempt + 1))
                continue
            _log.info("kafka_writer_claimed", run_id=run_id, epoch=epoch, owner=owner)
            return epoch
        raise AssertionError("unreachable")  # pragma: no cover

    async def renew_lease(self, run_id: str, epoch: int, lease_seconds: float) -> None:
        check_run_id(run_id)
        writer = await self._pool.current(run_id, epoch)
        expires = lease_expiry(lease_seconds)
        await self._pool.write_index(writer, epoch, writer.committed.lease_owner, expires)

    async def release_lease(self, run_id: str, epoch: int) -> None:
        check_run_id(run_id)
        writer = await self._pool.current(run_id, epoch)
        await self._pool.write_index(writer, epoch, writer.committed.lease_owner, None)

    # -- snapshots ----------------------------------------------------------------

    async def save_snapshot(self, snapshot: Snapshot) -> None:
        run_id = snapshot.run_id
        check_run_id(run_id)
        entry = await self._reader.entry(run_id)
        if entry is None:
            raise UnknownRunError(run_id, self.url)
        offset = await self._reader.snapshot_offset(entry, snapshot.seq)
        await self._store_snapshot(snapshot, offset, await self._reader.snapshots(run_id))

    async def _store_snapshot(
        self, snapshot: Snapshot, offset: int, stored: list[SnapshotEntry]
    ) -> None:
        """Write ``snapshot`` (reads of the run start at events ``offset``) and
        tombstone those of ``stored`` (the run's snapshots) it makes redundant."""
        run_id, snapshot = snapshot.run_id, self._sealed_snapshot(snapshot)
        kept = {s.snapshot.seq: s.snapshot.base_seq for s in stored}
        kept[snapshot.seq] = snapshot.base_seq
        floor = snapshots_kept_from(kept.items(), self.keep_snapshots)
        saved = SnapshotEntry(snapshot, offset)
        records: list[tuple[bytes, bytes | None]] = [
            (snapshot_key(run_id, snapshot.seq), encode_snapshot(saved))
        ]
        records += [(snapshot_key(run_id, old), None) for old in sorted(kept) if old < floor]
        runs = self._reader.layout.runs
        doing = (
            f"cannot save snapshot of run {snapshot.run_id!r} at seq {snapshot.seq} to topic {runs}"
        )
        await self._write_runs(snapshot.run_id, records, doing, "retry when the broker is back")
        self._reader.note_snapshot(saved, (old for old in kept if old < floor))

    async def _write_runs(
        self, run_id: str, records: list[tuple[bytes, bytes | None]], doing: str, fix: str
    ) -> None:
        """Write keyed runs-topic records of one run (snapshots, tombstones), in order."""
        runs, partition = self._reader.layout.runs, self._reader.layout.runs_partition(run_id)
        with kafka_errors(doing, fix):
            for key, value in records:
                await self._plain.send_and_wait(runs, value, key=key, partition=partition)

    async def load_snapshot(
        self, run_id: str, *, at_or_before: int | None = None
    ) -> Snapshot | None:
        check_run_id(run_id)
        for kept in reversed(await self._reader.snapshots(run_id)):
            if at_or_before is None or kept.snapshot.seq <= at_or_before:
                return self._opened_snapshot(kept.snapshot)
        return None

    # -- retention ----------------------------------------------------------------

    async def prune(self, run_id: str, *, keep_latest_snapshot: bool = False) -> None:
        """Forget the run's events; Kafka deletes the bytes with the partition.

        A shared partition cannot drop one key's records, so the run's index
        entry is rewritten as archived (``pruned``): reads of its events then
        raise RunArchivedError, while find_run, get_run and list_runs still
        show the run, so its id stays taken.
        """
        check_run_id(run_id)
        await self._pool.close_writer(run_id)
        entry = await self._reader.entry(run_id)
        if entry is not None and not entry.pruned:
            entry = (await self._reader.exact(entry))[0]
        kept = await self._reader.snapshots(run_id)
        drop = kept
        if keep_latest_snapshot:
            floor = snapshots_kept_from(((s.snapshot.seq, s.snapshot.base_seq) for s in kept), 1)
            drop = [old for old in kept if old.snapshot.seq < floor]
        records: list[tuple[bytes, bytes | None]] = [
            (snapshot_key(run_id, old.snapshot.seq), None) for old in drop
        ]
        if entry is not None:
            # Events the run stores from now on start after its last offset.
            archived = dataclasses.replace(
                entry,
                info=dataclasses.replace(entry.info, archived=True),
                pruned=True,
                first_offset=entry.offset,
                archived_seq=entry.info.last_seq,
            )
            records.append((index_key(run_id), encode_index(archived)))
        fix = (
            "nothing of it was lost (its archive write is confirmed). Run the retention pass "
            "again when the broker is back."
        )
        await self._write_runs(run_id, records, f"cannot prune run {run_id!r}", fix)
        await self._reader.catch_up([self._reader.layout.runs_partition(run_id)])

    # -- lifecycle ------------------------------------------------------------------

    async def close(self) -> None:
        try:
            await self._pool.close()
        finally:
            await self._reader.stop()
            await stop_quietly(self._plain, _STOP_S)
            await stop_quietly(self._admin, _STOP_S)
