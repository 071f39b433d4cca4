"""The Redis log's run mailboxes (:mod:`agentlog.eventlog._mailbox`).

Keys, beside the run's (``P`` is the log's prefix):

* ``P:mbox:RUN`` is a hash: ``next`` (the last message id given), ``closed``
  (the epoch whose writer closed the mailbox), and per message ``k:KEY`` (its
  id: the key is taken for as long as the run is stored), ``u:KEY`` while
  no send has reported it (the one that stored it raised), ``t:ID``, ``v:ID``
  and ``key:ID`` (its topic, stored value and key, until it moves);
* ``P:mboxq:RUN`` is a sorted set of the ids not moved yet, by id.

A store and a writer's close are each one script, so Redis runs them one
after the other and each sees what the other wrote, as the run index row's
lock orders them on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
from agentlog.eventlog._records import RunInfo
from agentlog.eventlog._row_format import from_us
from agentlog.eventlog.events import RunStatus

__all__ = ["RedisMailbox"]

# KEYS: run hash, mailbox hash, queue; ARGV: key, topic, value, terminal statuses...
_STORE = """
local last = redis.call('HGET', KEYS[1], 'last_seq')
if not last or tonumber(last) == 0 then return {'unknown'} end
local status = redis.call('HGET', KEYS[1], 'status') or ''
local ended = 0
for i = 4, #ARGV do if ARGV[i] == status then ended = 1 end end
local inserted = 0
local reports = 0
local id = redis.call('HGET', KEYS[2], 'k:' .. ARGV[1])
if not id and ended == 0 then
  id = tostring(redis.call('HINCRBY', KEYS[2], 'next', 1))
  redis.call('HSET', KEYS[2], 'k:' .. ARGV[1], id, 't:' .. id, ARGV[2], 'v:' .. id, ARGV[3],
    'key:' .. id, ARGV[1])
  redis.call('ZADD', KEYS[3], tonumber(id), id)
  inserted = 1
  reports = 1
elseif id and ended == 0 then
  reports = redis.call('HDEL', KEYS[2], 'u:' .. ARGV[1])
end
local moved = 0
if id and not redis.call('ZSCORE', KEYS[3], id) then moved = 1 end
return {'ok', inserted, reports, moved, ended, status,
  redis.call('HGET', KEYS[1], 'writer_epoch') or '0',
  redis.call('HGET', KEYS[1], 'lease_expires_at') or '',
  redis.call('HGET', KEYS[2], 'closed') or ''}
"""

# KEYS: run hash, mailbox hash, queue; ARGV: the writer's epoch to close at, or ''.
_READ = """
if ARGV[1] ~= '' then
  local current = redis.call('HGET', KEYS[1], 'writer_epoch') or '0'
  if current ~= ARGV[1] then return {'fenced', current} end
  redis.call('HSET', KEYS[2], 'closed', ARGV[1])
end
local out = {'ok'}
for _, id in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  local got = redis.call('HMGET', KEYS[2], 't:' .. id, 'v:' .. id, 'key:' .. id)
  table.insert(out, id)
  table.insert(out, got[1])
  table.insert(out, got[2])
  table.insert(out, got[3])
end
return out
"""

# KEYS: mailbox hash, queue; ARGV: ids.
_MOVED = """
for _, id in ipairs(ARGV) do
  if redis.call('ZREM', KEYS[2], id) == 1 then
    redis.call('HDEL', KEYS[1], 't:' .. id, 'v:' .. id, 'key:' .. id)
  end
