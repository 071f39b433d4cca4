"""An archive file's rows as typed Arrow columns, from events or from stored rows.

The columns are those of :data:`EVENT_SCHEMA` (see :mod:`agentlog.archive._parquet`
for what each holds). :class:`Columns` gathers one file's rows and builds
each column once, as a typed Arrow array from a list of plain values (``ts``
as int64 microseconds), because ``Table.from_pydict`` over datetimes cost a
third of the archive's time and each array has a fixed cost.

Rows come two ways:

* :meth:`Columns.add_event`: a decoded :class:`Event` (a log that keeps no
  bytes, such as the memory log, or a row the fast path below declines);
* :meth:`Columns.add_rows`: the rows a SQL log stores
  (:meth:`~agentlog.eventlog._indexed.IndexedEventLog.read_rows`, checksum
  verified), whose payload map is unpacked once and read as it is: the
  lifted columns, ``payload_json`` and the run's status come from the map,
  with no payload object and no datetime built (issue 23: building them was
  about a third of the archive's CPU). The bytes go to ``payload`` as
  stored. A row is taken this way only when the map is exactly what the
  decoded path would render (the current schema version, the class's field
  names in order, plus ``_sealed`` last when sealed); any other row (an
  older schema version, an unknown type, a LangGraph event whose status
  depends on its content, a log with a cipher, which must check every sealed
  tag and refuse clear content where a run is sealed) is decoded as an
  Event and added as one, so both ways give the same cells. The map is read
  by ormsgpack (about half msgpack's cost here); a map it declines (an ext
  type: datetime, UUID, Decimal; a non-string key) is read by the codec's
  own :func:`~agentlog.eventlog.codec.unpack`. ormsgpack ignores bytes after
  the map where msgpack refuses them; a row's checksum is verified first, and
  agentlog never writes such bytes.

A sealed row is archived as stored: ``payload`` holds its clear metadata and
the sealed blob, ``payload_json`` the metadata with ``"_sealed": true``.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import orjson
import ormsgpack
import pyarrow as pa

from agentlog.crypto import PayloadCipher, is_sealed
from agentlog.errors import CorruptEventError
from agentlog.eventlog._indexed import StoredPayload
from agentlog.eventlog._row_format import epoch_us, event_from_row
from agentlog.eventlog._sealing import CONTENT_FIELDS, SEALED_KEY
from agentlog.eventlog.codec import jsonable, pack, store_fields, unpack
from agentlog.eventlog.events import (
    EVENT_TYPES,
    SCHEMA_V,
    Event,
    EventData,
    RunStarted,
    RunStatus,
    StepCompleted,
    status_after,
    status_after_event,
)

__all__ = [
    "EVENT_SCHEMA",
    "SEALED_MARKER",
    "Columns",
    "events_to_table",
    "payload_json",
    "row_json",
]

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

#: Event types whose effect on the run's status depends on content fields
#: (LangGraph's, see :func:`status_after_event`): always taken the decoded way.
_STATUS_BY_CONTENT = frozenset({"WritesSaved", "CheckpointSaved"})


def _shapes() -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Per event type: its stored keys in clear, and sealed (metadata, then ``_sealed``)."""
    shapes = {}
    for name, cls in EVENT_TYPES.items():
        if name in _STATUS_BY_CONTENT:
            continue
        names = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
        clear = tuple(n for n in names if n not in CONTENT_FIELDS)
        shapes[name] = (names, (*clear, SEALED_KEY))
    return shapes


_SHAPES = _shapes()


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
    return _json_bytes(fields).decode()


def _json_bytes(fields: dict[str, Any]) -> bytes:
    """:func:`payload_json` as UTF-8 (what the column is built from)."""
    try:
        return orjson.dumps(fields, default=_json_default)
    except TypeError:  # non-str keys or an int beyond 64 bits: the slow path copes
        return json.dumps(jsonable(fields), separators=(",", ":"), ensure_ascii=False).encode()


def _unpacked(payload: bytes) -> Any:
    """The codec's reading of a payload (its ext types, non-str keys), None if it
    does not decode (the decoded path then names the error)."""
    try:
        return unpack(payload)
    except ValueError:
        return None


def row_json(data: EventData) -> str:
    """``payload_json`` of an opened payload (what SQL shows to a user with the keys)."""
    return payload_json(data.to_dict())


