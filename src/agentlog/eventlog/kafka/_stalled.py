"""Open transactions that hold a partition's reads, aborted (for the reader).

A healthy transaction lasts milliseconds. One left open by a writer that
died (SIGKILL, a lost host) would hold the partition's last stable offset,
and so every reader of the partition and every process opening the log,
until the broker times it out (``transaction_timeout_s``). A read that has
been held at the same last stable offset for ``stalled_s`` therefore looks
at the record there (with a ``read_uncommitted`` consumer), whose key names
the run, and opens that run's transactional id: ``init_transactions`` makes
the coordinator abort the open transaction at once. A live writer whose
transaction is aborted that way only retries it (its epoch did not change);
a dead one has nothing left to lose.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from agentlog._logging import get_logger
from agentlog.errors import BackendUnavailableError
from agentlog.eventlog.kafka._admin import TopicLayout
from agentlog.eventlog.kafka._clients import start_client, stop_quietly
from agentlog.eventlog.kafka._errors import kafka_errors
from agentlog.eventlog.kafka._records import parse_key

__all__ = ["StalledTransactions"]

_log = get_logger("agentlog.eventlog.kafka._reader")

#: How long closing the consumer may take.
_STOP_S = 5.0


class StalledTransactions:
    """Aborts the open transaction that holds a read (see the module docstring)."""

    def __init__(self, layout: TopicLayout, common: dict[str, Any], stalled_s: float) -> None:
        self.layout, self.stalled_s, self._common = layout, stalled_s, common
        #: A read_uncommitted consumer that looks at a stalled transaction's first record.
        self._peek: AIOKafkaConsumer | None = None
        self._peek_lock = asyncio.Lock()

    async def stop(self) -> None:
        """Close the consumer, if one was opened."""
        if self._peek is not None:
            await stop_quietly(self._peek, _STOP_S)

    async def abort(self, tp: TopicPartition, offset: int) -> None:
        """Abort the open transaction whose first record is at ``offset`` of ``tp``.

        Not in the partitioned layout: there the transaction belongs to the
        partition's owner, and opening the owner's transactional id would
        fence a live owner out of its partition. A dead owner's transaction
        is aborted by the next owner (its ``init_transactions``), once the
        group gives the partition away.
        """
        if self.layout.partitioned:
            return
        run_id = await self._transaction_run(tp, offset)
        if run_id is None:
            return
        writer_id = self.layout.writer_id(run_id)
        _log.warning(
            "kafka_stalled_transaction_aborted",
            topic=tp.topic,
            partition=tp.partition,
            offset=offset,
            run_id=run_id,
            stalled_s=self.stalled_s,
            hint="its writer died or hangs; opening its transactional id aborts it",
        )
        producer = AIOKafkaProducer(**self._common, transactional_id=writer_id)
        doing = f"cannot abort the stalled transaction of run {run_id!r}"
        try:
            with kafka_errors(doing, "the read goes on waiting, or the broker's timeout ends it"):
                # init_transactions: the coordinator aborts the open one
                await start_client(producer)
        except BackendUnavailableError as exc:
            _log.warning("kafka_stalled_transaction_not_aborted", run_id=run_id, error=str(exc))
        finally:
            await stop_quietly(producer, _STOP_S)

    async def _transaction_run(self, tp: TopicPartition, offset: int) -> str | None:
        """The run whose record (committed or not) is at ``offset`` of ``tp``."""
        async with self._peek_lock:
            if self._peek is None:
                self._peek = AIOKafkaConsumer(
                    **self._common, enable_auto_commit=False, isolation_level="read_uncommitted"
                )
                await start_client(self._peek)
            peek = self._peek
            peek.assign([tp])
            peek.seek(tp, offset)
            try:
                while True:  # bounded by the caller's timeout
                    batch = await peek.getmany(tp, timeout_ms=200)
                    for record in batch.get(tp, ()):
                        if record.offset >= offset:
                            return self._run_of(tp, record.key or b"")
            finally:
                peek.pause(tp)

    def _run_of(self, tp: TopicPartition, key: bytes) -> str | None:
        try:
            if tp.topic == self.layout.events:
                return key.decode()
            kind, run_id, _seq = parse_key(key)
        except (ValueError, UnicodeDecodeError):
            kind, run_id = "", ""
        if kind != "r":
            # Not one of our writers' records: leave it to the broker's timeout.
            _log.warning("kafka_stalled_transaction_unknown", topic=tp.topic, key=key)
            return None
        return run_id
