"""PostgreSQL: agentlog's sync append against the raw driver, and batched throughput.

Uses the server that ``POSTGRES_URL`` names (``postgresql://user:pw@host:port/db``)
when set; otherwise starts one with Debian's binaries in a temporary folder
(``tests/services/postgres_server.py``, fsync on) and stops it after.

1. **Sync append of one event** (``durable=True``: a committed transaction
   with ``synchronous_commit = on``) through ``PostgresEventLog.append``,
   against the floor: the same row (the same encoded payload of a task result of
   ``payloads.PAYLOAD_BYTES``,
   checksum and columns, into a table with the same primary key) by one raw
   psycopg ``INSERT`` committed on its own (autocommit), on the same server,
   the same run. Rounds alternate between the two so that disk noise hits
   both alike. Target: ratio <= 1.5.
2. **Batched append throughput**: one run, batches of 1,000 events (the
   same task results), each batch one durable append. Target: >= 50,000 events/s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import psycopg

from agentlog.eventlog import Event
from agentlog.eventlog._row_format import event_row
from agentlog.eventlog.postgres import PostgresEventLog
from benchmarks.harness import Row, row_from_samples, task_events

AREA = "postgres"
BATCH = 1000


@contextlib.contextmanager
def databases(prefix: str = "bench") -> Iterator[Callable[[], str]]:
    """A maker of URLs of fresh empty databases, all on one server: the one
    ``POSTGRES_URL`` names (its databases made here are dropped after), else
    one started here in a temporary folder and destroyed after."""
    given = os.environ.get("POSTGRES_URL", "").strip()
    if given:
        made: list[str] = []

        def on_given() -> str:
            name = f"{prefix}{len(made)}_{os.getpid()}"
            with psycopg.connect(given, autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {name}")
            made.append(name)
            return urlsplit(given)._replace(path=f"/{name}").geturl()

        try:
            yield on_given
        finally:
            with psycopg.connect(given, autocommit=True) as conn:
                for name in made:
                    conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        return
    from tests.services.postgres_server import PostgresServer

    server = PostgresServer.started()
    try:
        yield lambda: server.url(server.create_database())
    finally:
        server.destroy()


def _events(run_id: str, first: int, count: int, epoch: int) -> list[Event]:
    """Events ``first`` .. ``first + count - 1`` of a run: the same for the same arguments."""
    return task_events(AREA, run_id, first, count, epoch)


async def _sync_append(url: str, rounds: int, per_round: int) -> list[Row]:
    log = await PostgresEventLog.connect(url)
    raw = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await raw.execute("SET synchronous_commit = on")
    await raw.execute(
        "CREATE TABLE IF NOT EXISTS bench_raw (run_id text NOT NULL, seq bigint NOT NULL, "
        "type text NOT NULL, ts bigint NOT NULL, schema_v integer NOT NULL, "
        "writer_epoch bigint NOT NULL, payload bytea NOT NULL, checksum bigint, "
        "PRIMARY KEY (run_id, seq))"
    )
    insert = "INSERT INTO bench_raw VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
    ours: list[float] = []
    floor: list[float] = []
    try:
        epoch = await log.claim_writer("one")
        total = rounds * per_round + 20
        events = _events("one", 1, total, epoch)
        rows = [event_row(e, epoch, None) for e in events]
        for i in range(20):  # warm up both paths (connections, plans)
            await log.append([events[i]])
            await raw.execute(insert, rows[i])
        seq = raw_seq = 20  # both write the same rows' bytes, each into its own table
        for _ in range(rounds):
            for _ in range(per_round):
                start = time.perf_counter()
                await log.append([events[seq]])
                ours.append(time.perf_counter() - start)
                seq += 1
            for _ in range(per_round):
                start = time.perf_counter()
                await raw.execute(insert, rows[raw_seq])
                floor.append(time.perf_counter() - start)
                raw_seq += 1
    finally:
        await raw.close()
        await log.close()
    ratio = (sorted(ours)[len(ours) // 2]) / (sorted(floor)[len(floor) // 2])
    return [
        row_from_samples(AREA, "sync append, 1 event (agentlog)", ours, unit="us"),
        row_from_samples(
            AREA,
            "sync INSERT + COMMIT, 1 row (raw psycopg)",
            floor,
            unit="us",
            ratio=round(ratio, 2),
            target="agentlog/raw <= 1.5",
        ),
    ]


async def _batched(url: str, batches: int) -> Row:
    log = await PostgresEventLog.connect(url)
    try:
        epoch = await log.claim_writer("batched")
        pending = [_events("batched", 1 + b * BATCH, BATCH, epoch) for b in range(batches + 1)]
        await log.append(pending[0])  # warm-up batch
        samples: list[float] = []
        start = time.perf_counter()
        for batch in pending[1:]:
            began = time.perf_counter()
            await log.append(batch)
            samples.append(time.perf_counter() - began)
        elapsed = time.perf_counter() - start
    finally:
        await log.close()
    rate = batches * BATCH / elapsed
    return row_from_samples(
        AREA,
        f"batched append, {BATCH} events/batch, sync",
        samples,
        unit="ms",
        events_per_s=round(rate),
        target=">= 50,000 events/s",
    )


async def _all(url: str, quick: bool) -> list[Row]:
    rows = await _sync_append(url, rounds=4 if quick else 10, per_round=50 if quick else 200)
    rows.append(await _batched(url, 5 if quick else 50))
    return rows


def collect(quick: bool) -> list[Row]:
    with databases() as new_database:
        return asyncio.run(_all(new_database(), quick))


def _main() -> None:  # pragma: no cover - a manual run
    import sys

    for row in collect("--quick" in sys.argv):
        extra: dict[str, Any] = row.extra
        print(f"{row.name}: median {row.median:.1f} {row.unit}, p99 {row.p99:.1f} {extra}")


if __name__ == "__main__":
    _main()
