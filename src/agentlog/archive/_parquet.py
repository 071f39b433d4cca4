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

import base64
import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import quote
from uuid import UUID

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from agentlog.archive._errors import ArchiveCorruptError
from agentlog.archive._store import ArchiveStore
from agentlog.crypto import PayloadCipher
from agentlog.errors import AgentlogError
from agentlog.eventlog._indexed import StoredPayload
from agentlog.eventlog._row_format import epoch_us
from agentlog.eventlog._sealing import SEALED_KEY
from agentlog.eventlog.codec import decode_stored_payload, jsonable, pack, store_fields
from agentlog.eventlog.events import (
    SCHEMA_V,
    Event,
    EventData,
    RunStarted,
    status_after_event,
    steps_after,
)

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
    "row_json",
    "table_to_events",
]

#: Where manifest entries live, one JSON object per archive file.
MANIFEST_PREFIX = "_manifest/"

#: The ``payload_json`` key that marks a row whose content is sealed (its JSON is metadata only).
SEALED_MARKER = SEALED_KEY

EVENT_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("type", pa.string(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("schema_v", pa.int32(), nullable=False),
        pa.field("writer_epoch", pa.int64(), nullable=False),
        pa.field("workflow", pa.string()),
        pa.field("version", pa.string()),
        pa.field("step", pa.string()),
        pa.field("task_key", pa.string()),
        pa.field("task_name", pa.string()),
        pa.field("attempt", pa.int32()),
        pa.field("duration_ms", pa.float64()),
        pa.field("payload", pa.binary(), nullable=False),
        pa.field("payload_json", pa.string(), nullable=False),
    ]
)

_TS = EVENT_SCHEMA.field("ts").type

_DICTIONARY_COLUMNS = ["type", "workflow", "version", "step", "task_name"]


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, UUID | Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON-renderable")


def payload_json(fields: dict[str, Any]) -> str:
    """A JSON rendering of a payload's fields, for SQL (not for replay)."""
    try:
        return orjson.dumps(fields, default=_json_default).decode()
    except TypeError:  # non-str keys or an int beyond 64 bits: the slow path copes
        return json.dumps(jsonable(fields), separators=(",", ":"), ensure_ascii=False)


def _stored(event: Event, fields: dict[str, Any], raw: bytes | None) -> tuple[bytes, str]:
    """The row's ``payload`` and ``payload_json``: sealed content stays sealed.

    ``raw`` is the payload as the hot log stores it, kept as it is (nothing
    to pack again); without it the payload is packed here, to the same
    bytes. An event read with its sealed blob (opened or not) is stored as
    the hot log stores it, metadata in clear plus the same blob, and
    rendered as its metadata with the marker: no key is needed and no
    plaintext is written.
    """
    path = f"{event.run_id}#{event.seq}"
    if event.sealed is None:
        return (pack(fields, path=path) if raw is None else raw), payload_json(fields)
    stored = store_fields(None, fields, event.run_id, event.seq, event.type, sealed=event.sealed)
    clear = {k: v for k, v in stored.items() if k != SEALED_KEY}
    clear[SEALED_MARKER] = True
    return (pack(stored, path=path) if raw is None else raw), payload_json(clear)


def row_json(data: EventData) -> str:
    """``payload_json`` of an opened payload (what SQL shows to a user with the keys)."""
    return payload_json(data.to_dict())


def events_to_table(
    events: Sequence[Event],
    *,
    workflow: str = "",
    version: str = "",
    runs: Mapping[str, tuple[str, str]] | None = None,
    stored: Sequence[StoredPayload] | None = None,
) -> pa.Table:
    """Rows for one or more runs' events (already in ``(run_id, seq)`` order).

    ``workflow`` and ``version`` fill the columns of runs whose RunStarted is
    not among ``events`` (a later segment of a run); ``runs`` gives them per
    run id instead, so that one call builds a whole file. ``stored`` holds, per
    event, its payload bytes and schema version as the hot log stores them
    (:meth:`~agentlog.eventlog._indexed.IndexedEventLog.read_stored`), copied
    into the ``payload`` column as they are; where an item is None (or
    ``stored`` is), the decoded payload is packed at the current schema.

    Why column by column: each column is built as a typed Arrow array from
    a list of plain values (``ts`` as int64 microseconds), because
    ``Table.from_pydict`` over datetimes cost a third of the archive's time,
    and once per file, not per run, because each array has a fixed cost.
    """
    workflows: list[str] = []
    versions: list[str] = []
    steps: list[Any] = []
    keys: list[str | None] = []
    names: list[str | None] = []
    attempts: list[Any] = []
    durations: list[Any] = []
    schema_vs: list[int] = []
    payloads: list[bytes] = []
    rendered: list[str] = []
    current_run, wf, ver = None, workflow, version
    task_names: dict[str, str] = {}
    raws: Sequence[StoredPayload] = stored if stored is not None else [None] * len(events)
    for event, raw in zip(events, raws, strict=True):
        data = event.data
        if event.run_id != current_run:
            current_run = event.run_id
            wf, ver = runs.get(current_run, (workflow, version)) if runs else (workflow, version)
            task_names = {}
        if isinstance(data, RunStarted):
            wf, ver = data.workflow, data.version
        fields = data.to_dict()
        get = fields.get
        workflows.append(wf)
        versions.append(ver)
        steps.append(get("step"))
        key = get("key")
        if isinstance(key, str):
            if data.type == "TaskStarted":
                task_names[key] = fields["name"]
            keys.append(key)
            # Completions carry their task's name too, so per-task stats need no join.
            names.append(task_names.get(key))
        else:
            keys.append(None)
            names.append(None)
        attempts.append(get("attempt"))
        durations.append(get("duration_ms"))
        payload, text = _stored(event, fields, None if raw is None else raw[0])
        schema_vs.append(event.schema_v if raw is None else raw[1])
        payloads.append(payload)
        rendered.append(text)
    columns = [
        pa.array([e.run_id for e in events], pa.string()),
        pa.array([e.seq for e in events], pa.int64()),
        pa.array([e.data.type for e in events], pa.string()),
        pa.array([epoch_us(e.ts) for e in events], _TS),
        pa.array(schema_vs, pa.int32()),
        pa.array([e.writer_epoch for e in events], pa.int64()),
        pa.array(workflows, pa.string()),
        pa.array(versions, pa.string()),
        pa.array(steps, pa.string()),
        pa.array(keys, pa.string()),
        pa.array(names, pa.string()),
        pa.array(attempts, pa.int32()),
        pa.array(durations, pa.float64()),
        pa.array(payloads, pa.binary()),
        pa.array(rendered, pa.string()),
    ]
    return pa.Table.from_arrays(columns, schema=EVENT_SCHEMA)


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
