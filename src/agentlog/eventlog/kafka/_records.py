"""What :mod:`agentlog.eventlog.kafka` stores on its compacted runs topic.

The runs topic (``<name>.runs``, one partition, ``cleanup.policy=compact``)
holds these kinds of record, told apart by their key:

``r:<run_id>``  the run's :class:`IndexEntry`: its :class:`RunInfo` (status,
                last seq, writer epoch and lease), the events partition the run
                lives on, the offset of its first event, and ``offset``: the
                events offset just after the event ``info.last_seq``. The
                writer rewrites it when it claims the run, when the status
                changes and every ``index_every`` events, inside the same
                transaction as those events.
``s:<run_id>:<seq>``  one snapshot of the run, with ``offset``: an events
                offset at or before the event ``seq + 1``, where a resume
                starts reading.
``q:<queue>``   a queue's table, kept by its admitter (partitioned layout;
                see :mod:`~agentlog.eventlog.kafka._queue_grants`).

A tombstone (no value) deletes a key. Values are msgpack maps of builtin
types, written with :func:`agentlog.eventlog.codec.pack`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentlog.eventlog._base import RunInfo, Snapshot
from agentlog.eventlog.codec import pack, unpack

__all__ = [
    "IndexEntry",
    "SnapshotEntry",
    "decode_index",
    "decode_snapshot",
    "encode_index",
    "encode_snapshot",
    "index_key",
    "parse_key",
    "snapshot_key",
]

_INFO_FIELDS = [f.name for f in dataclasses.fields(RunInfo)]


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """The run's index row plus where its events are on the events topic."""

    info: RunInfo
    partition: int
    first_offset: int
    offset: int
    #: The run's events were archived and pruned: none is read from the events topic.
    pruned: bool = False
    #: Seqs up to this one were archived and pruned; ``first_offset`` is where
    #: the events stored after them (a pruned run that goes on) start.
    archived_seq: int = 0


@dataclass(frozen=True, slots=True)
class SnapshotEntry:
    """A stored snapshot and the events offset a resume from it starts at."""

    snapshot: Snapshot
    offset: int


def index_key(run_id: str) -> bytes:
    """The runs-topic key of a run's index entry."""
    return f"r:{run_id}".encode()


def snapshot_key(run_id: str, seq: int) -> bytes:
    """The runs-topic key of one snapshot."""
    return f"s:{run_id}:{seq}".encode()


def parse_key(key: bytes) -> tuple[str, str, int]:
    """``(kind, run_id, seq)`` of a runs-topic key; kind is ``r``, ``s`` or ``q``
    (then ``run_id`` is the queue's name).

    Raises:
        ValueError: a key this module did not write.
    """
    text = key.decode()
    kind, _, rest = text.partition(":")
    if kind in ("r", "q") and rest:
        return kind, rest, 0
    if kind == "s":
        run_id, _, seq = rest.rpartition(":")
        if run_id and seq.isdigit():
            return "s", run_id, int(seq)
    raise ValueError(f"unexpected key {text!r}")


def encode_index(entry: IndexEntry) -> bytes:
    """The msgpack value of an index entry."""
    info = {name: getattr(entry.info, name) for name in _INFO_FIELDS}
    return pack(
        {
            "info": info,
            "partition": entry.partition,
            "first_offset": entry.first_offset,
            "offset": entry.offset,
            "pruned": entry.pruned,
            "archived_seq": entry.archived_seq,
        },
        path="index entry",
    )


def decode_index(raw: bytes) -> IndexEntry:
    """Rebuild an index entry. Raises ValueError on bytes that do not fit."""
    value = unpack(raw)
    if not isinstance(value, dict) or not isinstance(value.get("info"), dict):
        raise ValueError("index entry is not a map with an info map")
    fields: dict[str, Any] = value["info"]
    try:
        info = RunInfo(**{k: v for k, v in fields.items() if k in _INFO_FIELDS})
        pruned = bool(value.get("pruned", False))
        if pruned and not info.archived:  # written before RunInfo had ``archived``
            info = dataclasses.replace(info, archived=True)
        # Written before ``archived_seq``: a pruned entry archived every seq it names.
        archived_seq = int(value.get("archived_seq", info.last_seq if pruned else 0))
        return IndexEntry(
            info,
            int(value["partition"]),
            int(value["first_offset"]),
            int(value["offset"]),
            pruned,
            archived_seq,
        )
    except (KeyError, TypeError) as exc:
        raise ValueError(f"index entry does not fit: {exc}") from exc


def encode_snapshot(entry: SnapshotEntry) -> bytes:
    """The msgpack value of a snapshot record."""
    snap = entry.snapshot
    return pack(
        {
            "seq": snap.seq,
            "state": snap.state,
            "created_at": snap.created_at,
            "offset": entry.offset,
            "base": snap.base_seq,
        },
        path="snapshot",
    )


def decode_snapshot(run_id: str, raw: bytes) -> SnapshotEntry:
    """Rebuild a snapshot record. Raises ValueError on bytes that do not fit."""
    value = unpack(raw)
    if not isinstance(value, dict):
        raise ValueError("snapshot record is not a map")
    seq, state, created = value.get("seq"), value.get("state"), value.get("created_at")
    if not (isinstance(seq, int) and isinstance(state, bytes) and isinstance(created, datetime)):
        raise ValueError("snapshot record fields have the wrong types")
    base = value.get("base", 0)  # records written before delta snapshots have none
    if not isinstance(base, int):
        raise ValueError("snapshot record fields have the wrong types")
    return SnapshotEntry(Snapshot(run_id, seq, state, created, base), int(value.get("offset", 0)))
