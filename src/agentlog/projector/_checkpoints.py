"""The fold of a LangGraph thread's events, and how people read them.

A thread written by :mod:`agentlog.langgraph` folds like any run: its state
``values`` are the channel values of the latest root checkpoint; a pending
interrupt write parks the run (``interrupts``, status waiting) until the
next checkpoint. The values are LangGraph's serialized bytes: builtin ones
(msgpack without extensions) are shown as they are, a LangGraph object as
``{"type": "module.Class", "value": ...}`` read as plain data (nothing is
imported), and anything else as ``"<type, N bytes>"``.

The fold applies a list channel's appended items to the value it shows, so
it is exact for a linear history; after a fork (a checkpoint whose parent is
not the latest) the saver itself, not this view, is the reference.
"""

from __future__ import annotations

from typing import Any

import msgpack

from agentlog.eventlog.events import (
    CheckpointSaved,
    CheckpointsRemoved,
    EventData,
    RunStatus,
    WritesSaved,
)
from agentlog.projector._state import RunState

__all__ = [
    "checkpoint_saved",
    "checkpoints_removed",
    "display_payload",
    "display_value",
    "writes_saved",
]

#: LangGraph's msgpack extensions that carry (module, name, arguments, ...).
_OBJECT_EXTS = frozenset({0, 1, 2, 4, 5})
_INTERRUPT, _RESUME = "__interrupt__", "__resume__"


def _plain(raw: bytes) -> Any:
    return msgpack.unpackb(raw, raw=False, strict_map_key=False, ext_hook=_show_ext)


def _show_ext(code: int, data: bytes) -> Any:
    inner = _plain(data)
    if code in _OBJECT_EXTS and isinstance(inner, list | tuple) and len(inner) >= 3:
        return {"type": f"{inner[0]}.{inner[1]}", "value": inner[2]}
    return f"<msgpack extension {code}, {len(data)} bytes>"


def display_value(kind: str, raw: bytes) -> Any:
    """A stored LangGraph value as people read it (never constructs a class)."""
    if kind == "null":
        return None
    if kind in ("bytes", "bytearray"):
        return raw
    if kind == "msgpack":
        try:
            return _plain(raw)
        except Exception:  # msgpack raises several types for what it cannot read
            pass
    return f"<{kind}, {len(raw)} bytes>"


def checkpoint_saved(state: RunState, data: CheckpointSaved) -> None:
    """A root checkpoint's changed channels update the values; subgraphs' do not."""
    if data.ns:
        return
    # Writes can be recorded before the checkpoint they belong to (LangGraph's
    # async durability): only interrupts of older checkpoints are over (ids
    # grow with time).
    state.interrupts = [
        i for i in state.interrupts if str(i.get("checkpoint_id", "")) >= data.checkpoint_id
    ]
    state.status = RunStatus.WAITING if state.interrupts else RunStatus.RUNNING
    step = data.metadata.get("step")
    if isinstance(step, int) and not isinstance(step, bool):
        state.superstep = step
    for channel, _version, kind, raw, base in data.values:
        if kind == "empty":
            state.values.pop(channel, None)
            continue
        shown = display_value(kind, raw)
        current = state.values.get(channel)
        if base is not None and isinstance(current, list) and isinstance(shown, list):
            state.values[channel] = current + shown
        else:
            state.values[channel] = shown
    live = data.checkpoint.get("channel_versions", {})
    for channel in [c for c in state.values if c not in live]:
        del state.values[channel]


def writes_saved(state: RunState, data: WritesSaved) -> None:
    """An interrupt write parks the thread; a resume write lets it go on."""
    if data.ns:
        return
    for channel, _idx, kind, raw in data.writes:
        if channel == _INTERRUPT:
            state.status = RunStatus.WAITING
            state.interrupts = [i for i in state.interrupts if i.get("id") != data.task_id]
            state.interrupts.append(
                {
                    "id": data.task_id,
                    "step": data.task_path,
                    "ns": data.ns,
                    "checkpoint_id": data.checkpoint_id,
                    "payload": display_value(kind, raw),
                }
            )
        elif channel == _RESUME:
            state.interrupts = [i for i in state.interrupts if i.get("id") != data.task_id]
            state.status = RunStatus.WAITING if state.interrupts else RunStatus.RUNNING


def checkpoints_removed(state: RunState, data: CheckpointsRemoved) -> None:
    """Deleting the whole thread empties its state; removing some keeps the latest's."""
    if data.everything:
        state.values, state.interrupts = {}, []


def display_payload(data: EventData) -> dict[str, Any]:
    """An event's payload for ``agentlog show``: LangGraph bytes decoded for people.

    A checkpoint shows its graph step (``step``, which the timeline puts in
    its step column), its id, parent and source, and the channels it changed;
    a task's writes show its node (LangGraph's task path ends with it) and the
    values it wrote.
    """
    if isinstance(data, CheckpointSaved):
        metadata = data.metadata or {}
        payload: dict[str, Any] = {
            "step": _graph_step(data.ns, metadata.get("step")),
            "changed": {
                channel: ("(empty)" if kind == "empty" else display_value(kind, raw))
                if base is None
                else {"appended": display_value(kind, raw)}
                for channel, _version, kind, raw, base in data.values or ()
            },
            "source": metadata.get("source"),
            "checkpoint": data.checkpoint_id,
            "parent": data.parent_id,
        }
        if data.metadata_blob is not None:
            payload["metadata"] = display_value(*data.metadata_blob)
        if data.extra is not None:
            payload["extra"] = display_value(*data.extra)
        return payload
    if isinstance(data, WritesSaved):
        node = data.task_path.rpartition(", ")[2] if data.task_path else "(resume)"
        return {
            "step": f"{data.ns} {node}" if data.ns else node,
            "writes": {
                channel: display_value(kind, raw) for channel, _idx, kind, raw in data.writes or ()
            },
            "task": data.task_path or data.task_id,
            "checkpoint": data.checkpoint_id,
        }
    return data.to_dict()


def _graph_step(ns: str, step: Any) -> str:
    """``step 3``, or ``child:<id> step 3`` inside a subgraph's namespace."""
    label = f"step {step}" if step is not None else "step ?"
    return f"{ns} {label}" if ns else label