def _stored(event: Event, fields: dict[str, Any], raw: bytes | None) -> tuple[bytes, bytes]:
    """The row's ``payload`` and ``payload_json`` of a decoded event.

    ``raw`` is the payload as the hot log stores it, kept as it is (nothing
    to pack again); without it the payload is packed here, to the same
    bytes. An event read with its sealed blob (opened or not) is stored as
    the hot log stores it, metadata in clear plus the same blob, and
    rendered as its metadata with the marker: no key is needed and no
    plaintext is written.
    """
    path = f"{event.run_id}#{event.seq}"
    if event.sealed is None:
        return (pack(fields, path=path) if raw is None else raw), _json_bytes(fields)
    stored = store_fields(None, fields, event.run_id, event.seq, event.type, sealed=event.sealed)
    clear = {k: v for k, v in stored.items() if k != SEALED_KEY}
    clear[SEALED_MARKER] = True
    return (pack(stored, path=path) if raw is None else raw), _json_bytes(clear)


class Columns:
    """One archive file's rows, gathered run by run, then built into a table."""

    def __init__(self) -> None:
        self.run_ids: list[str] = []
        self.seqs: list[int] = []
        self.types: list[str] = []
        self.ts_us: list[int] = []
        self.schema_vs: list[int] = []
        self.epochs: list[int] = []
        self.workflows: list[str] = []
        self.versions: list[str] = []
        self.steps: list[Any] = []
        self.keys: list[str | None] = []
        self.names: list[str | None] = []
        self.attempts: list[Any] = []
        self.durations: list[Any] = []
        self.payloads: list[bytes] = []
        self.rendered: list[bytes] = []
        """``payload_json`` as UTF-8 (Arrow takes the bytes as they are)."""
        self._task_names: dict[str, str] = {}
        self._run: str | None = None

    def __len__(self) -> int:
        return len(self.seqs)

    def _start_run(self, run_id: str) -> None:
        if run_id != self._run:
            self._run = run_id
            self._task_names = {}

    def add_event(self, event: Event, raw: StoredPayload, workflow: str, version: str) -> None:
        """One decoded event; ``raw`` its stored ``(payload, schema_v)``, or None to pack it."""
        self._start_run(event.run_id)
        self.run_ids.append(event.run_id)
        self.seqs.append(event.seq)
        self.types.append(event.data.type)
        self.ts_us.append(epoch_us(event.ts))
        self.epochs.append(event.writer_epoch)
        self.schema_vs.append(event.schema_v if raw is None else raw[1])
        self.payloads.append(self._add_decoded(event, raw, workflow, version))

    def _add_decoded(self, event: Event, raw: StoredPayload, workflow: str, version: str) -> bytes:
        """The lifted columns and ``payload_json`` of a decoded event; its ``payload``."""
        data = event.data
        fields = data.to_dict()
        get = fields.get
        self.workflows.append(workflow)
        self.versions.append(version)
        self.steps.append(get("step"))
        key = get("key")
        if isinstance(key, str):
            if data.type == "TaskStarted":
                self._task_names[key] = fields["name"]
            self.keys.append(key)
            # Completions carry their task's name too, so per-task stats need no join.
            self.names.append(self._task_names.get(key))
        else:
            self.keys.append(None)
            self.names.append(None)
        self.attempts.append(get("attempt"))
        self.durations.append(get("duration_ms"))
        payload, text = _stored(event, fields, None if raw is None else raw[0])
        self.rendered.append(text)
        return payload

    def add_rows(
        self,
        run_id: str,
        rows: Sequence[tuple[Any, ...]],
        *,
        workflow: str,
        version: str,
        status: str,
        steps: int,
        cipher: PayloadCipher | None,
        where: str,
    ) -> tuple[str, str, str, int]:
        """A run's verified stored rows, in seq order (see the module docstring).

        Returns the run's ``(workflow, version, status, steps)`` after them.

        Why one tight loop: at 300,000 events a second an event may cost
        about 3 µs in all, so the envelope columns are copied from the rows
        at once (they are the same either way) and the loop keeps its
        appends and lookups in locals.

        Raises:
            CorruptEventError, UnknownEventTypeError: a row that does not decode.
        """
        if not rows:
            return workflow, version, status, steps
        self._start_run(run_id)
        seqs, kinds, ts_us, schema_vs, epochs, payloads, _ = zip(*rows, strict=True)
        self.run_ids += [run_id] * len(rows)
        self.seqs += seqs
        self.types += kinds
        self.ts_us += ts_us
        self.schema_vs += schema_vs
        self.epochs += epochs
        self.payloads += payloads
        steps += kinds.count(StepCompleted.type)
        shapes = _SHAPES if cipher is None else {}
        task_names = self._task_names
        add_workflow, add_version = self.workflows.append, self.versions.append
        add_step, add_key, add_name = self.steps.append, self.keys.append, self.names.append
        add_attempt, add_duration = self.attempts.append, self.durations.append
        add_json, dumps, default = self.rendered.append, orjson.dumps, _json_default
        fast_unpack = ormsgpack.unpackb
        for row in rows:
            kind, schema_v, payload = row[1], row[3], row[5]
            shape = shapes.get(kind)
            fields: Any = None
            if shape is not None and schema_v == SCHEMA_V:
                try:
                    fields = fast_unpack(payload)
                except Exception:  # an ext type or odd keys: the codec's own reading
                    fields = _unpacked(payload)
                if type(fields) is dict:
                    keys = tuple(fields)
                    if keys != shape[0]:
                        blob = fields.get(SEALED_KEY) if keys == shape[1] else None
                        if isinstance(blob, bytes) and is_sealed(blob):
                            fields[SEALED_KEY] = True  # the marker, in the blob's place
                        else:
                            fields = None
                else:
                    fields = None
            if fields is None:
                event = event_from_row(run_id, row, where, cipher)
                data = event.data
                if isinstance(data, RunStarted):
                    workflow, version = data.workflow, data.version
                self._add_decoded(event, (payload, schema_v), workflow, version)
                status = status_after_event(status, data)
                continue
            get = fields.get
            if kind == "RunStarted":
                workflow, version = fields["workflow"], fields["version"]
            add_workflow(workflow)
            add_version(version)
            add_step(get("step"))
            key = get("key")
            if isinstance(key, str):
                if kind == "TaskStarted":
                    task_names[key] = fields["name"]
                add_key(key)
                add_name(task_names.get(key))
            else:
                add_key(None)
                add_name(None)
            add_attempt(get("attempt"))
            add_duration(get("duration_ms"))
            try:
                add_json(dumps(fields, default=default))
            except TypeError:  # as _json_bytes: non-str keys or an int beyond 64 bits
                add_json(_json_bytes(fields))
            if kind == "MessageSent" and get("wakes") is not None:
                status = RunStatus.RUNNING  # it answers the recv the run is parked on
            else:
                status = status_after(status, kind)
        return workflow, version, status, steps

    def table(self) -> pa.Table:
        """The rows as one table of :data:`EVENT_SCHEMA`.

        Raises:
            CorruptEventError: a lifted field of the wrong type (naming the run and seq).
        """
        values: list[list[Any]] = [
            self.run_ids,
            self.seqs,
            self.types,
            self.ts_us,
            self.schema_vs,
            self.epochs,
            self.workflows,
            self.versions,
            self.steps,
            self.keys,
            self.names,
            self.attempts,
            self.durations,
            self.payloads,
            self.rendered,
        ]
        columns = []
        for field, items in zip(EVENT_SCHEMA, values, strict=True):
            try:
                if field.name == "payload_json":
                    # UTF-8 already (orjson's, or json's text encoded): viewed as text as it is.
                    columns.append(pa.array(items, pa.binary()).view(pa.string()))
                    continue
                columns.append(pa.array(items, field.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise self._misfit(field, items, exc) from exc
        return pa.Table.from_arrays(columns, schema=EVENT_SCHEMA)

    def _misfit(self, field: pa.Field, items: list[Any], exc: Exception) -> CorruptEventError:
        """The error naming the first row whose ``field`` does not convert."""
        for i, item in enumerate(items):
            try:
                pa.array([item], field.type)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                return CorruptEventError(
                    self.run_ids[i],
                    self.seqs[i],
                    f"payload field for column {field.name!r} has the wrong type: {item!r}",
                    "",
                )
        return CorruptEventError(None, None, f"column {field.name!r}: {exc}", "")


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
    """
    columns = Columns()
    current_run, wf, ver = None, workflow, version
    raws: Sequence[StoredPayload] = stored if stored is not None else [None] * len(events)
    for event, raw in zip(events, raws, strict=True):
        if event.run_id != current_run:
            current_run = event.run_id
            wf, ver = runs.get(current_run, (workflow, version)) if runs else (workflow, version)
        if isinstance(event.data, RunStarted):
            wf, ver = event.data.workflow, event.data.version
        columns.add_event(event, raw, wf, ver)
    return columns.table()
