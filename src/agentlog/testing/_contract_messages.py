"""The contract's messages (``Runtime.send``, ``ctx.recv``, ``ctx.publish``):
their events are stored whole, the run index reads a park on a ``recv`` as
waiting with its timeout as the wake-up, and a message that answers it
(``MessageSent.wakes``) as running again, on every backend alike."""

from __future__ import annotations

from datetime import timedelta

from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import (
    InterruptRaised,
    MessageReceived,
    MessageSent,
    RunStatus,
    ValuePublished,
)
from agentlog.testing._contract_base import ContractBase
from agentlog.testing._events import T0, ev, read_all, started

__all__ = ["MessagesContract"]


class MessagesContract(ContractBase):
    """Messages into a run and values out of it (part of :class:`EventLogContract`)."""

    async def test_messages_are_stored_whole_and_move_the_run_index(self, log: EventLog) -> None:
        due = T0 + timedelta(minutes=5)
        events = [
            ev("m", 1, started("inbox")),
            ev("m", 2, MessageSent("orders", {"id": 1, "raw": b"\x00\xff"}, "order-1")),
            ev("m", 3, MessageReceived("orders", 2, "take", 0, 0, 0)),
            ev("m", 4, ValuePublished("status", ["half", 0.5, None], "take", 0, 0, 0)),
            ev("m", 5, InterruptRaised("take", 0, 0, 1, {"topic": "orders"}, None, due, "message")),
        ]
        await log.append(events)
        info = await log.get_run("m")
        assert (info.status, info.wake_at, info.last_seq) == (RunStatus.WAITING, due, 5)
        # A message on another topic answers nothing: the run stays parked.
        other = ev("m", 6, MessageSent("audit", "noted"))
        await log.append([other])
        info = await log.get_run("m")
        assert (info.status, info.wake_at) == (RunStatus.WAITING, due)
        wakes = ev("m", 7, MessageSent("orders", {"id": 2}, "order-2", wakes="0:0:1"))
        await log.append([wakes], durable=False)
        info = await log.get_run("m")
        assert (info.status, info.wake_at, info.last_seq) == (RunStatus.RUNNING, None, 7)
        assert await read_all(log, "m") == [*events, other, wakes]
