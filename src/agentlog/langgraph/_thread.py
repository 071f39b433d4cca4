"""One LangGraph thread as folded from its events: checkpoints, blobs, writes.

A pure fold over CheckpointSaved, WritesSaved and CheckpointsRemoved (every
other event of the run is skipped). It keeps the stored typed bytes, never
decoded values: decoding is the serializer's job, in the saver. Channel
values are stored once per (namespace, channel, version), as the Postgres
saver stores blobs, so a checkpoint costs only what changed; a list channel
that grew by appending stores only the appended items (``base`` names the
version it extends).

The whole model round-trips through agentlog's own codec (builtin values
only) as a snapshot, so a new process reads the latest snapshot plus the
events after it instead of the thread's whole history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentlog.eventlog.codec import checksum, pack, unpack
from agentlog.eventlog.events import CheckpointSaved, CheckpointsRemoved, Event, WritesSaved

__all__ = ["Blob", "StoredWrite", "ThreadModel"]

#: Bumped whenever the snapshot's shape changes; other snapshots are ignored.
SNAPSHOT_FORMAT = "agentlog.langgraph/1"

#: (type, data, base): the serializer's typed bytes; ``base`` is the channel
#: version whose list value these bytes extend, or None for a whole value.
Blob = tuple[str, bytes, Any]
#: (task_id, channel, type, data, task_path)
StoredWrite = tuple[str, str, str, bytes, str]


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

    # -- fold -----------------------------------------------------------------------

    def apply(self, event: Event) -> None:
        """Fold one event of the thread's run in (events of other kinds are skipped)."""
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
            return
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
        """
        out: list[Blob] = []
        key: Any = version
        while key is not None:
            blob = self.blobs.get((ns, channel, key))
            if blob is None:
                return []
            out.append(blob)
            key = blob[2]
        out.reverse()
        return out

    @property
    def empty(self) -> bool:
        """True if the thread has no live checkpoint."""
        return not any(self.checkpoints.values())

    # -- snapshots ------------------------------------------------------------------

    def encode(self) -> bytes:
        """The model as snapshot bytes (agentlog's codec, with a checksum)."""
        body = pack(
            {
                "seq": self.seq,
                "checkpoints": [
                    # Without values: the blobs below hold them once.
                    [self.saved_at[(ns, cid)], {**data.to_dict(), "values": []}]
                    for ns, saved in self.checkpoints.items()
                    for cid, data in saved.items()
                ],
                "blobs": [[*key, *blob] for key, blob in self.blobs.items()],
                "writes": [
                    [ns, cid, idx, *write]
                    for (ns, cid), stored in self.writes.items()
                    for (_task, idx), write in stored.items()
                ],
            },
            path="langgraph snapshot",
        )
        return pack({"format": SNAPSHOT_FORMAT, "body": body, "checksum": checksum(body)})

    @classmethod
    def decode(cls, thread_id: str, raw: bytes) -> ThreadModel | None:
        """The model in snapshot bytes, or None if they are not a good one of ours."""
        try:
            frame = unpack(raw)
            if not isinstance(frame, dict) or frame.get("format") != SNAPSHOT_FORMAT:
                return None
            body = frame["body"]
            if not isinstance(body, bytes) or checksum(body) != frame.get("checksum"):
                return None
            data = unpack(body)
            model = cls(thread_id, seq=data["seq"])
            for seq, fields in data["checkpoints"]:
                model._checkpoint_saved(CheckpointSaved(**fields), seq)
            for ns, channel, version, kind, blob, base in data["blobs"]:
                model.blobs[(ns, channel, version)] = (kind, blob, base)
            for ns, cid, idx, task_id, channel, kind, blob, path in data["writes"]:
                stored = model.writes.setdefault((ns, cid), {})
                stored[(task_id, idx)] = (task_id, channel, kind, blob, path)
            return model
        except (ValueError, TypeError, KeyError) as exc:
            del exc  # an unusable snapshot: the caller reads the events instead
            return None
