"""Events to Parquet rows and back, deterministic file names, and the manifest.

One row per event. Besides the envelope (``run_id, seq, type, ts, schema_v,
writer_epoch``) and the payload (``payload``: the msgpack bytes of the payload
as the hot log stores it, copied from a log that keeps them (SQLite,
PostgreSQL) with the ``schema_v`` they were written at, and packed from the
decoded payload otherwise; ``payload_json``: a JSON rendering for SQL, with
bytes as base64, datetimes as ISO 8601 and UUIDs and Decimals as strings),
each row carries a few typed columns lifted out of the payload so the common
questions need no JSON parsing: ``workflow``, ``version`` (of the run),
``step``, ``task_key``, ``task_name`` (on a task's start, failure and
completion), ``attempt`` and ``duration_ms``.

An encrypted event (one read with :attr:`Event.sealed` set, whether this
process could open it or not) is archived as it is stored: ``payload`` holds
its clear metadata and the same sealed blob, and ``payload_json`` renders the
metadata only, with ``"_sealed": true``. The lifted columns are metadata, so
they stay. The archiver therefore never needs the keys, never writes an
encrypted run's plaintext, and a shred reaches the Parquet files too; SQL
opens the content for a user who holds the keys (:mod:`agentlog.archive._sql`).

Rows are sorted by ``(run_id, seq)`` and written in row groups with min/max
statistics, so a query for one run reads one row group of one file.

Files are Hive-partitioned as ``workflow=<name>/day=<YYYY-MM-DD>/`` (the day
the archived segment of the run began) and named after a hash of the run
segments they hold, so writing the same segments again overwrites the same
file. A file counts only once its manifest entry (``_manifest/<hash>.json``)
is written; readers list files from the manifest, never by globbing, so an
orphan left by a crash is invisible until the next archive run removes it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

from agentlog._logging import get_logger
from agentlog.archive._errors import ArchiveCorruptError
from agentlog.archive._rows import (
    EVENT_SCHEMA,
    SEALED_MARKER,
    events_to_table,
    payload_json,
    row_json,
)
from agentlog.archive._store import ArchiveStore
from agentlog.crypto import PayloadCipher
from agentlog.errors import AgentlogError
from agentlog.eventlog.codec import decode_stored_payload
from agentlog.eventlog.events import SCHEMA_V, Event, status_after_event, steps_after

__all__ = [
    "EVENT_SCHEMA",
    "MANIFEST_PREFIX",
    "Manifest",
    "ManifestEntry",
    "SEALED_MARKER",
    "Segment",
    "encode_parquet",
    "events_to_table",
    "file_key",
    "payload_json",
    "remove_orphans",
    "row_json",
    "table_to_events",
]

_log = get_logger("agentlog.archive")

#: Where manifest entries live, one JSON object per archive file.
MANIFEST_PREFIX = "_manifest/"

_DICTIONARY_COLUMNS = ["type", "workflow", "version", "step", "task_name"]


def encode_parquet(table: pa.Table, *, row_group_size: int = 65_536) -> bytes:
    """The table as Parquet bytes: zstd, statistics on, dictionaries on text."""
    sink = pa.BufferOutputStream()
    pq.write_table(
        table,
        sink,
        compression="zstd",
        row_group_size=row_group_size,
        use_dictionary=_DICTIONARY_COLUMNS,
        write_statistics=True,
    )
    return bytes(sink.getvalue().to_pybytes())


def table_to_events(
    table: pa.Table, *, where: str = "", cipher: PayloadCipher | None = None
) -> list[Event]:
    """Rebuild Events from archive rows, exactly as the hot log returned them.

    Sealed content is opened with ``cipher``; where it cannot be (no cipher,
    a shredded run, a key store without the run's key) the Event comes back
    as the hot log gives it: metadata only, with :attr:`Event.sealed` and
    :attr:`Event.unreadable` set, so folding it raises the reason.

    Raises:
        CorruptEventError: a row whose payload does not decode; names run and seq.
        TamperedPayloadError: sealed content fails its tag; names run and seq.
        KeyStoreUnavailableError: the key store does not answer.
    """
    columns = ["run_id", "seq", "type", "ts", "schema_v", "writer_epoch", "payload"]
    data = {name: table.column(name).to_pylist() for name in columns}
    events = []
    for run_id, seq, kind, ts, schema_v, epoch, raw in zip(*data.values(), strict=True):
        payload, sealed, unreadable = decode_stored_payload(
            kind, schema_v, raw, cipher, run_id=run_id, seq=seq, where=where
        )
        events.append(
            Event(
                run_id,
                seq,
                payload,
                ts.astimezone(UTC),
                epoch,
                SCHEMA_V,
                sealed=sealed,
                unreadable=unreadable,
            )
        )
    return events


@dataclass(frozen=True, slots=True)
class Segment:
    """Consecutive events of one run stored in one archive file."""

    run_id: str
    first_seq: int
    last_seq: int
    workflow: str = ""
    version: str = ""
    status: str = ""
    steps: int = 0
    started_at: str | None = None
    updated_at: str | None = None

    @classmethod
    def of(
        cls,
        events: Sequence[Event],
        *,
        workflow: str,
        version: str,
        status: str,
        steps: int,
        started_at: datetime | None,
    ) -> Segment:
        """The segment that ``events`` (one run, consecutive) form."""
        for event in events:
            status = status_after_event(status, event.data)
            steps = steps_after(steps, event.type)
        return cls(
            events[0].run_id,
            events[0].seq,
            events[-1].seq,
            workflow,
            version,
            status,
            steps,
            started_at.isoformat() if started_at else None,
            events[-1].ts.isoformat(),
        )


def file_key(workflow: str, day: str, segments: Sequence[Segment]) -> str:
    """The deterministic key of the file that holds exactly ``segments``."""
    digest = hashlib.sha256()
    for seg in segments:
        digest.update(f"{seg.run_id}\x00{seg.first_seq}\x00{seg.last_seq}\n".encode())
    name = quote(workflow or "_", safe="")
    return f"workflow={name}/day={day}/part-{digest.hexdigest()[:24]}.parquet"


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One archive file: what it holds; written after the file is confirmed."""

    file: str
    rows: int
    size_bytes: int
    workflow: str
    day: str
    created_at: str
    segments: tuple[Segment, ...]
    tasks_file: str = ""
    """The file's tasks table (:mod:`agentlog.archive._tasks_table`); "" for a
    file archived before tasks tables existed."""

    @property
    def key(self) -> str:
        """The entry's own key in the store."""
        name = self.file.rsplit("/", 1)[-1].removesuffix(".parquet")
        return f"{MANIFEST_PREFIX}{name}.json"

    def to_json(self) -> bytes:
        """The entry as the JSON stored at :attr:`key`."""
        body = dataclasses.asdict(self)
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes, where: str) -> ManifestEntry:
        """Parse a stored entry. Raises ArchiveCorruptError if it does not parse."""
        try:
            body = json.loads(raw)
            body["segments"] = tuple(Segment(**s) for s in body["segments"])
            return cls(**body)
        except (ValueError, TypeError, KeyError) as exc:
            raise ArchiveCorruptError(where, f"manifest entry does not parse: {exc}") from exc


