"""The bytes of a snapshot, and the chain that keeps append-only lists out of
every snapshot but the first.

A run whose state holds a list under the ``append`` reducer (a conversation)
would copy that list whole into every snapshot. Event stores do better: a
snapshot of such a list records only the items appended since the previous
snapshot (a *delta*), and names that previous snapshot (its *parent*) by seq
and checksum. Every ``base_every`` snapshots one stands alone again (a
*base*), so a chain is at most ``base_every`` links long, and the backends
keep a delta's base as long as they keep the delta
(:attr:`~agentlog.eventlog._base.Snapshot.base_seq`). Stored, a run's lists
then take about one copy, not one per kept snapshot.

Format 3 (this module) frames a snapshot as
``{"format": 3, "body": bytes, "checksum": xxh3(body)}`` where the body is
``{"state", "lists", "parent", "output_is_values"}``:

* ``state``: :meth:`RunState.to_dict`, with ``None`` in place of each list
  held in ``lists`` (its key keeps its place);
* ``lists``: ``key -> [start, [segment, ...]]``, each segment
  ``zlib(msgpack(items))`` of consecutive items from ``start`` on: ``start``
  0 holds the whole list; ``start`` > 0 extends the parent's list, which must
  have exactly ``start`` items. A segment is compressed once, when its items
  are new, and a later base reuses its bytes: the items of a list are
  compressed once per run, not once per snapshot;
* ``parent``: ``[seq, checksum]`` of the snapshot this one extends, or None;
* ``output_is_values``: the run's output is its final values (as
  ``RunCompleted`` records it), stored once.

Format 2 (a standalone ``{"format": 2, "state": bytes, "checksum"}``) still
decodes. Anything else is refused, and the loader falls back.
"""

from __future__ import annotations

import copy
import operator
import zlib
from dataclasses import dataclass, field
from typing import Any

from agentlog.eventlog._base import Snapshot
from agentlog.eventlog._packing import inflate
from agentlog.eventlog.codec import checksum, pack, unpack
from agentlog.eventlog.events import utcnow
from agentlog.projector._state import RunState

__all__ = ["FORMAT", "Frame", "SnapshotChain", "build_state", "open_frame"]

#: The format this module writes. Format 2 added the checksum, format 3 the
#: chain (deltas of append-only lists) and compressed list items.
FORMAT = 3
_STANDALONE_FORMAT = 2  # still read

#: The reducer whose lists only ever grow at the end (see reducers.append).
_APPEND = "append"


@dataclass(frozen=True, slots=True)
class Frame:
    """One snapshot's checked contents, not yet joined to its parent."""

    seq: int
    checksum: int
    state: dict[str, Any]
    lists: dict[str, tuple[int, list[bytes]]]
    parent: tuple[int, int] | None
    output_is_values: bool


def open_frame(snapshot: Snapshot) -> Frame:
    """Check and unpack one snapshot's bytes.

    Raises:
        ValueError, TypeError, KeyError: the bytes are not a snapshot this
            version can trust (corrupt, changed, or of an unknown format).
    """
    frame = unpack(snapshot.state)
    if not isinstance(frame, dict):
        raise ValueError("snapshot is not a map")
    version = frame.get("format")
    body = frame.get("body" if version == FORMAT else "state")
    if version not in (FORMAT, _STANDALONE_FORMAT):
        raise ValueError(f"snapshot format {version!r} is not {FORMAT} or {_STANDALONE_FORMAT}")
    if not isinstance(body, bytes) or frame.get("checksum") != checksum(body):
        raise ValueError("checksum mismatch: the snapshot changed after it was written")
    content = unpack(body)
    if version == _STANDALONE_FORMAT:
        return Frame(snapshot.seq, checksum(body), content, {}, None, False)
    lists = {str(k): (int(start), list(segs)) for k, (start, segs) in content["lists"].items()}
    parent = content["parent"]
    return Frame(
        snapshot.seq,
        checksum(body),
        content["state"],
        lists,
        None if parent is None else (int(parent[0]), int(parent[1])),
        bool(content["output_is_values"]),
    )


def build_state(chain: list[Frame], run_id: str) -> RunState:
    """The state of ``chain[0]``, rebuilt from its base (``chain[-1]``) up.

    Raises:
        ValueError (and friends): a link does not fit the one before it.
    """
    lists: dict[str, list[Any]] = {}
    for older, frame in zip([None, *chain[::-1]], chain[::-1], strict=False):
        if frame.parent is not None and (
            older is None or frame.parent != (older.seq, older.checksum)
        ):
            raise ValueError(f"snapshot {frame.seq} does not extend the snapshot below it")
        grown: dict[str, list[Any]] = {}
        for key, (start, segments) in frame.lists.items():
            items = []
            for segment in segments:
                part = unpack(inflate(segment, run_id, frame.seq))
                if not isinstance(part, list):
                    raise ValueError(f"list {key!r} of snapshot {frame.seq} is not a list")
                items += part
            if start:
                base = lists.get(key)
                if base is None or len(base) != start:
                    raise ValueError(f"list {key!r} of snapshot {frame.seq} has no base of {start}")
                base.extend(items)
                items = base
            grown[key] = items
        lists = grown
    top = chain[0]
    data = dict(top.state)
    data["values"] = {**data["values"], **lists}  # each list back in its key's place
    if top.output_is_values:
        data["output"] = copy.deepcopy(data["values"])  # the fold's output is its own copy
    state = RunState.from_dict(data)
    if state.seq != top.seq or state.run_id != run_id:
        raise ValueError("snapshot seq or run does not match its row")
    return state


