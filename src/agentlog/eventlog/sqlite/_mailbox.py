"""The SQLite file's run mailboxes (:mod:`agentlog.eventlog._mailbox`).

Migration 8 (:mod:`agentlog.eventlog.sqlite._schema`) adds ``run_messages``
(one row per stored message, ``UNIQUE (run_id, key)``, ``moved`` once its
``MessageSent`` is in the history) and ``run_mailboxes`` (the epoch whose
writer closed the run's mailbox); migration 11 adds ``reported`` (0 while
no send has reported the message: the one that stored it raised). Each call
is one transaction on the log's writing connection, so a store and a
writer's close are ordered by SQLite's one write lock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from agentlog.crypto import PayloadCipher
from agentlog.errors import FencedError, UnknownRunError
from agentlog.eventlog._mailbox import (
    MailboxLog,
    Stored,
    StoredMessage,
    open_value,
    seal_value,
    stored_outcome,
)
from agentlog.eventlog._records import status_ended
from agentlog.eventlog._row_format import info_from_row
from agentlog.eventlog.sqlite._schema import SELECT_RUN

__all__ = ["SqliteMailbox"]

_T = TypeVar("_T")


_WAITING = (
    "SELECT id, topic, value, key FROM run_messages WHERE run_id = ? AND moved = 0 ORDER BY id"
)


_REPORT = "UPDATE run_messages SET reported = 1 WHERE run_id = ? AND key = ? AND reported = 0"
_UNREPORTED = "SELECT 1 FROM run_messages WHERE run_id = ? AND key = ? AND reported = 0"


def _messages(
    cipher: PayloadCipher | None, run_id: str, rows: Sequence[Sequence[Any]]
) -> list[StoredMessage]:
    return [
        StoredMessage(int(i), str(t), open_value(cipher, run_id, bytes(v)), str(k))
        for i, t, v, k in rows
    ]


class SqliteMailbox(MailboxLog):
    """:class:`MailboxLog` on the SQLite file; mixed into ``SqliteEventLog``."""

    url: str
    cipher: PayloadCipher | None

    async def _mailbox_call(
        self, body: Callable[[sqlite3.Connection], _T], *, durable: bool | None, doing: str
    ) -> _T:
        """Run ``body`` as one transaction on the writing connection."""
        return await self._call(self._transact, body, durable=durable, doing=doing)  # type: ignore[attr-defined,no-any-return]

    async def store_message(self, run_id: str, topic: str, value: Any, key: str) -> Stored:
        raw = seal_value(self.cipher, run_id, value)

        def body(conn: sqlite3.Connection) -> Stored:
            row = conn.execute(SELECT_RUN, (run_id,)).fetchone()
            info = None if row is None else info_from_row(row)
            if info is None or info.last_seq == 0:
                raise UnknownRunError(run_id, self.url)
            ended = status_ended(info.status)
            inserted = reports = 0
            if not ended:
                inserted = conn.execute(
                    "INSERT INTO run_messages (run_id, key, topic, value) VALUES (?,?,?,?) "
                    "ON CONFLICT (run_id, key) DO NOTHING",
                    (run_id, key, topic, raw),
                ).rowcount
                reports = inserted or conn.execute(_REPORT, (run_id, key)).rowcount
            found = conn.execute(
                "SELECT moved FROM run_messages WHERE run_id = ? AND key = ?", (run_id, key)
            ).fetchone()
            moved = found is not None and bool(found[0])
            closed = conn.execute(
                "SELECT closed_epoch FROM run_mailboxes WHERE run_id = ?", (run_id,)
            ).fetchone()
            closed_epoch = None if closed is None else closed[0]
            return stored_outcome(info, inserted == 1, reports == 1, moved, closed_epoch)

        return await self._mailbox_call(body, durable=True, doing="message store failed")

    async def stored_messages(
        self, run_id: str, *, close_epoch: int | None = None
    ) -> list[StoredMessage]:
        if close_epoch is None:  # a plain read: no hop to the writing thread
            found = self._read(_WAITING, (run_id,))  # type: ignore[attr-defined]
            return _messages(self.cipher, run_id, found)

        def body(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            if close_epoch is not None:
                row = conn.execute(
                    "SELECT writer_epoch FROM runs WHERE run_id = ?", (run_id,)
                ).fetchone()
                current = 0 if row is None else int(row[0])
                if current != close_epoch:
                    raise FencedError(run_id, close_epoch, current)
                conn.execute(
                    "INSERT INTO run_mailboxes (run_id, closed_epoch) VALUES (?, ?) "
                    "ON CONFLICT (run_id) DO UPDATE SET closed_epoch = excluded.closed_epoch",
                    (run_id, close_epoch),
                )
            return conn.execute(_WAITING, (run_id,)).fetchall()

        rows = await self._mailbox_call(body, durable=None, doing="mailbox read failed")
        return _messages(self.cipher, run_id, rows)

    async def messages_moved(self, run_id: str, ids: Sequence[int]) -> None:
        if not ids:
            return

        def body(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "UPDATE run_messages SET moved = 1 WHERE run_id = ? AND id = ?",
                [(run_id, i) for i in ids],
            )

        await self._mailbox_call(body, durable=None, doing="mailbox update failed")

    async def unreport(self, run_id: str, key: str) -> None:
        def body(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE run_messages SET reported = 0 WHERE run_id = ? AND key = ?", (run_id, key)
            )

        await self._mailbox_call(body, durable=True, doing="mailbox update failed")

    async def take_report(self, run_id: str, key: str) -> bool:
        if not self._read(_UNREPORTED, (run_id, key)):  # type: ignore[attr-defined]
            return False  # the usual case: no write

        def body(conn: sqlite3.Connection) -> bool:
            return conn.execute(_REPORT, (run_id, key)).rowcount == 1

        return await self._mailbox_call(body, durable=True, doing="mailbox update failed")

    async def open_mailbox(self, run_id: str, epoch: int) -> None:
        def body(conn: sqlite3.Connection) -> None:
            conn.execute(
                "DELETE FROM run_mailboxes WHERE run_id = ? AND closed_epoch = ?", (run_id, epoch)
            )

        await self._mailbox_call(body, durable=None, doing="mailbox update failed")
