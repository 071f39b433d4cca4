"""LangGraph checkpoints to events and back, through the serializer.

A checkpoint becomes a CheckpointSaved carrying only the channels whose
version changed (``new_versions``). A list channel whose new value starts
with its previous value (LangGraph's ``operator.add`` and ``add_messages``
grow lists that way) stores only the new items, with ``base`` naming the
version they extend; reading the value joins the chain back together. So a
3,000-step message loop stores each message once, not 3,000 times.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from agentlog.errors import (
    ChannelNotSerializableError,
    ForbiddenTypeError,
    MissingThreadIdError,
    NotSerializableError,
)
from agentlog.eventlog.codec import pack
from agentlog.eventlog.events import CheckpointSaved, EventData, WritesSaved
from agentlog.langgraph._thread import ThreadModel

__all__ = [
    "Heads",
    "build_tuple",
    "checkpoint_config",
    "checkpoint_event",
    "copy_events",
    "where",
    "writes_event",
]

#: (ns, channel) -> (version, private list value): the newest list value
#: decoded or written per channel, the base for the next delta. Private to
#: its items: a copy of what LangGraph put and never what a reader got, so an
#: item edited in place (a message's tool call, before ``update_state``)
#: differs from its head and the next checkpoint stores it.
Heads = dict[tuple[str, str], tuple[object, list[Any]]]

_MISSING = object()


def _dump(serde: SerializerProtocol, thread_id: str, what: str, value: Any) -> tuple[str, bytes]:
    try:
        return serde.dumps_typed(value)
    except ForbiddenTypeError as exc:
        why = f"it would be stored as {exc.what}, which the serializer refuses to load"
        raise ChannelNotSerializableError(thread_id, what, type(value).__name__, why) from exc
    except Exception as exc:  # serializers raise TypeError, ormsgpack errors, ...
        why = f"{type(exc).__name__}: {exc}"
        raise ChannelNotSerializableError(thread_id, what, type(value).__name__, why) from exc


def _load(serde: SerializerProtocol, kind: str, raw: bytes, where: Callable[[], str]) -> Any:
    """``serde.loads_typed``; a refusal names ``where()`` (written only then)."""
    try:
        return serde.loads_typed((kind, raw))
    except ForbiddenTypeError as exc:
        raise ForbiddenTypeError(exc.what, where()) from exc


#: Values that need no copy: nothing in them can change.
_IMMUTABLE = (str, int, float, bool, bytes, type(None))


def _fresh(value: Any) -> Any:
    """A deep copy of builtin data (a checkpoint's skeleton, its metadata, a
    list channel's items).

    ``copy.deepcopy`` keeps a memo of every object for cycles and shared
    references, which builtin data read back from msgpack has neither of: it
    was most of a warm ``get_tuple`` (issue 23). A put copies what it was
    given only after packing it (``_is_builtin``, the serializer), which a
    cycle fails. Anything else is deep-copied.
    """
    kind = type(value)
    if kind is dict:
        return {key: _fresh(item) for key, item in value.items()}
    if kind is list:
        return [_fresh(item) for item in value]
    if kind in _IMMUTABLE:
        return value
    return copy.deepcopy(value)


def _is_builtin(value: Any) -> bool:
    try:
        pack(value)
    except NotSerializableError:
        return False
    return True


def _extends(new: list[Any], base: list[Any]) -> bool:
    if len(new) < len(base):
        return False
    try:
        return bool(new[: len(base)] == base)
    except Exception:  # an item whose == raises (an array): store the whole value
        return False


def _may_extend(model: ThreadModel, ns: str, channel: str, version: Any, base: Any) -> bool:
    """True if ``version`` may be stored as a delta on ``base``.

    Only a version new to the thread may: LangGraph lists unchanged
    versions too (re-saving a checkpoint, as its migration tests do), and a
    delta that replaced the blob of a version its base's chain holds (its
    own, at the least) would make that chain loop.
    """
    return base is not None and base != version and (ns, channel, version) not in model.blobs


def checkpoint_event(
    serde: SerializerProtocol,
    model: ThreadModel,
    heads: Heads,
    ns: str,
    parent_id: str | None,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: dict[str, Any],
) -> CheckpointSaved:
    """The CheckpointSaved for ``checkpoint``; updates ``heads`` only once it is built."""
    tid = model.thread_id
    values = checkpoint["channel_values"]
    parent = model.get(ns, parent_id) if parent_id else None
    parent_versions = parent.checkpoint.get("channel_versions", {}) if parent else {}
    entries: list[list[Any]] = []
    new_heads: Heads = {}
    for channel, version in new_versions.items():
        if channel not in values:
            entries.append([channel, version, "empty", b"", None])
            continue
        value = values[channel]
        base_version = parent_versions.get(channel)
        if isinstance(value, list) and _may_extend(model, ns, channel, version, base_version):
            base = resolve(serde, model, heads, ns, channel, base_version, private=True)
            if isinstance(base, list) and base and _extends(value, base):
                added = value[len(base) :]
                kind, raw = _dump(serde, tid, channel, added)
                entries.append([channel, version, kind, raw, base_version])
                new_heads[(ns, channel)] = (version, [*base, *_fresh(added)])
                continue
        kind, raw = _dump(serde, tid, channel, value)
        entries.append([channel, version, kind, raw, None])
        if isinstance(value, list):
            new_heads[(ns, channel)] = (version, _fresh(value))
    skeleton: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, item in checkpoint.items():
        if key not in ("channel_values", "id"):
            # A copy: the caller may go on updating its checkpoint in place.
            if _is_builtin(item):
                skeleton[key] = _fresh(item)
            else:
                extra[key] = copy.deepcopy(item)
    meta = dict(metadata)
    builtin_meta = _is_builtin(meta)
    event = CheckpointSaved(
        ns=ns,
        checkpoint_id=checkpoint["id"],
        parent_id=parent_id,
        checkpoint=skeleton,
        metadata=meta if builtin_meta else {},
        values=entries,
        metadata_blob=None if builtin_meta else list(_dump(serde, tid, "(metadata)", meta)),
        extra=list(_dump(serde, tid, "(checkpoint)", extra)) if extra else None,
    )
    for channel in new_versions:  # a version rewritten (a thread deleted, then reused)
        heads.pop((ns, channel), None)
    heads.update(new_heads)
    return event


def writes_event(
    serde: SerializerProtocol,
    thread_id: str,
    ns: str,
    checkpoint_id: str,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> WritesSaved:
    """The WritesSaved for one task's writes (special channels get LangGraph's fixed idx)."""
    rows = [
        [channel, WRITES_IDX_MAP.get(channel, idx), *_dump(serde, thread_id, channel, value)]
        for idx, (channel, value) in enumerate(writes)
    ]
    return WritesSaved(ns, checkpoint_id, task_id, task_path, rows)


def resolve(
    serde: SerializerProtocol,
    model: ThreadModel,
    heads: Heads,
    ns: str,
    channel: str,
    version: Any,
    *,
    private: bool = False,
) -> Any:
    """A channel's value at ``version`` (``_MISSING`` if empty or unknown).

    List values come back as a deep copy (the private head itself when
    ``private``): the head cache makes the newest one cost a copy, not a
    decode, and the reader's edits must not reach the head.
    """
    head = heads.get((ns, channel))
    if head is not None and head[0] == version:
        return head[1] if private else copy.deepcopy(head[1])
    chain = model.chain(ns, channel, version)
    if not chain or chain[-1][0] == "empty":
        return _MISSING

    def where() -> str:
        return f"thread {model.thread_id!r} channel {channel!r} version {version!r}"

    value = _load(serde, chain[0][0], chain[0][1], where)
    if len(chain) == 1 and not isinstance(value, list):
        return value
    value = list(value)
    for kind, raw, _base in chain[1:]:
        value.extend(_load(serde, kind, raw, where))
    heads[(ns, channel)] = (version, value)
    return value if private else copy.deepcopy(value)


def where(config: RunnableConfig | None, method: str) -> tuple[str, str, str | None]:
    """(thread id, namespace, checkpoint id) of a config."""
    configurable = (config or {}).get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if thread_id is None or thread_id == "":
        raise MissingThreadIdError(method)
    return (
        str(thread_id),
        configurable.get("checkpoint_ns") or "",
        configurable.get("checkpoint_id"),
    )


def checkpoint_config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    """The config that names one checkpoint of a thread."""
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def build_tuple(
    serde: SerializerProtocol, model: ThreadModel, heads: Heads, data: CheckpointSaved
) -> CheckpointTuple:
    """The CheckpointTuple LangGraph expects for a stored checkpoint."""
    ns, cid, tid = data.ns, data.checkpoint_id, model.thread_id

    def where(channel: str | None = None) -> str:
        written = f"thread {tid!r} checkpoint {cid!r}"
        return written if channel is None else f"{written} write to {channel!r}"

    values = {}
    for channel, version in data.checkpoint.get("channel_versions", {}).items():
        value = resolve(serde, model, heads, ns, channel, version)
        if value is not _MISSING:
            values[channel] = value
    extra = _load(serde, data.extra[0], data.extra[1], where) if data.extra else {}
    # Copies, deep: LangGraph updates a checkpoint's channel_versions and
    # versions_seen in place (get_state applies pending writes to what it
    # read), which must not change the checkpoint the saver holds.
    skeleton = _fresh(data.checkpoint)
    checkpoint: Any = {**skeleton, **extra, "id": cid, "channel_values": values}
    metadata: Any = (
        _load(serde, data.metadata_blob[0], data.metadata_blob[1], where)
        if data.metadata_blob
        else _fresh(data.metadata)
    )
    pending = [
        (task_id, channel, _load(serde, kind, raw, functools.partial(where, channel)))
        for task_id, channel, kind, raw, _path in model.ordered_writes(ns, cid)
    ]
    return CheckpointTuple(
        config=checkpoint_config(tid, ns, cid),
        checkpoint=checkpoint,
        metadata=metadata,
        parent_config=checkpoint_config(tid, ns, data.parent_id) if data.parent_id else None,
        pending_writes=pending,
    )


def copy_events(model: ThreadModel) -> list[EventData]:
    """Events that give another thread every live checkpoint and write of ``model``.

    Each copied checkpoint carries every blob its values need (the whole
    value and its appends) not carried by an earlier copy, so the copy does
    not depend on the source's removed checkpoints.
    """
    copies: list[EventData] = []
    carried: set[tuple[str, str, Any]] = set()
    saved = [d for by_id in model.checkpoints.values() for d in by_id.values()]
    saved.sort(key=lambda d: model.saved_at[(d.ns, d.checkpoint_id)])
    for data in saved:
        values = []
        for channel, version in data.checkpoint.get("channel_versions", {}).items():
            key: Any = version
            while key is not None and (data.ns, channel, key) not in carried:
                blob = model.blobs.get((data.ns, channel, key))
                if blob is None:
                    break
                values.append([channel, key, *blob])
                carried.add((data.ns, channel, key))
                key = blob[2]
        copies.append(CheckpointSaved(**{**data.to_dict(), "values": values}))
        stored = model.writes.get((data.ns, data.checkpoint_id), {})
        for (task_id, idx), (_task, channel, kind, raw, path) in stored.items():
            copies.append(
                WritesSaved(data.ns, data.checkpoint_id, task_id, path, [[channel, idx, kind, raw]])
            )
    return copies
