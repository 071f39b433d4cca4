"""One run's writer, and the one way its Kafka transactions commit.

A :class:`RunProducer` holds a run's transactional producer (transactional id
``<name>.writer.<run_id>``) and the tail it knows to be true. Opening one
calls ``init_transactions``, which fences every other producer of the run,
and only then reads the tail (see the package docstring for why that rules
out forks).

:meth:`Transactions.commit` commits any :class:`Commit` (a batch of events,
a claim, a lease change: see :mod:`~agentlog.eventlog.kafka._commits`) with
one failure policy:

1. Begin, send the commit's records, commit. Done.
2. On a failure, look at the run's tail first, since reopening would fence a
   newer writer back: a newer epoch means this writer is fenced, seqs taken
   by another writer are a conflict.
3. Otherwise reopen: a fresh producer's ``init_transactions`` settles the
   transaction in doubt (completes or aborts it), and the tail is read again.
   If the commit is there, it landed. If the tail is as before, send it
   again: after a transient failure (the broker restarting) once it answers,
   after a fence or any other failure at most ``_RETRIES`` more times.
4. All of it takes at most ``request_timeout_s``; past that,
   BackendUnavailableError says the commit may or may not be recorded.

A transaction interrupted by anything but Kafka (a cancelled task) marks the
writer, so that its next use opens a fresh producer (which settles the
transaction) and reads the true tail.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from aiokafka import AIOKafkaProducer

from agentlog._logging import get_logger
from agentlog.errors import AgentlogError, BackendUnavailableError, EventLogError, FencedError
from agentlog.eventlog._base import RunInfo
from agentlog.eventlog.kafka._admin import MAX_RECORD_BYTES, TopicLayout
from agentlog.eventlog.kafka._clients import start_client, stop_quietly, transactional_producer
from agentlog.eventlog.kafka._config import KafkaConfig
from agentlog.eventlog.kafka._errors import is_transient, kafka_errors
from agentlog.eventlog.kafka._reader import KafkaReader
from agentlog.eventlog.kafka._records import IndexEntry

__all__ = ["Commit", "RunProducer", "Transactions", "Verdict"]

_log = get_logger(__name__)

T = TypeVar("T")

#: Failed commits (other than transient ones) sent again before giving up.
_RETRIES = 3
#: Wait after a transient failure, before looking and sending again.
_BACKOFF_S = 0.5
#: How long closing a discarded producer may take (it waits for its queue).
_STOP_S = 5.0


@dataclass(eq=False)
class RunProducer:
    """One run's producer and the tail it knows to be true."""

    run_id: str
    producer: AIOKafkaProducer
    partition: int
    first_offset: int
    offset: int
    committed: RunInfo
    has_entry: bool
    #: Seqs up to this one were archived and pruned (see ``IndexEntry.archived_seq``).
    archived_seq: int = 0
    since_index: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: Set once the writer must not be used again (fenced, or its producer in doubt).
    error: AgentlogError | None = None

    def adopt(self, fresh: RunProducer) -> None:
        """Take over ``fresh``'s producer and tail (after a reopen)."""
        self.producer, self.partition = fresh.producer, fresh.partition
        self.first_offset, self.offset = fresh.first_offset, fresh.offset
        self.committed, self.has_entry = fresh.committed, fresh.has_entry
        self.archived_seq = fresh.archived_seq
        self.since_index = 0


class Verdict(enum.Enum):
    """What the run's tail says about a commit that failed."""

    LANDED = "landed"
    """The commit is on the tail: it did commit."""
    UNCHANGED = "unchanged"
    """The tail is as before the commit: it may be sent again."""


class Commit(Protocol):
    """One transaction's records, and how to tell from the tail whether they landed."""

    def describe(self) -> str:
        """What is committed, for messages: ``the append at seq 5``."""

    async def send(
        self, writer: RunProducer, sent: list[asyncio.Future[Any]]
    ) -> Callable[[], None]:
        """Send the records into the open transaction, adding their futures to ``sent``.

        Returns:
            What to apply to the writer once the transaction committed.
        """

    def judge(self, tail: RunInfo, *, in_doubt: bool) -> Verdict | EventLogError:
        """After a failure: did the commit land, is the tail unchanged, or what to raise.

        ``in_doubt`` is False after a fence, when the commit cannot have landed.
        """

    def fenced(self, tail: RunInfo) -> FencedError:
        """The error for a commit fenced once too often, or by a newer epoch."""