end
return 1
"""

# KEYS: mailbox hash; ARGV: key.
_UNREPORT = """
if redis.call('HEXISTS', KEYS[1], 'k:' .. ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], 'u:' .. ARGV[1], '1')
end
return 1
"""

# KEYS: mailbox hash; ARGV: key.
_TAKE_REPORT = """
return redis.call('HDEL', KEYS[1], 'u:' .. ARGV[1])
"""

# KEYS: mailbox hash; ARGV: epoch.
_OPEN = """
if redis.call('HGET', KEYS[1], 'closed') == ARGV[1] then redis.call('HDEL', KEYS[1], 'closed') end
return 1
"""


class RedisMailbox(MailboxLog):
    """:class:`MailboxLog` on Redis; mixed into ``RedisEventLog``."""

    url: str
    cipher: PayloadCipher | None
    _client: Any
    _mailbox_scripts: tuple[Any, ...] | None = None

    def _mailbox_keys(self, run_id: str) -> list[str]:
        prefix = self._keys.prefix  # type: ignore[attr-defined]
        run: str = self._keys.run(run_id)  # type: ignore[attr-defined]
        return [run, f"{prefix}:mbox:{run_id}", f"{prefix}:mboxq:{run_id}"]

    def _scripts(self) -> tuple[Any, ...]:
        if self._mailbox_scripts is None:
            register = self._client.register_script
            self._mailbox_scripts = (
                register(_STORE),
                register(_READ),
                register(_MOVED),
                register(_OPEN),
                register(_UNREPORT),
                register(_TAKE_REPORT),
            )
        return self._mailbox_scripts

    async def _mailbox_write(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        self._check_durable()  # type: ignore[attr-defined]
        with self._translating("the run's mailbox failed"):  # type: ignore[attr-defined]
            return await self._write(script, keys, args, True)  # type: ignore[attr-defined]

    async def store_message(self, run_id: str, topic: str, value: Any, key: str) -> Stored:
        raw = seal_value(self.cipher, run_id, value)
        args = [key, topic, raw, *sorted(RunStatus.TERMINAL)]
        reply = await self._mailbox_write(self._scripts()[0], self._mailbox_keys(run_id), args)
        if reply[0] == b"unknown":
            raise UnknownRunError(run_id, self.url)
        _, inserted, reports, moved, _ended, status, epoch, lease, closed = reply
        info = RunInfo(
            run_id,
            status=status.decode(),
            writer_epoch=int(epoch),
            lease_expires_at=from_us(int(lease)) if lease else None,
        )
        closed_epoch = int(closed) if closed else None
        return stored_outcome(
            info, bool(int(inserted)), bool(int(reports)), bool(int(moved)), closed_epoch
        )

    async def stored_messages(
        self, run_id: str, *, close_epoch: int | None = None
    ) -> list[StoredMessage]:
        args = ["" if close_epoch is None else str(close_epoch)]
        reply = await self._mailbox_write(self._scripts()[1], self._mailbox_keys(run_id), args)
        if reply[0] == b"fenced":
            assert close_epoch is not None
            raise FencedError(run_id, close_epoch, int(reply[1]))
        rows = reply[1:]
        return [
            StoredMessage(
                int(rows[i]),
                rows[i + 1].decode(),
                open_value(self.cipher, run_id, bytes(rows[i + 2])),
                rows[i + 3].decode(),
            )
            for i in range(0, len(rows), 4)
        ]

    async def messages_moved(self, run_id: str, ids: Sequence[int]) -> None:
        if ids:
            keys = self._mailbox_keys(run_id)[1:]
            await self._mailbox_write(self._scripts()[2], keys, [str(i) for i in ids])

    async def unreport(self, run_id: str, key: str) -> None:
        keys = self._mailbox_keys(run_id)[1:2]
        await self._mailbox_write(self._scripts()[4], keys, [key])

    async def take_report(self, run_id: str, key: str) -> bool:
        keys = self._mailbox_keys(run_id)[1:2]
        return bool(int(await self._mailbox_write(self._scripts()[5], keys, [key])))

    async def open_mailbox(self, run_id: str, epoch: int) -> None:
        keys = self._mailbox_keys(run_id)[1:2]
        await self._mailbox_write(self._scripts()[3], keys, [str(epoch)])
