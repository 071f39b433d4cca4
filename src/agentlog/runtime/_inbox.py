"""A run's messages as its writer records them: recv, publish, and messages
handed to the executor that drives the run in this process.

A message is an event of the run (``MessageSent``), so the run's inbox is a
fold of its log (``RunState.inbox``: per topic, oldest first). A step's
``ctx.recv(topic)`` takes the oldest undelivered message of the topic by
recording ``MessageReceived`` with the recv's call id (superstep, branch,
index), so a step that runs again gets the same message and a later recv the
next one. ``ctx.publish(key, value)`` records ``ValuePublished`` once per
call id of a superstep.

Only the run's writer may append to it. When the writer is this process's
executor, a sender hands its message over (:class:`Inbox`) and the executor
records it between supersteps and when the run would park
(:func:`record_handed`), so a message sent while a step runs is neither
refused nor lost, and a recv that found nothing a moment before it arrived
is answered at once.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from agentlog.errors import InvalidMessageError, RunEndedError
from agentlog.eventlog.events import MessageReceived, MessageSent, ValuePublished
from agentlog.projector._state import RunState, interrupt_id, interrupt_key, is_message
from agentlog.runtime._writer_protocol import Writer

__all__ = [
    "MAX_NAME",
    "Inbox",
    "check_name",
    "publish_value",
    "record_handed",
    "take_message",
    "waiting_recv",
]

#: The longest topic, published key or idempotency key, in characters.
MAX_NAME = 256


def check_name(what: str, name: object) -> str:
    """Return ``name`` if it is non-empty text of at most :data:`MAX_NAME`
    characters.

    Raises:
        InvalidMessageError: it is not; ``what`` names it in the message.
    """
    if not isinstance(name, str) or not name or len(name) > MAX_NAME:
        shown = repr(name) if len(repr(name)) <= 80 else f"{repr(name)[:77]}..."
        raise InvalidMessageError(
            f"a message {what} must be non-empty text of at most {MAX_NAME} characters, "
            f"got {shown}; nothing was recorded"
        )
    return name


def waiting_recv(state: RunState, topic: str, woken: Collection[str] = ()) -> str | None:
    """The id of the oldest open ``recv`` interrupt on ``topic``: the one a
    message on it answers (None: no step waits on it). ``woken``: ids that
    messages before it answered already (not folded into ``state`` yet)."""
    for entry in state.interrupts:
        payload = entry.get("payload")
        if (
            is_message(entry)
            and isinstance(payload, dict)
            and payload.get("topic") == topic
            and interrupt_id(entry) not in woken
        ):
            return interrupt_id(entry)
    return None


def take_message(
    writer: Writer, topic: str, step: str, superstep: int, branch: int, index: int
) -> tuple[bool, Any]:
    """The message the recv call ``index`` of a step gets: the one it got
    before (a re-executed step), else the oldest undelivered one of ``topic``,
    whose delivery is recorded now. ``(False, None)`` when there is none."""
    state = writer.state
    key = interrupt_key(superstep, branch, index)
    got = state.received.get(key)
    if got is None:
        queue = state.inbox.get(topic)
        if not queue:
            return False, None
        writer.emit(MessageReceived(topic, queue[0]["seq"], step, superstep, branch, index))
        got = state.received[key]
    return True, copy.deepcopy(got["value"])  # the step may change it; the fold's stays


def publish_value(
    writer: Writer, key: str, value: Any, step: str, superstep: int, branch: int, index: int
) -> bool:
    """Record the publish call ``index`` of a step, unless this superstep
    recorded it already (the step runs again). Returns whether it recorded."""
    if interrupt_key(superstep, branch, index) in writer.state.published_calls:
        return False
    writer.emit(ValuePublished(key, value, step, superstep, branch, index))
    return True


@dataclass(slots=True)
class _Handed:
    """A message handed to the executor, and the sender waiting on it."""

    topic: str
    value: Any
    key: str
    future: asyncio.Future[bool]
    token: Any = None


@dataclass(slots=True)
class Inbox:
    """Messages handed to the executor that drives a run in this process.

    Only that executor may append to the run, so a sender in this process
    (a caller of ``Runtime.send``, or a worker applying a client's command)
    puts its message here and waits for its future: True once recorded,
    False when a message with its idempotency key was recorded before.
    """

    _items: list[_Handed] = field(default_factory=list)
    #: Futures by the token the sender gave (a command's position), so a
    #: command handed again while it waits is not recorded twice.
    _by_token: dict[Any, asyncio.Future[bool]] = field(default_factory=dict)

    def __len__(self) -> int:
        """How many messages wait to be recorded."""
        return len(self._items)

    def put(self, topic: str, value: Any, key: str, token: Any = None) -> asyncio.Future[bool]:
        """Hand a message over; its future says how it was recorded."""
        if token is not None and token in self._by_token:
            return self._by_token[token]
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._items.append(_Handed(topic, value, key, future, token))
        if token is not None:
            self._by_token[token] = future
        return future

    def withdraw(self, future: asyncio.Future[bool]) -> bool:
        """Take back a message not taken yet (the executor ended without
        recording it, or its sender stopped). False: the executor took it."""
        kept = [item for item in self._items if item.future is not future]
        self._by_token = {t: f for t, f in self._by_token.items() if f is not future}
        withdrawn, self._items = len(kept) < len(self._items), kept
        return withdrawn

    def take(self) -> list[_Handed]:
        """Every message handed over and not yet taken, in order."""
        items, self._items = self._items, []
        return items


async def record_handed(writer: Writer, inbox: Inbox) -> bool:
    """Record the messages handed to ``inbox`` (an input: durable in every
    mode before this returns) and tell their senders.

    Returns:
        True if one of them answered an open ``recv`` of the run, which then
        runs again (its status is running).
    """
    items = inbox.take()
    if not items:
        return False
    state, done, woke = writer.state, [], False
    try:
        for item in items:
            if state.is_terminal:
                item.future.set_exception(
                    RunEndedError(
                        f"run {state.run_id!r} is {state.status}; no step will receive "
                        f"the message on {item.topic!r}, so nothing was recorded"
                    )
                )
                continue
            if item.key and item.key in state.message_keys:
                done.append((item, False))
                continue
            wakes = waiting_recv(state, item.topic)
            writer.emit(MessageSent(item.topic, item.value, item.key, wakes))
            woke = woke or wakes is not None
            done.append((item, True))
        await writer.persist()
    except BaseException as exc:
        for item, _ in done:
            if not item.future.done():
                item.future.set_exception(exc)
        raise
    for item, recorded in done:
        if not item.future.done():
            item.future.set_result(recorded)
    return woke
