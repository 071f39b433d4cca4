"""The three shapes of the PostgreSQL fast append: one event as scalars, a few
as arrays, a big batch by COPY. Each must store what
it was given, and a payload that fails to encode must leave nothing behind
(nor break the connection the COPY ran on)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentlog.errors import ConflictError, NotSerializableError
from agentlog.eventlog.events import TaskCompleted
from agentlog.eventlog.postgres import PostgresEventLog
from agentlog.eventlog.postgres._schema import COPY_FROM
from agentlog.testing._events import ev, read_all, seed


@pytest.fixture
async def log(postgres_url: str) -> AsyncIterator[PostgresEventLog]:
    log = await PostgresEventLog.connect(postgres_url)
    async with log:
        yield log


@pytest.mark.parametrize("durable", [True, False])
async def test_one_few_and_copy_sized_batches_read_back_as_written(
    log: PostgresEventLog, durable: bool
) -> None:
    events = await seed(log, "r", 2)  # the run's row is now known: the fast path
    next_seq = 3
    for size in (1, 1, 5, COPY_FROM, COPY_FROM + 37):
        batch = [
            ev("r", seq, TaskCompleted(f"k{seq}", "x" * 500))
            for seq in range(next_seq, next_seq + size)
        ]
        await log.append(batch, durable=durable)
        events += batch
        next_seq += size
    assert await read_all(log, "r") == events
    assert (await log.get_run("r")).last_seq == next_seq - 1


async def test_a_bad_payload_deep_in_a_copy_batch_writes_nothing(log: PostgresEventLog) -> None:
    events = await seed(log, "r", 2)
    size = COPY_FROM + 36
    batch = [ev("r", seq, TaskCompleted(f"k{seq}", "x" * 600)) for seq in range(3, 3 + size)]
    # Far enough in that rows before it have gone to the server in the COPY
    # (psycopg sends a COPY's data in 32 KiB buffers: here ~60 KB come first).
    batch[-3] = ev("r", batch[-3].seq, TaskCompleted("k", {"bad": object()}))
    with pytest.raises(NotSerializableError):
        await log.append(batch)
    assert await read_all(log, "r") == events
    assert (await log.get_run("r")).last_seq == 2
    # The connection went back to the pool usable, and the seqs are still free.
    good = [ev("r", seq) for seq in range(3, 3 + size)]
    await log.append(good)
    assert await read_all(log, "r") == events + good


@pytest.mark.parametrize("size", [1, 5, COPY_FROM])
@pytest.mark.parametrize("durable", [True, False])
async def test_an_append_on_a_stale_view_is_a_conflict_on_every_shape(
    log: PostgresEventLog, postgres_url: str, size: int, durable: bool
) -> None:
    events = await seed(log, "r", 2)  # `log` now believes seq 2 is the last
    other = await PostgresEventLog.connect(postgres_url)
    async with other:
        theirs = ev("r", 3, TaskCompleted("theirs", 3))
        await other.append([theirs])
    # The fast path's conditional update finds seq 3 taken: nothing is written.
    with pytest.raises(ConflictError):
        await log.append([ev("r", seq) for seq in range(3, 3 + size)], durable=durable)
    assert await read_all(log, "r") == [*events, theirs]
    assert (await log.get_run("r")).last_seq == 3
