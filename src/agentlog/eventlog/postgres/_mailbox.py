"""The PostgreSQL run mailboxes (:mod:`agentlog.eventlog._mailbox`).

A migration (:mod:`agentlog.eventlog.postgres._schema`) adds
``agentlog_run_messages`` (one row per stored message, ``UNIQUE (run_id,
key)``, ``moved`` once its ``MessageSent`` is in the history) and
``agentlog_run_mailboxes`` (the epoch whose writer closed the run's
mailbox); a later one adds ``reported`` (false while no send has reported
the message: the one that stored it raised). A store and a writer's close
each lock the run's index row first (``FOR UPDATE``), so they are ordered
as on SQLite, and each reads what the other committed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import psycopg

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
from agentlog.eventlog.postgres._schema import LOCK_RUN

__all__ = ["PostgresMailbox"]

_T = TypeVar("_T")
_Conn = psycopg.AsyncConnection[tuple[Any, ...]]
_REPORT = (
    "UPDATE agentlog_run_messages SET reported = true "
    "WHERE run_id = %s AND key = %s AND NOT reported"
)


class PostgresMailbox(MailboxLog):
    """:class:`MailboxLog` on PostgreSQL; mixed into ``PostgresEventLog``."""

    url: str
    cipher: PayloadCipher | None

    async def _mailbox_call(self, body: Callable[[_Conn], Awaitable[_T]], doing: str) -> _T:
        return await self._call(body, doing)  # type: ignore[attr-defined,no-any-return]

    async def store_message(self, run_id: str, topic: str, value: Any, key: str) -> Stored:
        raw = seal_value(self.cipher, run_id, value)

        async def body(conn: _Conn) -> Stored:
            row = await (await conn.execute(LOCK_RUN, (run_id,))).fetchone()
            info = None if row is None else info_from_row(row)
            if info is None or info.last_seq == 0:
                raise UnknownRunError(run_id, self.url)
            ended = status_ended(info.status)
            inserted = reports = 0
            if not ended:
                cur = await conn.execute(
                    "INSERT INTO agentlog_run_messages (run_id, key, topic, value) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT (run_id, key) DO NOTHING",
                    (run_id, key, topic, raw),
                )
                inserted = cur.rowcount
                reports = inserted or (await conn.execute(_REPORT, (run_id, key))).rowcount
            found = await (
                await conn.execute(
                    "SELECT moved FROM agentlog_run_messages WHERE run_id = %s AND key = %s",
                    (run_id, key),
                )
            ).fetchone()
            moved = found is not None and bool(found[0])
            closed = await (
                await conn.execute(
                    "SELECT closed_epoch FROM agentlog_run_mailboxes WHERE run_id = %s", (run_id,)
                )
            ).fetchone()
            closed_epoch = None if closed is None else closed[0]
            return stored_outcome(info, inserted == 1, reports == 1, moved, closed_epoch)

        return await self._mailbox_call(body, "message store failed")

    async def stored_messages(
        self, run_id: str, *, close_epoch: int | None = None
    ) -> list[StoredMessage]:
        async def body(conn: _Conn) -> list[tuple[Any, ...]]:
            if close_epoch is not None:
                row = await (await conn.execute(LOCK_RUN, (run_id,))).fetchone()
                current = 0 if row is None else info_from_row(row).writer_epoch
                if current != close_epoch:
                    raise FencedError(run_id, close_epoch, current)
                await conn.execute(
                    "INSERT INTO agentlog_run_mailboxes (run_id, closed_epoch) VALUES (%s, %s) "
                    "ON CONFLICT (run_id) DO UPDATE SET closed_epoch = EXCLUDED.closed_epoch",
                    (run_id, close_epoch),
                )
            cur = await conn.execute(
                "SELECT id, topic, value, key FROM agentlog_run_messages "
                "WHERE run_id = %s AND NOT moved ORDER BY id",
                (run_id,),
            )
            return await cur.fetchall()

        rows = await self._mailbox_call(body, "mailbox read failed")
        return [
            StoredMessage(int(i), str(t), open_value(self.cipher, run_id, bytes(v)), str(k))
            for i, t, v, k in rows
        ]

    async def messages_moved(self, run_id: str, ids: Sequence[int]) -> None:
        if not ids:
            return

        async def body(conn: _Conn) -> None:
            await conn.execute(
                "UPDATE agentlog_run_messages SET moved = true WHERE run_id = %s AND id = ANY(%s)",
                (run_id, list(ids)),
            )

        await self._mailbox_call(body, "mailbox update failed")

    async def unreport(self, run_id: str, key: str) -> None:
        async def body(conn: _Conn) -> None:
            await conn.execute(
                "UPDATE agentlog_run_messages SET reported = false WHERE run_id = %s AND key = %s",
                (run_id, key),
            )

        await self._mailbox_call(body, "mailbox update failed")

    async def take_report(self, run_id: str, key: str) -> bool:
        async def body(conn: _Conn) -> bool:
            return (await conn.execute(_REPORT, (run_id, key))).rowcount == 1

        return await self._mailbox_call(body, "mailbox update failed")

    async def open_mailbox(self, run_id: str, epoch: int) -> None:
        async def body(conn: _Conn) -> None:
            await conn.execute(
                "DELETE FROM agentlog_run_mailboxes WHERE run_id = %s AND closed_epoch = %s",
                (run_id, epoch),
            )

        await self._mailbox_call(body, "mailbox update failed")
