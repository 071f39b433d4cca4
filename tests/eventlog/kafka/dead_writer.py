"""A writer that dies with a transaction open: the child of ``test_dead_writer.py``.

Run as ``python -m tests.eventlog.kafka.dead_writer BOOTSTRAP NAME RUN OTHER EVENTS``.
It writes ``EVENTS`` committed events to run ``RUN`` and to run ``OTHER``
(same partition), then opens a transaction on RUN's transactional id,
exactly as its writer does, sends RUN's next event and index entry, and
prints ``OPEN`` once the broker holds both records, uncommitted. Then it
waits to be SIGKILLed. The transaction timeout is ten minutes, so the broker
would hold the transaction open for that long on its own.
"""

from __future__ import annotations

import asyncio
import sys

import structlog
from aiokafka import AIOKafkaProducer

from agentlog.eventlog._base import RunInfo
from agentlog.eventlog.codec import encode_event
from agentlog.eventlog.events import Event, TaskCompleted
from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog
from agentlog.eventlog.kafka._admin import TopicLayout
from agentlog.eventlog.kafka._records import IndexEntry, encode_index, index_key

#: Ten minutes: far longer than any test waits.
TRANSACTION_TIMEOUT_MS = 600_000


def events(run_id: str, first: int, count: int, epoch: int) -> list[Event]:
    return [
        Event(run_id, seq, TaskCompleted(f"k{seq}", seq), writer_epoch=epoch)
        for seq in range(first, first + count)
    ]


async def _main(bootstrap: str, name: str, run_id: str, other: str, count: int) -> None:
    config = KafkaConfig(bootstrap_servers=bootstrap, name=name, partitions=1)
    log = await KafkaEventLog.connect(config)
    epochs = {}
    for run in (run_id, other):
        epochs[run] = await log.claim_writer(run, owner="doomed", lease_seconds=1.0)
        await log.append(events(run, 1, count, epochs[run]))
    layout = TopicLayout(name, 1)
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=layout.writer_id(run_id),
        transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
    )
    await producer.start()
    await producer.begin_transaction()
    (doomed,) = events(run_id, count + 1, 1, epochs[run_id])
    info = RunInfo(run_id, last_seq=count + 1, writer_epoch=epochs[run_id])
    sent = [
        await producer.send(layout.events, encode_event(doomed), key=run_id.encode(), partition=0),
        await producer.send(
            layout.runs, encode_index(IndexEntry(info, 0, 0, 0)), key=index_key(run_id), partition=0
        ),
    ]
    await asyncio.gather(*sent)  # on the broker, in the open transaction
    print("OPEN", flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    asyncio.run(_main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
