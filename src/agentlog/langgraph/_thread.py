"""One LangGraph thread as folded from its events: checkpoints, blobs, writes.

A pure fold over CheckpointSaved, WritesSaved and CheckpointsRemoved (every
other event of the run is skipped). It keeps the stored typed bytes, never
decoded values: decoding is the serializer's job, in the saver. Channel
values are stored once per (namespace, channel, version), as the Postgres
saver stores blobs, so a checkpoint costs only what changed; a list channel
that grew by appending stores only the appended items (``base`` names the
version it extends).

A model is *complete* when folded from the thread's first event: it holds
every live checkpoint. One rebuilt from a snapshot (``_snapshot``) holds only
the latest checkpoint of each namespace, the blobs their values need and
their pending writes, plus whatever the events after the snapshot added: it
answers for the latest checkpoints, and says :class:`NeedsHistory` when asked
for anything older, so the caller folds the whole thread instead. A saver
trims its model the same way after each snapshot, so its memory too is
bounded by the snapshot interval.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agentlog.errors import CorruptEventError
from agentlog.eventlog.events import CheckpointSaved, CheckpointsRemoved, Event, WritesSaved

__all__ = ["ABSENT", "Blob", "NeedsHistory", "StoredWrite", "ThreadModel"]

#: The kind of a blob that records that a version has no stored value (a
#: snapshot says so explicitly, as it cannot tell "none" from "older").
ABSENT = "absent"

#: (type, data, base): the serializer's typed bytes; ``base`` is the channel
#: version whose list value these bytes extend, or None for a whole value.
Blob = tuple[str, bytes, Any]
#: (task_id, channel, type, data, task_path)
StoredWrite = tuple[str, str, str, bytes, str]


class NeedsHistory(LookupError):
    """A model rebuilt from a snapshot does not hold what was asked: fold the thread."""


@dataclass
class ThreadModel:
    """The live checkpoints of one thread, as of ``seq``."""

    thread_id: str
    seq: int = 0
    #: ns -> checkpoint id -> its CheckpointSaved (the live ones only).
    checkpoints: dict[str, dict[str, CheckpointSaved]] = field(default_factory=dict)
    #: (ns, channel, version) -> blob.
    blobs: dict[tuple[str, str, Any], Blob] = field(default_factory=dict)
    #: (ns, checkpoint id) -> (task_id, idx) -> write.
    writes: dict[tuple[str, str], dict[tuple[str, int], StoredWrite]] = field(default_factory=dict)
    #: The seq of the event that saved each live checkpoint, for ordering copies.
    saved_at: dict[tuple[str, str], int] = field(default_factory=dict)
    #: True if folded from the first event (every live checkpoint is here).
    complete: bool = True
    #: Set when a removal hit a model that is not complete: only the thread's
    #: whole history can tell which checkpoint is now a namespace's latest.
    needs_history: bool = False

    # -- fold -----------------------------------------------------------------------

    def apply(self, event: Event) -> None:
        """Fold one event of the thread's run in (events of other kinds are skipped).

        Raises:
            ShreddedError, KeyStoreMissingError and the other EncryptionErrors:
                the event's content is sealed and could not be opened here
                (never folded as None).
        """
        if event.unreadable is not None:
            raise event.unreadable
        data = event.data
        if isinstance(data, CheckpointSaved):
            self._checkpoint_saved(data, event.seq)
        elif isinstance(data, WritesSaved):
            self._writes_saved(data)
        elif isinstance(data, CheckpointsRemoved):
            self._removed(data)
        self.seq = event.seq

    def _checkpoint_saved(self, data: CheckpointSaved, seq: int) -> None:
        self.checkpoints.setdefault(data.ns, {})[data.checkpoint_id] = data
        self.saved_at[(data.ns, data.checkpoint_id)] = seq
        for channel, version, kind, raw, base in data.values:
            self.blobs[(data.ns, channel, version)] = (kind, raw, base)

    def _writes_saved(self, data: WritesSaved) -> None:
        stored = self.writes.setdefault((data.ns, data.checkpoint_id), {})
        for channel, idx, kind, raw in data.writes:
            key = (data.task_id, idx)
            # A regular write is saved once (a retried task writes it again);
            # a special channel's write (idx < 0: error, interrupt, resume)
            # replaces the task's earlier one, as WRITES_IDX_MAP intends.
            if idx >= 0 and key in stored:
                continue
            stored[key] = (data.task_id, channel, kind, raw, data.task_path)

    def _removed(self, data: CheckpointsRemoved) -> None:
        if data.everything:
            self.checkpoints, self.blobs, self.writes, self.saved_at = {}, {}, {}, {}
            self.complete, self.needs_history = True, False  # nothing older is live
            return
        if not self.complete:
            self.needs_history = True
        for ns, checkpoint_id in data.checkpoints:
            self.checkpoints.get(ns, {}).pop(checkpoint_id, None)
            self.writes.pop((ns, checkpoint_id), None)
            self.saved_at.pop((ns, checkpoint_id), None)
        # Blobs stay: a kept checkpoint may name a version an older one wrote.

    # -- queries --------------------------------------------------------------------

    def latest(self, ns: str) -> CheckpointSaved | None:
        """The newest live checkpoint of ``ns`` (ids grow with time), or None."""
        saved = self.checkpoints.get(ns)
        return saved[max(saved)] if saved else None

    def get(self, ns: str, checkpoint_id: str) -> CheckpointSaved | None:
        """A live checkpoint, or None."""
        return self.checkpoints.get(ns, {}).get(checkpoint_id)

    def ordered_writes(self, ns: str, checkpoint_id: str) -> list[StoredWrite]:
        """The checkpoint's pending writes in LangGraph's order (task path, task, idx)."""
        stored = self.writes.get((ns, checkpoint_id), {})
        return [stored[k] for k in sorted(stored, key=lambda k: (stored[k][4], k[0], k[1]))]

    def chain(self, ns: str, channel: str, version: Any) -> list[Blob]:
        """The blobs that make up a value: a whole one, then the appends, oldest first.

        Empty if no blob was stored for that version (the channel is empty).

        Raises:
            NeedsHistory: the model is not complete and does not hold the blob.
            CorruptEventError: the chain loops back on itself.
        """
        out: list[Blob] = []
        for key, blob in self._links(ns, channel, version):
            if blob is None:
                if not self.complete:
                    raise NeedsHistory(f"blob {ns!r} {channel!r} {key!r}")
                return []
            if blob[0] == ABSENT:
                return []
            out.append(blob)
        out.reverse()
        return out

    def _links(self, ns: str, channel: str, version: Any) -> Iterator[tuple[Any, Blob | None]]:
        """(version, blob) from ``version`` down its bases; the blob is None where
        the chain stops at a version with no stored blob.

        A version met twice is a chain that loops (a delta naming itself or a
        later delta as its base): reading on would never end, so it is corrupt.
        """
        seen: set[Any] = set()
        key: Any = version
        while key is not None:
            if key in seen:
                raise CorruptEventError(
                    self.thread_id,
                    self._stored_at(ns, channel, key),
                    f"the value of channel {channel!r} at version {version!r} is a chain of "
                    f"deltas that loops back to version {key!r}",
                    f"langgraph thread, namespace {ns!r}",
                )
            seen.add(key)
            blob = self.blobs.get((ns, channel, key))
            yield key, blob
            if blob is None:
                return
            key = blob[2]

    def _stored_at(self, ns: str, channel: str, version: Any) -> int | None:
        """The seq of the live checkpoint that stored the blob (None if unknown),
        for an error message."""
        found = [
            self.saved_at[(ns, data.checkpoint_id)]
            for data in self.checkpoints.get(ns, {}).values()
            if any(v[0] == channel and v[1] == version for v in data.values)
        ]
        return max(found) if found else None

    def heads(self) -> list[CheckpointSaved]:
        """The latest live checkpoint of each namespace."""
        return [saved[max(saved)] for saved in self.checkpoints.values() if saved]

    def needed_blobs(self) -> dict[tuple[str, str, Any], Blob]:
        """Every blob the latest checkpoints' values are made of (ABSENT for none).

        Raises:
            NeedsHistory: the model is not complete and lacks one of them.
            CorruptEventError: a chain loops back on itself.
        """
        needed: dict[tuple[str, str, Any], Blob] = {}
        for data in self.heads():
            for channel, version in data.checkpoint.get("channel_versions", {}).items():
                for key, blob in self._links(data.ns, channel, version):
                    if blob is None and not self.complete:
                        raise NeedsHistory(f"blob {data.ns!r} {channel!r} {key!r}")
                    if blob is None or (blob[0] == ABSENT and key != version):
                        # A broken chain reads as empty (as ``chain`` does).
                        needed[(data.ns, channel, version)] = (ABSENT, b"", None)
                        break
                    needed[(data.ns, channel, key)] = blob
        return needed

    def kept_writes(self) -> dict[tuple[str, str], dict[tuple[str, int], StoredWrite]]:
        """The writes of each namespace's latest checkpoint, and of any newer one
        (saved before its checkpoint, as LangGraph's async durability may)."""
        latest = {data.ns: data.checkpoint_id for data in self.heads()}
        return {
            (ns, cid): dict(stored)
            for (ns, cid), stored in self.writes.items()
            if stored and cid >= latest.get(ns, "")
        }

    def trim(self) -> None:
        """Keep only what a snapshot holds (see the module docstring)."""
        heads = self.heads()
        blobs, writes = self.needed_blobs(), self.kept_writes()
        self.checkpoints = {d.ns: {d.checkpoint_id: d} for d in heads}
        self.saved_at = {
            (d.ns, d.checkpoint_id): self.saved_at[(d.ns, d.checkpoint_id)] for d in heads
        }
        self.blobs, self.writes, self.complete = blobs, writes, False

    @property
    def empty(self) -> bool:
        """True if the thread has no live checkpoint."""
        return not any(self.checkpoints.values())
