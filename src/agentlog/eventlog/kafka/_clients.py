"""Making, starting and stopping aiokafka clients for the Kafka backend, with bounds.

:func:`transactional_producer` makes the run writers' producers. Right after
a commit, until the broker has written the transaction's markers (a few ms),
it answers the next transaction's AddPartitionsToTxn with
CONCURRENT_TRANSACTIONS, and aiokafka 0.14 waits a fixed 20 ms before asking
again (``BACKOFF_OVERRIDE``, a module constant of ``aiokafka.producer.sender``).
With one transaction per step that wait dominated: 28 ms per step against
7 ms with 2 ms. Our producers ask again after :data:`QUICK_TXN_RETRY_S`
instead, through their own sender; no module of aiokafka is changed, so other
producers in the process keep aiokafka's behaviour.

Two aiokafka behaviours need care when the broker is gone:

* ``AIOKafkaProducer.stop()`` first waits for its queued batches to be
  delivered, which never happens while the broker is down;
* a consumer's ``stop()`` cancels its fetcher's in-flight requests and then
  awaits them, so it re-raises their ``CancelledError`` (with no message)
  to a caller that was never cancelled.

:func:`stop_quietly` bounds the first and swallows the second (unless the
calling task itself is being cancelled), so closing a log during an outage
neither hangs nor hides the error that the outage caused. Either way that
``stop()`` ended before it closed the client's connections, so it then closes
them itself: otherwise their sockets stay open until the garbage collector
finds them (a ResourceWarning, raised in whatever code runs then).

A third needs care when a start is cut short: ``bootstrap()`` holds its first
connection in a local variable while it waits for the cluster's metadata, so
a ``start()`` cancelled there (by a timeout, on a slow broker) leaks that
socket where no ``stop()`` can reach it. :func:`start_client` lets the start
end on its own first.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.client import AIOKafkaClient, CoordinationType
from aiokafka.conn import CloseReason
from aiokafka.errors import ConcurrentTransactions, KafkaError, NoError, for_code
from aiokafka.producer.sender import AddPartitionsToTxnHandler, Sender

from agentlog._logging import get_logger

__all__ = ["QUICK_TXN_RETRY_S", "start_client", "stop_quietly", "transactional_producer"]

_log = get_logger(__name__)

#: How long our transactional producers wait before asking again to add a
#: partition to a transaction while the previous one is still finishing.
QUICK_TXN_RETRY_S = 0.002


def transactional_producer(**config: Any) -> AIOKafkaProducer:
    """An ``AIOKafkaProducer(**config)`` that retries a finishing transaction quickly.

    Only this producer's sender changes (see the module docstring). On an
    aiokafka whose producer is laid out otherwise it is a plain producer.
    """
    producer = AIOKafkaProducer(**config)
    if type(getattr(producer, "_sender", None)) is Sender:
        producer._sender.__class__ = _QuickTxnSender
    return producer


class _QuickAddPartitions(AddPartitionsToTxnHandler):  # type: ignore[misc]
    """aiokafka's handler, with our wait for CONCURRENT_TRANSACTIONS."""

    def handle_response(self, resp: Any) -> float | None:
        backoff: float | None = super().handle_response(resp)
        # aiokafka stops at the first partition in error, and uses its short
        # wait only while no partition is in the transaction yet.
        if (
            backoff is not None
            and _first_error(resp) is ConcurrentTransactions
            and not self._sender._txn_manager.txn_partitions
        ):
            return QUICK_TXN_RETRY_S
        return backoff


class _QuickTxnSender(Sender):  # type: ignore[misc]
    """aiokafka's sender, adding partitions to transactions with :class:`_QuickAddPartitions`."""

    def add_partitions_handler(self, tps: Any) -> _QuickAddPartitions:
        """The handler of one AddPartitionsToTxn request."""
        return _QuickAddPartitions(self, tps)

    async def _do_add_partitions_to_txn(self, tps: Any) -> bool:
        node_id = await self._find_coordinator(
            CoordinationType.TRANSACTION, self._txn_manager.transactional_id
        )
        done: bool = await self.add_partitions_handler(tps).do(node_id)
        return done


def _first_error(resp: Any) -> type[Exception] | None:
    for _topic, partitions in resp.errors:
        for _partition, code in partitions:
            error: type[Exception] = for_code(code)
            if error is not NoError:
                return error
    return None


#: How long a start cut short may still run to its end before it is cancelled.
_START_GRACE_S = 15.0


