"""One event as a display row: the one function the CLI and the web UI share.

:func:`event_row` turns an :class:`~agentlog.eventlog.Event` into plain
JSON-ready values (``seq``, ``ts``, ``type``, ``step``, ``payload`` and, for
content that could not be opened here, ``unreadable``). ``agentlog show``
prints these rows as a table or as JSON; the run page of ``agentlog ui``
lists them with a folded summary (:func:`short`) beside the full payload.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from agentlog.errors import ShreddedError
from agentlog.eventlog._sealing import CONTENT_FIELDS
from agentlog.eventlog.codec import jsonable
from agentlog.eventlog.events import Event, RunShredded, TaskCompleted, TaskFailed, TaskStarted
from agentlog.projector._checkpoints import display_payload

__all__ = ["NO_KEY", "SHREDDED", "event_row", "event_rows", "short", "unreadable_mark"]

#: What stands for content that was crypto-shredded (its data key destroyed).
SHREDDED = "«shredded»"
#: What stands for content encrypted with a key this process does not hold.
NO_KEY = "«encrypted: no key»"
#: The events of one task call, tied together by its idempotency key.
TASK_EVENTS = (TaskStarted, TaskCompleted, TaskFailed)


def short(value: Any, width: int = 70) -> str:
    """Compact JSON of ``value``, cut to ``width`` characters."""
    text = orjson.dumps(jsonable(value)).decode()
    return text if len(text) <= width else text[: width - 1] + "…"


def unreadable_mark(event: Event, *, shredded: bool = False) -> str | None:
    """:data:`SHREDDED` or :data:`NO_KEY` for an event whose content could not
    be opened here, else None.

    ``shredded``: the caller knows the run was shredded (its index row says
    so), so content not opened is gone for good even where no key store
    could tell that apart from a key that is only missing here.
    """
    if event.unreadable is None:
        return None
    gone = shredded or isinstance(event.unreadable, ShreddedError)
    return SHREDDED if gone else NO_KEY


def event_row(event: Event, *, shredded: bool = False) -> dict[str, Any]:
    """The event as a row: seq, time, type, step, and the rest of the payload.

    An event whose content could not be opened (shredded, or encrypted with
    no key here) shows its metadata, each content field as the mark, and
    ``"unreadable"``: the mark (``shredded``: as :func:`unreadable_mark`).
    """
    mark = unreadable_mark(event, shredded=shredded)
    if mark is None:
        payload = display_payload(event.data)
    else:
        fields = event.data.to_dict()
        payload = {k: mark if k in CONTENT_FIELDS else v for k, v in fields.items()}
    step = payload.pop("step", "") or payload.get("name", "")
    row = {
        "seq": event.seq,
        "ts": event.ts.isoformat(),
        "type": event.type,
        "step": step,
        "payload": jsonable(payload),
    }
    if mark is not None:
        row["unreadable"] = mark
    elif isinstance(event.data, RunShredded):
        row["unreadable"] = SHREDDED  # the record itself, for a reader that had the key
    return row


def event_rows(events: Iterable[Event]) -> list[dict[str, Any]]:
    """:func:`event_row` of each event, in order, each with ``task``: the task's
    name for task events ("" for others).

    A task's result and failure record only its key; the name and the step
    come from its ``TaskStarted`` among ``events``, so that every row of a
    task says which task and step it belongs to.
    """
    started: dict[str, tuple[str, str]] = {}
    rows = []
    for event in events:
        row = event_row(event)
        data = event.data
        key = getattr(data, "key", None) if isinstance(data, TASK_EVENTS) else None
        if isinstance(data, TaskStarted):
            started[data.key] = (data.step, data.name)
        step, name = started.get(key, ("", "")) if isinstance(key, str) else ("", "")
        row["step"] = row["step"] or step
        row["task"] = name
        rows.append(row)
    return rows
