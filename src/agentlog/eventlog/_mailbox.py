"""A run's mailbox: messages stored for its writer without holding the run.

On a log that runtimes write directly (SQLite, PostgreSQL, Redis) only the
run's writer appends to it, and a writer may hold the run for a long step in
another process. A sender does not wait for it (as DBOS's notifications
table does not): it stores the message here, keyed by ``(run_id, key)``, and
the writer moves it into the run's history as the usual ``MessageSent``
event. The store is the seam :class:`MailboxLog`; the runtime's side is
:mod:`agentlog.runtime._inbox`.

The one rule that keeps a message from being stranded in a parked run:

* :meth:`MailboxLog.store_message` stores the message and, **in the same
  transaction**, says whether a writer will take it (``taken``): the run is
  running, a writer's lease on it is live, and that writer has not closed
  its mailbox;
* before a writer parks or ends the run, it closes its mailbox
  (:meth:`MailboxLog.stored_messages` with ``close_epoch``) and moves every
  message stored before that transaction. A message stored after it is not
  ``taken``: its sender records it itself, by claiming the run as a resume
  does, once the writer lets go.

So every stored message is moved by the writer that held the run when it
was stored, by the next one, or by its sender. Each is moved once into the
history: a move appends ``MessageSent`` with the message's key, then marks
the row moved; a move interrupted in between is skipped by its key the next
time (``RunState.message_keys``). Rows stay after they move, so a key sent
again is a duplicate for as long as the run is stored.

Each row also says whether a send has *reported* it (returned True for it).
The send that stores a message reports it, unless it raises after storing
(``LeaseHeldError`` when its ``timeout`` passed): then it marks the row
unreported (:meth:`MailboxLog.unreport`), and the next send of the same key
reports it instead (:attr:`Stored.reports`, :meth:`MailboxLog.take_report`),
whether the message is still stored or moved by then. So a caller that
retries a send that raised gets True, once per key.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentlog.crypto import PayloadCipher
from agentlog.eventlog._packing import pack, unpack
from agentlog.eventlog._records import RunInfo, status_ended
from agentlog.eventlog._sealing import open_blob, seal_blob
from agentlog.eventlog.events import RunStatus, utcnow

__all__ = [
    "MailboxLog",
    "Stored",
    "StoredMessage",
    "open_value",
    "seal_value",
    "stored_outcome",
]


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message in a run's mailbox, not yet moved into its history."""

    id: int
    """Its place in the run's mailbox: messages move in this order."""
    topic: str
    value: Any
    key: str


@dataclass(frozen=True, slots=True)
class Stored:
    """What :meth:`MailboxLog.store_message` found, in its one transaction."""

    inserted: bool
    """This call stored the message (False: its key was stored before)."""
    reports: bool
    """This call reports the message: it stored it, or the send that stored it
    raised (:meth:`MailboxLog.unreport`) and this call takes its report over."""
    moved: bool
    """The message with this key is in the run's history already."""
    taken: bool
    """A writer holds the run and will move it: the run is running, its lease
    is live and its writer has not closed its mailbox."""
    ended: bool
    """The run completed, failed or was cancelled: nothing was stored."""


def ended_statuses_sql() -> str:
    """The terminal statuses as a SQL list, for a prune's mailbox rule: a run
    that has not ended keeps its unmoved messages and its mailbox through a
    prune (its next writer moves them), an ended run keeps nothing."""
    return ", ".join(f"'{status}'" for status in sorted(RunStatus.TERMINAL))


def stored_outcome(
    info: RunInfo, inserted: bool, reports: bool, moved: bool, closed_epoch: int | None
) -> Stored:
    """What a store found, from the run's index row read in its transaction,
    whether it inserted, whether it reports the message, whether the key's
    message moved, and the epoch that closed the mailbox (None: open): the one
    rule of every backend."""
    ended = status_ended(info.status)
    taken = (
        not ended
        and info.status == RunStatus.RUNNING
        and info.lease_live(utcnow())
        and closed_epoch != info.writer_epoch
    )
    return Stored(
        inserted=inserted and not ended,
        reports=reports and not ended,
        moved=moved,
        taken=taken,
        ended=ended,
    )


def seal_value(cipher: PayloadCipher | None, run_id: str, value: Any) -> bytes:
    """A message's value as the mailbox stores it (sealed when a cipher is set)."""
    return seal_blob(cipher, run_id, 0, "command", pack(value, path="message value"))


def open_value(cipher: PayloadCipher | None, run_id: str, raw: bytes) -> Any:
    """A value stored by :func:`seal_value`."""
    return unpack(open_blob(cipher, run_id, 0, "command", raw))


class MailboxLog(abc.ABC):
    """The mailbox seam a direct-write log adds (SQLite, PostgreSQL, Redis)."""

    @abc.abstractmethod
    async def store_message(self, run_id: str, topic: str, value: Any, key: str) -> Stored:
        """Store a message for the run's writer, durably, unless its key is
        stored already or the run ended; say whether a writer will take it.
        A key stored unreported is marked reported in the same transaction
        (:attr:`Stored.reports`).

        Raises:
            UnknownRunError: nothing was recorded for ``run_id``.
        """

    @abc.abstractmethod
    async def stored_messages(
        self, run_id: str, *, close_epoch: int | None = None
    ) -> list[StoredMessage]:
        """The run's messages not yet moved, oldest first.

        Args:
            close_epoch: the writer's epoch: close its mailbox in the same
                transaction (later messages are not ``taken``), before it
                parks or ends the run.

        Raises:
            FencedError: ``close_epoch`` is not the run's epoch any more.
        """

    @abc.abstractmethod
    async def messages_moved(self, run_id: str, ids: Sequence[int]) -> None:
        """Mark these messages moved: their ``MessageSent`` is in the history."""

    @abc.abstractmethod
    async def unreport(self, run_id: str, key: str) -> None:
        """The send that reports the message with ``key`` raised: mark it
        unreported, so that the next send of the key reports it."""

    @abc.abstractmethod
    async def take_report(self, run_id: str, key: str) -> bool:
        """Mark the message with ``key`` reported; True if it was stored
        unreported (this call reports it), False if reported before or not
        stored here (recorded without the mailbox)."""

    @abc.abstractmethod
    async def open_mailbox(self, run_id: str, epoch: int) -> None:
        """Open the mailbox that the writer of ``epoch`` closed (the run went
        on instead of parking); a newer epoch's mailbox is open anyway."""