class Transactions:
    """Opens run writers and commits their transactions, with one failure policy."""

    def __init__(
        self, config: KafkaConfig, layout: TopicLayout, common: dict[str, Any], reader: KafkaReader
    ) -> None:
        self._config, self._layout, self._common, self._reader = config, layout, common, reader

    # -- opening ---------------------------------------------------------------------

    async def _producer(self, run_id: str) -> AIOKafkaProducer:
        producer = transactional_producer(
            **self._common,
            transactional_id=self._layout.writer_id(run_id),
            transaction_timeout_ms=int(self._config.transaction_timeout_s * 1000),
            max_request_size=MAX_RECORD_BYTES,
            max_batch_size=1024 * 1024,
        )
        doing = (
            f"run {run_id!r}: cannot start a transactional producer at "
            f"{self._config.bootstrap_servers}"
        )
        try:
            with kafka_errors(doing):
                async with asyncio.timeout(self._config.request_timeout_s):
                    await start_client(producer)  # init_transactions: fences older producers
        except BaseException:
            await stop_quietly(producer, _STOP_S)
            raise
        return producer

    async def tail(self, run_id: str) -> tuple[IndexEntry | None, int]:
        """The run's exact index entry (None: a new run) and its events partition."""
        entry = await self._reader.entry(run_id)
        if entry is None:
            return None, self._layout.partition_of(run_id)
        return (await self._reader.exact(entry))[0], entry.partition

    async def open(self, run_id: str) -> RunProducer:
        """A new writer of the run: it fenced every other one, then read the tail."""
        producer = await self._producer(run_id)
        try:
            entry, partition = await self.tail(run_id)
        except BaseException:
            await stop_quietly(producer, _STOP_S)
            raise
        if entry is None:
            return RunProducer(run_id, producer, partition, -1, -1, RunInfo(run_id), False)
        return RunProducer(
            run_id,
            producer,
            partition,
            entry.first_offset,
            entry.offset,
            entry.info,
            True,
            entry.archived_seq,
        )

    async def reopen(self, writer: RunProducer) -> None:
        """Replace the writer's producer (settling its transaction) and re-read the tail.

        Raises:
            BackendUnavailableError: the broker did not answer; the writer
                holds a stopped producer until a reopen succeeds.
        """
        await stop_quietly(writer.producer, _STOP_S)
        writer.adopt(await self.open(writer.run_id))

    # -- committing --------------------------------------------------------------------

    async def commit(self, writer: RunProducer, commit: Commit) -> None:
        """Commit ``commit`` on ``writer``, by the policy in the module docstring.

        Raises:
            FencedError: a newer epoch owns the run (or fences went on too long).
            ConflictError: another writer of this epoch wrote these seqs.
            BackendUnavailableError: not confirmed within ``request_timeout_s``;
                it may or may not be recorded.
            EventLogError: Kafka refused the records, or kept failing.
        """
        timeout = self._config.request_timeout_s
        deadline = asyncio.get_running_loop().time() + timeout
        doing = f"run {writer.run_id!r}: {commit.describe()} was not confirmed within {timeout:g}s"
        fix = (
            "the broker does not answer, so it may or may not be recorded: re-read the run "
            "once the broker answers, then retry."
        )
        try:
            with kafka_errors(doing, fix):
                async with asyncio.timeout_at(deadline):
                    await self._commit_until_settled(writer, commit, deadline)
        except BaseException as exc:
            if not isinstance(exc, AgentlogError) and writer.error is None:
                writer.error = BackendUnavailableError(
                    f"run {writer.run_id!r}: {commit.describe()} was interrupted "
                    f"({type(exc).__name__}); the writer reopens on next use"
                )
            raise

    async def _commit_until_settled(
        self, writer: RunProducer, commit: Commit, deadline: float
    ) -> None:
        run_id, failures = writer.run_id, 0
        while True:
            try:
                await self._transact(writer, commit)
                return
            except (FencedError, BackendUnavailableError) as exc:
                failure: EventLogError = exc
            in_doubt = not isinstance(failure, FencedError)
            if in_doubt and is_transient(failure):
                _log.warning(
                    "kafka_commit_retry",
                    run_id=run_id,
                    commit=commit.describe(),
                    error=str(failure),
                )
                await asyncio.sleep(_BACKOFF_S)
            else:
                failures += 1
            # Look before reopening: reopening would fence a newer writer back.
            entry, _ = await self._answered(lambda: self.tail(run_id), deadline)
            verdict = commit.judge(entry.info if entry else RunInfo(run_id), in_doubt=in_doubt)
            if isinstance(verdict, EventLogError):
                raise verdict from failure
            await self._answered(lambda: self.reopen(writer), deadline)
            verdict = commit.judge(writer.committed, in_doubt=in_doubt)
            if verdict is Verdict.LANDED:
                return
            if isinstance(verdict, EventLogError):
                raise verdict from failure
            if failures > _RETRIES:
                if not in_doubt:
                    raise commit.fenced(writer.committed) from failure
                raise EventLogError(
                    f"run {run_id!r}: {commit.describe()} failed {failures} times; the last "
                    f"time: {failure}"
                ) from failure

    async def _transact(self, writer: RunProducer, commit: Commit) -> None:
        """Begin, send and commit one transaction; apply it to the writer once committed."""
        producer = writer.producer
        sent: list[asyncio.Future[Any]] = []
        doing = f"run {writer.run_id!r}: cannot commit {commit.describe()}"
        try:
            with kafka_errors(doing, fenced=lambda: commit.fenced(writer.committed)):
                await producer.begin_transaction()
                applied = await commit.send(writer, sent)
                await producer.commit_transaction()
        except BaseException:
            for future in sent:
                future.add_done_callback(_consume)
            raise
        applied()

    async def _answered(self, call: Callable[[], Awaitable[T]], deadline: float) -> T:
        """``call()``, tried again while the broker does not answer, until ``deadline``."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                return await call()
            except BackendUnavailableError:
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(_BACKOFF_S)


def _consume(future: asyncio.Future[Any]) -> None:
    # A send future of a failed transaction holds the same error; read it so
    # asyncio does not log "exception was never retrieved".
    if not future.cancelled():
        future.exception()
