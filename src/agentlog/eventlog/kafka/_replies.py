"""A client waits for the owner's reply to its command (partitioned layout).

A client's request (a start, an answer, a retry) is a command on the run's
commands partition; the partition's owner applies it or refuses it (another
answer to the same interrupt went first) and says which in a reply record on
the same partition, after the command, in the transaction that records the
effect (see :mod:`~agentlog.eventlog.kafka._commands`). Waiting for that reply
is what lets a caller learn that its answer lost, and makes its own reads
show what it asked for: the reply is read ``read_committed``, so the
effect's events and index entry are committed by then.

One consumer per log reads the partitions that someone waits on, from just
after the oldest command waited for; the others are paused. Replies seen
lately are remembered, so a waiter that comes after its reply was read still
finds it. The first reply to a command is its outcome: an owner that took a
command again after a crash refuses it the second time.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from agentlog._logging import get_logger
from agentlog.errors import BackendUnavailableError
from agentlog.eventlog.kafka._admin import TopicLayout
from agentlog.eventlog.kafka._clients import start_client, stop_quietly
from agentlog.eventlog.kafka._commands import decode_answer
from agentlog.eventlog.kafka._errors import kafka_errors

__all__ = ["ReplyWatch"]

_log = get_logger(__name__)

_POLL_MS = 50
_STOP_S = 5.0
#: Replies remembered after they were read (a waiter may come after its reply).
_REMEMBERED = 10_000
_RETRY_S = 0.5

#: A reply: applied or refused, and its whole map.
_Answer = tuple[bool, dict[str, Any]]


class ReplyWatch:
    """Waits for the replies to this process's commands (see the module docstring)."""

    def __init__(self, layout: TopicLayout, common: dict[str, Any], timeout_s: float) -> None:
        self._layout, self._common, self._timeout_s = layout, common, timeout_s
        self._consumer: AIOKafkaConsumer | None = None
        #: One caller at a time moves the consumer (assign, seek, pause, fetch).
        self._lock = asyncio.Lock()
        #: (partition, command offset) -> the futures of the callers waiting for its reply
        self._waiting: dict[tuple[int, int], list[asyncio.Future[_Answer]]] = {}
        self._seen: OrderedDict[tuple[int, int], _Answer] = OrderedDict()
        self._task: asyncio.Task[None] | None = None

    async def outcome(self, run_id: str, kind: str, partition: int, offset: int) -> bool:
        """Whether the owner applied (True) or refused (False) the command at ``offset``.

        Raises:
            BackendUnavailableError: no reply within the log's ``command_timeout_s``.
        """
        return (await self.answer(run_id, kind, partition, offset))[0]

    async def answer(
        self, run_id: str, kind: str, partition: int, offset: int, timeout_s: float | None = None
    ) -> _Answer:
        """As :meth:`outcome`, with the reply's whole map (a queue grant's times);
        ``timeout_s`` bounds the wait instead of the log's ``command_timeout_s``."""
        timeout_s = timeout_s or self._timeout_s
        key = (partition, offset)
        if key in self._seen:
            return self._seen[key]
        future: asyncio.Future[_Answer] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append(future)
        try:
            await self._watch(partition, offset)
            if self._task is None or self._task.done():
                self._task = asyncio.create_task(self._pump(), name="kafka-command-replies")
            async with asyncio.timeout(timeout_s):
                return await future
        except TimeoutError:
            raise BackendUnavailableError(
                f"run {run_id!r}: its {kind} command is queued (topic {self._layout.commands} "
                f"partition {partition} offset {offset}), but no worker applied or refused it "
                f"within {timeout_s:g}s: does a worker of the fleet run (agentlog worker "
                "with ?group=...)? It stays queued, and the partition's owner applies or "
                "refuses it when there is one. Read the run (pending, get_state) before you "
                "send it again."
            ) from None
        finally:
            waiters = self._waiting[key]
            waiters.remove(future)
            if not waiters:
                del self._waiting[key]
            future.cancel()  # a no-op once it has its result

    async def stop(self) -> None:
        """Stop reading; waiters still waiting get the caller's cancel or their timeout."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._consumer is not None:
            await stop_quietly(self._consumer, _STOP_S)
            self._consumer = None

    async def _watch(self, partition: int, offset: int) -> None:
        """Make the pump read ``partition`` from just after ``offset`` at the latest."""
        tp = TopicPartition(self._layout.commands, partition)
        async with self._lock:
            consumer = await self._started()
            others = [o for p, o in self._waiting if p == partition and o != offset]
            # Nobody else reads it (the others waiting on it may not be watched
            # yet: asked side by side): start right after the command.
            if not others or tp in consumer.paused():
                consumer.seek(tp, offset + 1)
                consumer.resume(tp)
                return
            with kafka_errors(f"cannot read topic {tp.topic} partition {partition}"):
                if await consumer.position(tp) > offset + 1:
                    consumer.seek(tp, offset + 1)  # read again: its reply may have gone by

    async def _started(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            consumer = AIOKafkaConsumer(
                **self._common,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                isolation_level="read_committed",
                fetch_max_wait_ms=_POLL_MS,
            )
            with kafka_errors(f"cannot read topic {self._layout.commands}"):
                await start_client(consumer)
            partitions = [
                TopicPartition(self._layout.commands, p)
                for p in range(self._layout.events_partitions)
            ]
            consumer.assign(partitions)
            consumer.pause(*partitions)
            self._consumer = consumer
        return self._consumer

    async def _pump(self) -> None:
        """Read replies while anyone waits; hand each to its waiter."""
        while self._waiting:
            try:
                async with self._lock:
                    consumer = await self._started()
                    with kafka_errors(f"cannot read topic {self._layout.commands}"):
                        batches = await consumer.getmany(timeout_ms=_POLL_MS)
                    for tp, records in batches.items():
                        for record in records:
                            self._note(tp.partition, decode_answer(record.value))
                    waited = {partition for partition, _ in self._waiting}
                    idle = [tp for tp in consumer.assignment() if tp.partition not in waited]
                    consumer.pause(*idle)
            except Exception as exc:  # never die: the waiters' timeout bounds the wait
                _log.warning("kafka_command_replies_unread", error=str(exc))
                await asyncio.sleep(_RETRY_S)

    def _note(self, partition: int, reply: tuple[int, bool, dict[str, Any]] | None) -> None:
        if reply is None:
            return  # a command
        key = (partition, reply[0])
        if key in self._seen:
            return  # the first reply is the outcome
        self._seen[key] = (reply[1], reply[2])
        while len(self._seen) > _REMEMBERED:
            self._seen.popitem(last=False)
        for future in self._waiting.get(key, ()):
            if not future.done():
                future.set_result((reply[1], reply[2]))
