"""Replay from the archive: the read side of the seam over the hot log plus the archive.

:class:`ArchivedEventReader` answers ``read``, ``find_run``, ``get_run``,
``list_runs`` and ``load_snapshot`` from the hot log first and falls back to
the archive for whatever was archived and pruned, so ``agentlog show``,
``state`` and ``diff`` work on archived runs without knowing it. A run's
events come back in seq order with no gap: the archived segments, then the
hot events after them. A pruned run's hot index row (its tombstone, with
``archived=True``) is its index row here too. A run pruned into another
archive than this one raises :class:`~agentlog.errors.RunArchivedError`
rather than returning part of its history. It is an
:class:`~agentlog.eventlog._reader.EventReader` only: it has no write methods at
all, so passing it where a writable :class:`~agentlog.eventlog._base.EventLog`
is needed is a type error, not a runtime one.

Encrypted runs stay encrypted in the archive. Their content is opened with
the hot log's cipher (or the one passed in), the same as the hot log opens
its own events; without the keys, or after a shred, archived events come back
as metadata with :attr:`~agentlog.eventlog.Event.unreadable` set, so
replaying them raises :class:`~agentlog.errors.KeyStoreMissingError` or
:class:`~agentlog.errors.ShreddedError`, never a wrong state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import duckdb

from agentlog.archive._errors import ArchiveCorruptError
from agentlog.archive._parquet import Manifest, table_to_events
from agentlog.archive._run_index import segment_info
from agentlog.archive._store import ArchiveStore
from agentlog.crypto import PayloadCipher
from agentlog.errors import RunArchivedError, UnknownRunError
from agentlog.eventlog._base import EventReader, RunInfo, Snapshot, select_runs
from agentlog.eventlog.events import Event

__all__ = ["ArchiveReader", "ArchivedEventReader"]

_COLUMNS = "run_id, seq, type, ts, schema_v, writer_epoch, payload"


class ArchiveReader:
    """Reads archived runs back as Events, through DuckDB (local or S3)."""

    def __init__(
        self,
        store: ArchiveStore,
        manifest: Manifest | None = None,
        *,
        cipher: PayloadCipher | None = None,
    ) -> None:
        """Read ``store``'s archive; open sealed content with ``cipher`` (None: leave it sealed)."""
        self.store = store
        self.manifest = manifest if manifest is not None else Manifest.load(store)
        self.cipher = cipher
        self._conn: Any = None

    def refresh(self) -> None:
        """Reload the manifest (after an archive pass in another process)."""
        self.manifest = Manifest.load(self.store)

    def _connection(self) -> Any:
        if self._conn is None:
            self._conn = duckdb.connect()
            self.store.configure_duckdb(self._conn)
        return self._conn

    def read_run(
        self, run_id: str, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> list[Event]:
        """The run's archived events with ``after_seq < seq <= upto_seq``.

        Sealed content is opened with :attr:`cipher`; events it cannot open
        come back with :attr:`~agentlog.eventlog.Event.unreadable` set.

        Raises:
            ArchiveCorruptError: a file of the run does not read back.
            CorruptEventError: a row's payload does not decode (or was tampered with).
        """
        files = self.manifest.files_of(run_id)
        if not files:
            return []
        locations = [self.store.location(f) for f in files]
        upto = upto_seq if upto_seq is not None else 2**62
        try:
            table = (
                self._connection()
                .execute(
                    f"SELECT {_COLUMNS} FROM read_parquet(?, hive_partitioning=false) "
                    "WHERE run_id = ? AND seq > ? AND seq <= ? ORDER BY seq",
                    [locations, run_id, after_seq, upto],
                )
                .to_arrow_table()
            )
        except duckdb.Error as exc:
            raise ArchiveCorruptError(", ".join(locations), str(exc).splitlines()[0]) from exc
        return table_to_events(table, where=f"archive {', '.join(files)}", cipher=self.cipher)

    def run_info(self, run_id: str) -> RunInfo | None:
        """The run's index row as the archive knows it, or None."""
        seg = self.manifest.latest(run_id)
        if seg is None:
            return None
        return segment_info(seg, archived=False)

    def run_ids(self) -> list[str]:
        """Every archived run."""
        return list(self.manifest.segments)

    def close(self) -> None:
        """Close the DuckDB connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class ArchivedEventReader(EventReader):
    """The hot log and the archive as one read-only history."""

    def __init__(
        self,
        log: EventReader,
        store: ArchiveStore | ArchiveReader,
        *,
        cipher: PayloadCipher | None = None,
    ) -> None:
        """Read ``log`` and the archive in ``store`` as one history.

        Args:
            log: the hot log (its snapshots and not yet archived events).
            store: the archive, or a reader over it (which keeps its own cipher).
            cipher: opens archived sealed content; None: the hot log's cipher,
                so both halves of a run open with the same keys.
        """
        self.log = log
        self.cipher = cipher if cipher is not None else log.cipher
        self.archive = (
            store if isinstance(store, ArchiveReader) else ArchiveReader(store, cipher=self.cipher)
        )
        self.url = log.url

    async def read(
        self, run_id: str, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> AsyncIterator[Event]:
        archived_upto = self.archive.manifest.archived_upto(run_id)
        last = after_seq
        if archived_upto > after_seq:
            for event in self.archive.read_run(run_id, after_seq=after_seq, upto_seq=upto_seq):
                last = event.seq
                yield event
        if upto_seq is not None and last >= upto_seq:
            return
        try:
            async for event in self.log.read(
                run_id, after_seq=max(last, archived_upto), upto_seq=upto_seq
            ):
                yield event
        except RunArchivedError:
            raise  # pruned from the hot log, but this archive does not hold those events
        except UnknownRunError:
            if not archived_upto:
                raise

    async def find_run(self, run_id: str) -> RunInfo | None:
        hot = await self.log.find_run(run_id)
        archived = self.archive.run_info(run_id)
        if archived is None:
            return hot
        if hot is None or hot.last_seq == 0:
            return archived
        if hot.last_seq >= archived.last_seq:
            return hot
        return dataclasses.replace(
            hot,
            workflow=archived.workflow,
            version=archived.version,
            status=archived.status,
            last_seq=archived.last_seq,
            steps=archived.steps,
            started_at=archived.started_at,
            updated_at=archived.updated_at,
        )

    async def list_runs(self, *, status: str | None = None) -> list[RunInfo]:
        rows = {r.run_id: r for r in await self.log.list_runs()}
        for run_id in self.archive.run_ids():
            info = await self.find_run(run_id)
            if info is not None:
                rows[run_id] = info
        return select_runs(rows.values(), status)

    async def load_snapshot(
        self, run_id: str, *, at_or_before: int | None = None
    ) -> Snapshot | None:
        # The archive keeps events only; without a hot snapshot, state is folded from seq 1.
        return await self.log.load_snapshot(run_id, at_or_before=at_or_before)

    async def close(self) -> None:
        """Close the archive reader; the hot log is the caller's to close."""
        self.archive.close()
