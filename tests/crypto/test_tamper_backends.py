"""An encrypted run tampered with in PostgreSQL or Redis: a typed error, never the attacker's text.

The attacker writes the store directly (not through agentlog) and
recomputes the checksum; they do not have the key store. Plain content in
place of a sealed event, and a sealed event's clear metadata edited, must
both fail as TamperedPayloadError for a reader holding the keys. The SQLite
and archive cases are in tests/eventlog/test_sealing_downgrade.py and
tests/archive/test_encryption.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis.asyncio as aioredis

from agentlog.crypto import LocalKeyStore
from agentlog.errors import TamperedPayloadError
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.codec import row_checksum
from agentlog.projector import load_state
from tests.services.redis_server import RedisServer
from tests.support.tamper import ATTACKS, SECRET, TASK_SEQ, sealed_run


async def _record(url: str, keyring: Path) -> None:
    async with await open_log(url, keys=LocalKeyStore(keyring)) as log:
        for run_id in ("r1", "r2"):
            await log.append(sealed_run(run_id, await log.claim_writer(run_id)))


async def _refused(url: str, keyring: Path) -> None:
    async with await open_log(url, keys=LocalKeyStore(keyring)) as log:
        with pytest.raises(TamperedPayloadError, match=rf"run 'r1' seq {TASK_SEQ}"):
            await load_state(log, "r1", use_snapshots=False)
        assert (await load_state(log, "r2")).output == {"answer": SECRET}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
async def test_postgres(postgres_url: str, tmp_path: Path, attack: str) -> None:
    keyring = tmp_path / "keyring.json"
    await _record(postgres_url, keyring)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        row: Any = conn.execute(
            "SELECT type, ts, schema_v, writer_epoch, payload FROM agentlog_events "
            "WHERE run_id = 'r1' AND seq = %s",
            (TASK_SEQ,),
        ).fetchone()
        type_, ts, schema_v, epoch, payload = row
        changed = ATTACKS[attack](bytes(payload))
        conn.execute(
            "UPDATE agentlog_events SET payload = %s, checksum = %s "
            "WHERE run_id = 'r1' AND seq = %s",
            (changed, row_checksum("r1", TASK_SEQ, type_, ts, schema_v, epoch, changed), TASK_SEQ),
        )
    await _refused(postgres_url, keyring)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
async def test_redis(
    redis_server: RedisServer, redis_url: str, redis_prefix: str, tmp_path: Path, attack: str
) -> None:
    keyring = tmp_path / "keyring.json"
    await _record(redis_url, keyring)
    client = aioredis.Redis(
        host=redis_server.host, port=redis_server.port, password=redis_server.password
    )
    try:
        stream = f"{redis_prefix}:events:r1"
        entries = await client.xrange(stream)
        await client.delete(stream)  # rebuilt entry by entry, one of them changed
        for entry_id, fields in entries:
            if int(entry_id.split(b"-")[0]) == TASK_SEQ:
                changed = ATTACKS[attack](fields[b"p"])
                ts, schema_v, epoch = (int(fields[k]) for k in (b"ts", b"v", b"e"))
                type_ = fields[b"t"].decode()
                checksum = row_checksum("r1", TASK_SEQ, type_, ts, schema_v, epoch, changed)
                fields = {**fields, b"p": changed, b"c": str(checksum).encode()}
            await client.xadd(stream, fields, id=entry_id)
    finally:
        await client.aclose()
    await _refused(redis_url, keyring)
