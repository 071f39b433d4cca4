"""Messages stored in a run's mailbox, moved into its history by its writer.

A sender on a direct-write log (SQLite, PostgreSQL, Redis) stores a message
in the run's mailbox (:mod:`agentlog.eventlog._mailbox`) instead of waiting
for the writer that holds the run. The executor moves the stored messages
into the history as ``MessageSent`` events, in the order they were stored
(:func:`take_stored`), before the run parks or ends, and at each superstep
boundary once the run has had a message (a run that takes none asks the
store nothing between its steps). Before a park it
closes its mailbox in the same transaction that reads them, so a message
stored later is recorded by its sender, who claims the run once this writer
lets go.
A sender that finds no writer to take its message moves every stored
message itself (:func:`message_events`), as the run's claimed writer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentlog.eventlog._base import EventLog
from agentlog.eventlog._mailbox import MailboxLog, StoredMessage
from agentlog.eventlog.events import MessageSent
from agentlog.projector._state import RunState
from agentlog.runtime._inbox import waiting_recv
from agentlog.runtime._writer_protocol import Writer

__all__ = ["Mailbox", "mailbox_of", "message_events", "take_stored"]


def mailbox_of(log: EventLog | None) -> MailboxLog | None:
    """The log's mailbox seam, or None if it has none (memory, Kafka)."""
    return log if isinstance(log, MailboxLog) else None


@dataclass(slots=True)
class Mailbox:
    """The mailbox of the run that the writer of ``epoch`` drives."""

    log: MailboxLog
    run_id: str
    epoch: int
    closed: bool = False

    async def reopen(self) -> None:
        """The run goes on after a close: senders may leave messages again."""
        if self.closed:
            await self.log.open_mailbox(self.run_id, self.epoch)
            self.closed = False


def message_events(
    state: RunState, stored: Sequence[StoredMessage]
) -> tuple[list[MessageSent], list[int], bool]:
    """The ``MessageSent`` events that move ``stored`` into the run's history
    (none for a key it recorded already), the ids they move, and whether one
    answers an open ``recv`` (the run then goes on)."""
    events: list[MessageSent] = []
    woken: list[str] = []
    keys = set(state.message_keys)
    for message in stored:
        if message.key in keys:
            continue  # moved before: a move stopped between its append and its mark
        keys.add(message.key)
        wakes = waiting_recv(state, message.topic, woken)
        if wakes is not None:
            woken.append(wakes)
        events.append(MessageSent(message.topic, message.value, message.key, wakes))
    return events, [message.id for message in stored], bool(woken)


async def take_stored(writer: Writer, mailbox: Mailbox | None, *, close: bool) -> bool:
    """Move the run's stored messages into its history (durable before this
    returns, as every input is). ``close``: the run is about to park: close
    its mailbox in the same transaction that reads it, so that no message
    stored before the park is left behind. Before the run ends, a plain read
    (``close=False``) moves what is stored by then; a message stored in the
    moment after it stays in the mailbox of the ended run, as a message the
    run never asked for.

    Returns:
        True if one of them answered an open ``recv``: the run goes on (the
        caller reopens the mailbox with :meth:`Mailbox.reopen`).
    """
    if mailbox is None:
        return False
    stored = await mailbox.log.stored_messages(
        mailbox.run_id, close_epoch=mailbox.epoch if close else None
    )
    mailbox.closed = mailbox.closed or close
    if not stored or writer.state.is_terminal:
        return False
    events, ids, woke = message_events(writer.state, stored)
    for data in events:
        writer.emit(data)
    if events:
        await writer.persist()
    await mailbox.log.messages_moved(mailbox.run_id, ids)
    return woke