@dataclass(frozen=True, slots=True)
class _Link:
    """What the chain remembers of the last snapshot it encoded."""

    seq: int
    checksum: int
    base_seq: int
    length: int  # snapshots in the chain so far, base included
    lengths: dict[str, int]  # each chained list's length then


@dataclass(slots=True)
class _Segments:
    """One append-only list as already compressed: the items (references,
    not copies) and the segments that hold them, in order."""

    items: list[Any] = field(default_factory=list)
    segments: list[bytes] = field(default_factory=list)
    #: Where each segment starts in ``items``.
    starts: list[int] = field(default_factory=list)

    def extend_to(self, current: list[Any], key: str) -> bool:
        """Catch up with ``current``: compress only the items not yet held,
        or start again if ``current`` is not the held items plus more.

        Returns:
            False if it started again (nothing held before is in ``current``).
        """
        kept = _extends(current, self.items)
        if not kept:
            self.items, self.segments, self.starts = [], [], []
        if len(current) > len(self.items):
            new = current[len(self.items) :]
            self.starts.append(len(self.items))
            self.segments.append(zlib.compress(pack(new, path=f"values.{key}")))
            self.items = list(current)
        return kept

    def since(self, start: int) -> list[bytes] | None:
        """The segments holding items ``start:``, or None if ``start`` falls
        inside a segment."""
        if start == len(self.items):
            return []
        if start not in self.starts:
            return None
        return self.segments[self.starts.index(start) :]


def _extends(current: list[Any], before: list[Any]) -> bool:
    """True if ``current`` is ``before`` plus items at the end.

    Identity, not equality: an item of an ``append`` list is never changed
    in place (the fold owns it), so the same objects in the same places are
    the same values, checked in microseconds instead of a deep compare.
    """
    return len(current) >= len(before) and all(map(operator.is_, before, current))


class SnapshotChain:
    """Encodes one writer's snapshots, each a delta of the one before.

    Only the writer that saves the snapshots may use a chain, in save order;
    after a snapshot is dropped or fails to save, call :meth:`restart` so the
    next one stands alone instead of naming a parent nobody stored.
    """

    def __init__(self, base_every: int = 1) -> None:
        self._base_every = base_every
        self._run_id = ""
        self._last: _Link | None = None
        self._lists: dict[str, _Segments] = {}

    def restart(self) -> None:
        """Make the next snapshot a base (standalone)."""
        self._last = None

    def encode(self, state: RunState) -> Snapshot:
        """``state`` as the chain's next snapshot (a delta when it can be)."""
        if state.run_id != self._run_id:
            self._run_id, self._last, self._lists = state.run_id, None, {}
        last = self._last
        if last is not None and last.length >= self._base_every:
            last = None
        values = dict(state.values)
        lists: dict[str, list[Any]] = {}
        held: dict[str, _Segments] = {}
        for key, value in state.values.items():
            if not (isinstance(value, list) and state.reducers.get(key) == _APPEND):
                continue
            segments = held[key] = self._lists.get(key) or _Segments()
            kept = segments.extend_to(value, key)
            start = 0 if last is None or not kept else last.lengths.get(key, 0)
            tail = segments.since(start) if start else None
            lists[key] = [start, tail] if tail is not None else [0, segments.segments]
            values[key] = None
        self._lists = held
        chained = last is not None and any(start for start, _ in lists.values())
        data = state.to_dict()
        data["values"] = values
        output_is_values = state.output is not None and state.output == state.values
        if output_is_values:
            data["output"] = None
        body = pack(
            {
                "state": data,
                "lists": lists,
                "parent": [last.seq, last.checksum] if chained and last else None,
                "output_is_values": output_is_values,
            },
            path="snapshot",
        )
        digest = checksum(body)
        lengths = {key: len(held[key].items) for key in lists}
        if chained and last is not None:
            self._last = _Link(state.seq, digest, last.base_seq, last.length + 1, lengths)
        else:
            self._last = _Link(state.seq, digest, state.seq, 1, lengths)
        frame = pack({"format": FORMAT, "body": body, "checksum": digest})
        return Snapshot(
            state.run_id, state.seq, frame, utcnow(), self._last.base_seq if chained else 0
        )
