"""A thread's snapshots: only what rebuilds its latest checkpoints, stored once.

A snapshot holds the latest checkpoint of each namespace (without values),
the blobs their values are made of, and their pending writes: never the
older checkpoints, which only ``list`` and a read of an old checkpoint need,
and which those read from the events. So loading a thread's latest
checkpoint costs the snapshot plus the events after it, whatever the
thread's length.

The blobs follow the runtime's delta-snapshot chain
(:mod:`agentlog.projector._snapshot_frames`): a message list is a chain of
blobs, each the items one checkpoint appended, so most blobs a snapshot
needs were already needed by the one before. A snapshot stores only the
blobs its chain does not hold yet, compressed once, and names its parent by
seq and checksum; every ``base_every`` snapshots one stands alone (a base),
and so does one for which the chain holds fewer of the bytes it needs than
it would add (a bounded state, whose values all changed since: a delta would
save nothing and cost a read per link), so a load reads at most that many
snapshots, and the backends keep a delta's base as long as the delta
(:attr:`Snapshot.base_seq`). Stored, a thread's
messages then take about one copy, not one per snapshot.

Frame: ``{"format": FORMAT, "body": bytes, "checksum": xxh3(body)}``; the body
is ``{"seq", "checkpoints": [[saved_at, CheckpointSaved without values]],
"writes": [[ns, cid, idx, task, channel, type, data, path]], "blobs":
zlib(msgpack([[ns, channel, version, type, data, base]])), "parent": [seq,
checksum] or None}``. The format is a string, which the projector's loader
takes as another component's snapshot and skips quietly.
"""

from __future__ import annotations

import zlib
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from agentlog._logging import get_logger
from agentlog.errors import CorruptEventError
from agentlog.eventlog._base import EventLog, Snapshot
from agentlog.eventlog._indexed import ColdRead
from agentlog.eventlog._packing import inflate
from agentlog.eventlog.codec import checksum, pack, unpack
from agentlog.eventlog.events import CheckpointSaved, utcnow
from agentlog.langgraph._thread import Blob, ThreadModel

__all__ = ["FORMAT", "Chain", "encode", "load", "load_fetched"]

_log = get_logger("agentlog.langgraph")

#: Bumped whenever the snapshot's shape changes; other snapshots are ignored.
FORMAT = "agentlog.langgraph/2"

#: Errors that make a snapshot untrustworthy (the thread is then folded from its events).
_UNUSABLE = (ValueError, TypeError, KeyError, IndexError, zlib.error, CorruptEventError)

BlobKey = tuple[str, str, Any]


@dataclass
class Chain:
    """What the writer remembers of the last snapshot it saved (or loaded)."""

    seq: int
    checksum: int
    base_seq: int
    length: int
    #: Blob keys stored in the chain since its base.
    stored: set[BlobKey] = field(default_factory=set)


def _worth_a_link(needed: dict[BlobKey, Blob], last: Chain) -> bool:
    """Whether the next snapshot should be a delta on ``last``'s chain: only if
    the chain already holds at least as many of the bytes needed now as the
    snapshot would add. A state that does not grow replaces its values at
    every step, so its chain holds only a few constant bytes (the input): a
    delta would store about as much as a base and cost each load one more
    read per link."""
    held = sum(len(blob[1]) for key, blob in needed.items() if key in last.stored)
    return held >= sum(len(blob[1]) for key, blob in needed.items() if key not in last.stored)


def encode(model: ThreadModel, last: Chain | None, base_every: int) -> tuple[Snapshot, Chain]:
    """The model's latest checkpoints as the next snapshot of ``last``'s chain.

    Raises:
        NeedsHistory: the model lacks a blob its latest checkpoints need.
    """
    needed = model.needed_blobs()
    if last is not None and (last.length >= base_every or not _worth_a_link(needed, last)):
        last = None
    new = {k: b for k, b in needed.items() if last is None or k not in last.stored}
    body = pack(
        {
            "seq": model.seq,
            "checkpoints": [
                [model.saved_at[(d.ns, d.checkpoint_id)], {**d.to_dict(), "values": []}]
                for d in model.heads()
            ],
            "writes": [
                [ns, cid, idx, *write]
                for (ns, cid), stored in model.kept_writes().items()
                for (_task, idx), write in stored.items()
            ],
            "blobs": zlib.compress(pack([[*key, *blob] for key, blob in new.items()])),
            "parent": None if last is None else [last.seq, last.checksum],
        },
        path="langgraph snapshot",
    )
    digest = checksum(body)
    raw = pack({"format": FORMAT, "body": body, "checksum": digest})
    if last is None:
        chain = Chain(model.seq, digest, model.seq, 1, set(new))
        base_seq = 0
    else:
        chain = Chain(model.seq, digest, last.base_seq, last.length + 1, last.stored | set(new))
        base_seq = last.base_seq
    return Snapshot(model.thread_id, model.seq, raw, utcnow(), base_seq), chain