class Manifest:
    """Every confirmed archive file, and which run segments each holds."""

    def __init__(self, entries: Iterable[ManifestEntry] = ()) -> None:
        self.entries: dict[str, ManifestEntry] = {}
        self.segments: dict[str, list[tuple[Segment, ManifestEntry]]] = {}
        for entry in entries:
            self.add(entry)

    @classmethod
    def load(cls, store: ArchiveStore) -> Manifest:
        """Read every entry from the store."""
        entries = []
        for key in store.list(MANIFEST_PREFIX):
            if not key.endswith(".json") or key.rsplit("/", 1)[-1].startswith(".tmp-"):
                continue  # a local write a crash interrupted; never confirmed
            raw = store.get(key)
            if raw is not None:
                entries.append(ManifestEntry.from_json(raw, store.location(key)))
        return cls(entries)

    def add(self, entry: ManifestEntry) -> None:
        """Record an entry (replacing one for the same file)."""
        self.entries[entry.file] = entry
        for seg in entry.segments:
            kept = [(s, e) for s, e in self.segments.get(seg.run_id, []) if e.file != entry.file]
            kept.append((seg, entry))
            kept.sort(key=lambda pair: pair[0].first_seq)
            self.segments[seg.run_id] = kept

    def remove(self, file: str) -> None:
        """Forget a file (its runs' segments in it go with it)."""
        entry = self.entries.pop(file, None)
        if entry is None:
            return
        for seg in entry.segments:
            kept = [(s, e) for s, e in self.segments.get(seg.run_id, []) if e.file != file]
            if kept:
                self.segments[seg.run_id] = kept
            else:
                self.segments.pop(seg.run_id, None)

    def data_files(self) -> set[str]:
        """The keys of every confirmed file: events files and their tasks tables."""
        return {*self.entries, *(e.tasks_file for e in self.entries.values() if e.tasks_file)}

    def archived_upto(self, run_id: str) -> int:
        """The last seq of the run that the archive holds (0 if none)."""
        segs = self.segments.get(run_id)
        return segs[-1][0].last_seq if segs else 0

    def latest(self, run_id: str) -> Segment | None:
        """The run's newest archived segment."""
        segs = self.segments.get(run_id)
        return segs[-1][0] if segs else None

    def files_of(self, run_id: str) -> list[str]:
        """The files holding the run, oldest segment first."""
        return [entry.file for _, entry in self.segments.get(run_id, [])]


def check_parquet(raw: bytes, location: str) -> None:
    """Raise ArchiveCorruptError unless ``raw`` is a readable Parquet footer."""
    try:
        pq.ParquetFile(pa.BufferReader(raw))
    except (pa.ArrowException, AgentlogError, OSError) as exc:
        raise ArchiveCorruptError(location, str(exc)) from exc


def remove_orphans(store: ArchiveStore, manifest: Manifest) -> int:
    """Delete the files no manifest entry names (a crashed pass's); how many."""
    removed, confirmed = 0, manifest.data_files()
    for key in store.list():
        name = key.rsplit("/", 1)[-1]
        if key.startswith(MANIFEST_PREFIX) and not name.startswith(".tmp-"):
            continue
        if (key.endswith(".parquet") and key not in confirmed) or name.startswith(".tmp-"):
            store.delete(key)
            removed += 1
            _log.info("removed orphan archive file", file=key)
    return removed
