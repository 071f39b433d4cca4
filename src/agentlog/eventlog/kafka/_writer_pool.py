"""The run writers of one :class:`~agentlog.eventlog.kafka._log.KafkaEventLog`.

One :class:`~agentlog.eventlog.kafka._txn.RunProducer` per run this process
writes, each with its own transactional producer. The pool keeps them, checks
each append against the tail its writer holds, and remembers which epochs
were fenced, so that a fenced writer's later calls fail without asking
Kafka. Every commit (events, a claim, a lease change) goes through
:meth:`Transactions.commit <agentlog.eventlog.kafka._txn.Transactions.commit>`,
which holds the one failure policy.

Every append commits before it returns, ``durable=False`` too: the
runtime's async durability mode already writes in the background with group
commit (``runtime/_writer.py``), so a second queue here would only add a path
where a returned append is not yet recorded.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agentlog.errors import AgentlogError, FencedError, UnknownRunError
from agentlog.eventlog._base import check_epoch, check_next
from agentlog.eventlog.events import Event
from agentlog.eventlog.kafka._admin import TopicLayout
from agentlog.eventlog.kafka._clients import stop_quietly
from agentlog.eventlog.kafka._commits import EventsCommit, IndexCommit
from agentlog.eventlog.kafka._config import KafkaConfig
from agentlog.eventlog.kafka._reader import KafkaReader
from agentlog.eventlog.kafka._txn import Commit, RunProducer, Transactions

__all__ = ["WriterPool"]

#: How long closing a discarded producer may take (it waits for its queue).
_STOP_S = 5.0


class WriterPool:
    """The run writers of one log instance."""

    def __init__(
        self, config: KafkaConfig, layout: TopicLayout, common: dict[str, Any], reader: KafkaReader
    ) -> None:
        self._config, self._layout, self._reader = config, layout, reader
        self._txns = Transactions(config, layout, common, reader)
        self._writers: dict[str, RunProducer] = {}
        #: run id -> (the newest fenced epoch, the epoch that fenced it)
        self._fenced: dict[str, tuple[int, int]] = {}

    # -- writers -----------------------------------------------------------------------

    async def get(self, run_id: str) -> RunProducer:
        """This process's writer of the run, opened (and fencing) if needed."""
        writer = self._writers.get(run_id)
        if writer is None or writer.error is not None:
            if writer is not None:  # its producer may sit mid-transaction: retire it
                await stop_quietly(writer.producer, _STOP_S)
            writer = await self._txns.open(run_id)
            self._writers[run_id] = writer
        return writer

    async def fresh(self, run_id: str) -> RunProducer:
        """A writer that fenced every other one just now, with the true tail."""
        writer = self._writers.get(run_id)
        if writer is None or writer.error is not None:
            return await self.get(run_id)
        async with writer.lock:
            try:
                await self._txns.reopen(writer)
            except AgentlogError as exc:
                await self._retire(writer, exc)
                raise
        return writer

    async def current(self, run_id: str, epoch: int) -> RunProducer:
        """The writer of ``epoch``; FencedError if a newer epoch owns the run."""
        self._check_fenced(run_id, epoch)
        writer = await self.get(run_id)
        if not writer.has_entry:
            raise UnknownRunError(run_id, f"topic {self._layout.runs}")
        check_epoch(run_id, epoch, writer.committed.writer_epoch)
        return writer

    def _check_fenced(self, run_id: str, epoch: int) -> None:
        fenced = self._fenced.get(run_id)
        if fenced is not None and epoch <= fenced[0]:
            raise FencedError(run_id, epoch, fenced[1])

    async def _retire(self, writer: RunProducer, error: AgentlogError) -> None:
        """Never use this writer again: later calls on it raise ``error``.

        Its producer may be fenced (aiokafka's FATAL_ERROR state, in which any
        further transaction fails with an AssertionError) or mid-transaction.
        """
        if writer.error is None:
            writer.error = error
        if self._writers.get(writer.run_id) is writer:
            del self._writers[writer.run_id]
        await stop_quietly(writer.producer, _STOP_S)

    async def _commit(self, writer: RunProducer, commit: Commit) -> None:
        """Commit under the writer's lock; a writer that failed is retired."""
        try:
            await self._txns.commit(writer, commit)
        except FencedError as exc:
            if not (isinstance(commit, IndexCommit) and commit.claim):
                # A claim that lost a race is claimed again; anything else stays fenced.
                self._fenced[writer.run_id] = (exc.epoch, exc.current)
            await self._retire(writer, exc)
            raise
        except AgentlogError as exc:
            await self._retire(writer, exc)
            raise

    # -- commits -------------------------------------------------------------------------

    async def append(
        self, run_id: str, events: list[Event], raw: list[bytes], first_seq: int, epoch: int
    ) -> None:
        """Check the batch against the tail and commit it before returning."""
        self._check_fenced(run_id, epoch)
        writer = await self.get(run_id)
        head = writer.committed
        if first_seq > head.last_seq + 1 or epoch > head.writer_epoch:
            # Our tail may be stale only if another process wrote: re-read it.
            writer = await self.fresh(run_id)
        async with writer.lock:
            if writer.error is not None:
                raise writer.error
            head = writer.committed
            check_next(run_id, head.last_seq, first_seq, epoch, head.writer_epoch)
            batch = list(zip(events, raw, strict=True))
            await self._commit(
                writer, EventsCommit(run_id, batch, self._layout, self._config.index_every)
            )
            self._reader.note_point(run_id, writer.committed.last_seq, writer.offset)

    async def write_index(
        self, writer: RunProducer, epoch: int, owner: str, expires: datetime | None
    ) -> None:
        """Commit a new index entry for the run: a claim (a newer ``epoch``) or a lease change.

        Raises:
            FencedError: another epoch claimed the run first; the writer is retired.
        """
        async with writer.lock:
            if writer.error is not None:
                raise writer.error
            base = writer.committed.writer_epoch
            commit = IndexCommit(writer.run_id, self._layout, base, epoch, owner, expires)
            await self._commit(writer, commit)
            if commit.claim:
                self._fenced.pop(writer.run_id, None)

    # -- closing -------------------------------------------------------------------------

    async def close_writer(self, run_id: str) -> None:
        """Close the run's producer (every append was committed when it returned)."""
        writer = self._writers.pop(run_id, None)
        if writer is not None:
            await stop_quietly(writer.producer, _STOP_S)

    async def close(self) -> None:
        """Close every producer."""
        for run_id in list(self._writers):
            await self.close_writer(run_id)