def _open(snapshot: Snapshot) -> tuple[dict[str, Any], int]:
    frame = unpack(snapshot.state)
    if not isinstance(frame, dict) or frame.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} snapshot")
    body = frame["body"]
    digest = checksum(body) if isinstance(body, bytes) else None
    if digest is None or digest != frame.get("checksum"):
        raise ValueError("checksum mismatch: the snapshot changed after it was written")
    content = unpack(body)
    if content["seq"] != snapshot.seq:
        raise ValueError("snapshot seq does not match its row")
    return content, digest


def _steps(snapshot: Snapshot) -> Generator[int, Snapshot | None, tuple[ThreadModel, Chain]]:
    """The model in ``snapshot`` and its chain, following its parents down to
    its base: yields each parent's seq, and is sent the snapshot stored at or
    below it (None: none). Raises what makes the snapshot untrustworthy."""
    thread_id = snapshot.run_id
    top, digest = _open(snapshot)
    blobs: dict[BlobKey, Blob] = {}
    links, content, link = 1, top, snapshot
    while True:
        blobs_of = unpack(inflate(content["blobs"], thread_id, link.seq))
        for ns, channel, version, kind, raw, base in blobs_of:
            blobs.setdefault((ns, channel, version), (kind, raw, base))
        parent = content["parent"]
        if parent is None:
            break
        older = yield parent[0]
        if older is None or older.seq != parent[0] or older.seq >= link.seq:
            raise ValueError(f"the chain's snapshot {parent[0]} is missing")
        content, got = _open(older)
        if got != parent[1]:
            raise ValueError(f"snapshot {older.seq} is not the one its delta extends")
        link, links = older, links + 1
    model = ThreadModel(thread_id, seq=top["seq"], complete=False)
    for saved_at, fields in top["checkpoints"]:
        data = CheckpointSaved(**fields)
        model.checkpoints.setdefault(data.ns, {})[data.checkpoint_id] = data
        model.saved_at[(data.ns, data.checkpoint_id)] = saved_at
    for ns, cid, idx, task_id, channel, kind, raw, path in top["writes"]:
        stored = model.writes.setdefault((ns, cid), {})
        stored[(task_id, idx)] = (task_id, channel, kind, raw, path)
    model.blobs = blobs
    model.blobs = model.needed_blobs()  # raises if a link lacked one
    chain = Chain(snapshot.seq, digest, snapshot.base_seq or snapshot.seq, links, set(blobs))
    return model, chain


async def load(log: EventLog, snapshot: Snapshot) -> tuple[ThreadModel, Chain] | None:
    """The model in ``snapshot`` (following its chain to its base), and the chain
    to continue; None (logged) if any link is missing, corrupt or does not fit."""
    try:
        steps = _steps(snapshot)
        try:
            asked = next(steps)
            while True:
                older = await log.load_snapshot(snapshot.run_id, at_or_before=asked)
                asked = steps.send(older)
        except StopIteration as done:
            found: tuple[ThreadModel, Chain] = done.value
            return found
    except (*_UNUSABLE, LookupError) as exc:
        _log.warning(
            "thread snapshot ignored",
            run_id=snapshot.run_id,
            seq=snapshot.seq,
            reason=f"{type(exc).__name__}: {exc}",
        )
        return None


def load_fetched(fetched: ColdRead) -> tuple[ThreadModel, Chain] | None:
    """:func:`load` of the newest snapshot a cold read fetched, from the links
    it fetched, on the calling thread; None (not logged: the caller reads the
    thread the usual way, which logs) if a link was not fetched or anything
    is wrong."""
    try:
        steps = _steps(fetched.snapshots[0])
        try:
            asked = next(steps)
            while True:
                older = fetched.snapshot_at_or_before(asked)
                if older is None:
                    return None
                asked = steps.send(older)
        except StopIteration as done:
            found: tuple[ThreadModel, Chain] = done.value
            return found
    except (*_UNUSABLE, LookupError):
        return None
