"""A file's tasks table folded in Python from the columns the archiver built.

The tasks table (:mod:`agentlog.archive._tasks_table`) is defined by
:data:`~agentlog.archive._tasks_table.PARTS_SQL`, a DuckDB grouping. Running
that query costs about 4 ms a file whatever its size (planning, the JSON
operator, the Arrow round trip) plus about 0.5 µs an event: at a file of
1,000 events, more than the rest of the file's encoding. The archiver already
holds the file's rows as Python lists (:class:`~agentlog.archive._rows.Columns`),
so :func:`tasks_of` folds them here, once, into the same rows with the same
aggregate rules as the SQL (pinned against it by
``tests/archive/test_tasks_fold.py``):

* a task's starts give ``attempts``, the first start's non-NULL ``name``
  and ``step``, the earliest ``started``;
* its outcomes (completions and failures) give ``outcome`` and
  ``outcome_seq`` (the highest seq), the latest ``ended``, and
  ``duration_ms`` with ``duration_seq`` from the highest-seq outcome that
  has a duration;
* a failure with an ``error`` (or a sealed one) gives ``error_seq``,
  ``error_schema_v`` and ``error_json`` from the highest-seq such failure,
  and ``error_payload`` from the highest-seq such failure that is sealed
  (DuckDB's ``arg_max`` skips a NULL argument).
"""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa

from agentlog.archive._rows import SEALED_MARKER, Columns
from agentlog.archive._tasks_table import TASKS_SCHEMA

__all__ = ["tasks_of"]

_STARTED, _COMPLETED, _FAILED = "TaskStarted", "TaskCompleted", "TaskFailed"
_OUTCOMES = frozenset({_COMPLETED, _FAILED})

# A part's slots, in TASKS_SCHEMA's order after run_id and task_key, plus the
# seq of the sealed failure that gave error_payload.
(
    _NAME,
    _STEP,
    _ATTEMPTS,
    _STARTED_AT,
    _OUTCOME,
    _OUTCOME_SEQ,
    _ENDED,
    _DURATION,
    _DURATION_SEQ,
    _ERROR_SEQ,
    _ERROR_SCHEMA_V,
    _ERROR_PAYLOAD,
    _ERROR_JSON,
    _ERROR_PAYLOAD_SEQ,
) = range(14)


def _failure(text: bytes) -> tuple[bool, bool]:
    """Whether a failure's ``payload_json`` shows an error (``->> 'error'`` is
    not NULL, or the row is sealed), and whether it is sealed."""
    fields = orjson.loads(text)
    sealed = fields.get(SEALED_MARKER)
    is_sealed = sealed is True or sealed == "true"  # what ->> '_sealed' = 'true' matches
    return (fields.get("error") is not None or is_sealed), is_sealed


def tasks_of(columns: Columns) -> pa.Table:
    """The tasks table of the file whose rows ``columns`` holds (after
    :meth:`~agentlog.archive._rows.Columns.table` accepted them), sorted by
    run and task key."""
    parts: dict[tuple[str, str], list[Any]] = {}
    types, seqs, ts_us = columns.types, columns.seqs, columns.ts_us
    run_ids = columns.run_ids
    for i, key in enumerate(columns.keys):
        if key is None:
            continue
        kind = types[i]
        if kind != _STARTED and kind not in _OUTCOMES:
            continue
        part = parts.get((run_ids[i], key))
        if part is None:
            part = parts[(run_ids[i], key)] = [None, None, 0, *([None] * 11)]
        seq, ts = seqs[i], ts_us[i]
        if kind == _STARTED:
            if part[_NAME] is None:
                part[_NAME] = columns.names[i]
            if part[_STEP] is None:
                part[_STEP] = columns.steps[i]
            part[_ATTEMPTS] += 1
            if part[_STARTED_AT] is None or ts < part[_STARTED_AT]:
                part[_STARTED_AT] = ts
            continue
        if part[_OUTCOME_SEQ] is None or seq > part[_OUTCOME_SEQ]:
            part[_OUTCOME], part[_OUTCOME_SEQ] = kind, seq
        if part[_ENDED] is None or ts > part[_ENDED]:
            part[_ENDED] = ts
        duration = columns.durations[i]
        if duration is not None and (part[_DURATION_SEQ] is None or seq > part[_DURATION_SEQ]):
            part[_DURATION], part[_DURATION_SEQ] = duration, seq
        if kind != _FAILED:
            continue
        shows, sealed = _failure(columns.rendered[i])
        if not shows:
            continue
        if part[_ERROR_SEQ] is None or seq > part[_ERROR_SEQ]:
            part[_ERROR_SEQ], part[_ERROR_SCHEMA_V] = seq, columns.schema_vs[i]
            part[_ERROR_JSON] = columns.rendered[i]
        if sealed and (part[_ERROR_PAYLOAD_SEQ] is None or seq > part[_ERROR_PAYLOAD_SEQ]):
            part[_ERROR_PAYLOAD], part[_ERROR_PAYLOAD_SEQ] = columns.payloads[i], seq
    order = sorted(parts)
    rows = [parts[k] for k in order]
    values: list[list[Any]] = [[k[0] for k in order], [k[1] for k in order]]
    values += [[row[slot] for row in rows] for slot in range(_ERROR_PAYLOAD_SEQ)]
    arrays = []
    for field, items in zip(TASKS_SCHEMA, values, strict=True):
        if field.name == "error_json":  # UTF-8 already, as payload_json
            arrays.append(pa.array(items, pa.binary()).view(pa.string()))
        else:
            arrays.append(pa.array(items, field.type))
    return pa.Table.from_arrays(arrays, schema=TASKS_SCHEMA)