async def start_client(client: Any) -> None:
    """Start an aiokafka client; a caller that gives up leaves no socket behind.

    ``start()`` runs in a task of its own. When the caller is cancelled or
    times out meanwhile, the start may still finish (for up to
    :data:`_START_GRACE_S`; aiokafka's request timeout bounds it too), and the
    client is then stopped, before the cancellation goes on.

    Raises:
        whatever ``start()`` raised, or the caller's cancellation.
    """
    task = asyncio.ensure_future(client.start())
    try:
        await asyncio.shield(task)
    except BaseException:
        if not task.done():
            await asyncio.wait({task}, timeout=_START_GRACE_S)
            if not task.done():
                task.cancel()
                await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # raised to the caller already, or superseded by its cancel
        await stop_quietly(client, _START_GRACE_S)
        raise


async def stop_quietly(client: Any, timeout_s: float) -> None:
    """Stop (or close) an aiokafka client that is being discarded; never raise.

    Args:
        client: a producer, consumer or admin client (``stop()`` or ``close()``),
            or anything else with a ``stop()`` coroutine.
        timeout_s: how long to wait for it; past that it is left to the
            garbage collector, with a warning.

    Raises:
        asyncio.CancelledError: only when the calling task is being cancelled.
    """
    stop = getattr(client, "stop", None) or client.close
    try:
        async with asyncio.timeout(timeout_s):
            await stop()
        # A connection its metadata sync opened while it stopped: close it too.
        _close_connections(client)
    except asyncio.CancelledError:
        _close_connections(client)
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        # aiokafka's own in-flight fetch, cancelled by its stop(): not ours.
    except (TimeoutError, KafkaError, OSError, RuntimeError) as exc:
        _close_connections(client)
        _log.warning(
            "kafka_client_stop_failed",
            client=type(client).__name__,
            error=f"{type(exc).__name__}: {exc}",
        )
    _retrieve_fatal_error(client)


def _close_connections(client: Any) -> None:
    """Close the connections of a client whose ``stop()`` did not finish.

    Synchronous, so that it also runs when the caller is being cancelled.
    The background tasks that could open new connections stop first (a
    producer's sender, the client's metadata sync, a consumer's fetcher and
    group coordinator); each socket is then
    aborted, not closed gracefully, since its peer may never read again.
    (Private attributes of aiokafka 0.14, looked up defensively: a client
    without them is left as it is.)
    """
    sender = getattr(getattr(client, "_sender", None), "sender_task", None)
    kafka = getattr(client, "_client", None) or getattr(client, "client", None)
    tasks = [sender, getattr(kafka, "_sync_task", None)]
    # A group consumer's stop() first waits for its coordination task to end
    # (a rebalance may wait for a stalled member); cut short, that task and
    # the heartbeat would reconnect to the coordinator after the sweep below.
    for part in (getattr(client, "_coordinator", None), getattr(client, "_fetcher", None)):
        tasks.extend(vars(part).values() if part is not None and hasattr(part, "__dict__") else ())
    for task in tasks:
        if isinstance(task, asyncio.Task) and not task.done():
            task.cancel()
    if not isinstance(kafka, AIOKafkaClient):
        return
    for conn in list(getattr(kafka, "_conns", {}).values()):
        writer = getattr(conn, "_writer", None)
        transport = getattr(writer, "transport", None)
        conn.close(reason=CloseReason.SHUTDOWN)  # fails its pending requests
        if transport is not None:
            transport.abort()


def _retrieve_fatal_error(client: Any) -> None:
    """Mark the errors a fenced producer left on its own futures as seen.

    When a producer is fenced, aiokafka 0.14 fails futures that nobody
    awaits: the transaction waiter (a fresh one when the error goes from
    abortable to fatal), the futures of offsets added to the transaction, and
    each unsent batch's drain waiter. Garbage collected, each is logged as
    "Future exception was never retrieved", from inside whatever code runs
    then. The producer is discarded here, and the error was already raised
    to the caller (as FencedError or NotOwnerError). (Read-only use of
    private attributes, looked up defensively.)
    """
    manager = getattr(client, "_txn_manager", None)
    futures: list[Any] = [getattr(manager, "_transaction_waiter", None)]
    futures += [entry[-1] for entry in getattr(manager, "_pending_txn_offsets", ())]
    accumulator = getattr(client, "_message_accumulator", None)
    batches = [b for queue in getattr(accumulator, "_batches", {}).values() for b in queue]
    batches += list(getattr(accumulator, "_pending_batches", ()))
    for batch in batches:
        futures += [getattr(batch, "future", None), getattr(batch, "_drain_waiter", None)]
    for future in futures:
        if isinstance(future, asyncio.Future) and future.done() and not future.cancelled():
            future.exception()
