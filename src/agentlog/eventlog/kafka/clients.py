"""Starting and stopping aiokafka clients for the Kafka backend, with bounds.

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
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka.client import AIOKafkaClient
from aiokafka.conn import CloseReason
from aiokafka.errors import KafkaError

from agentlog._logging import get_logger

__all__ = ["stop_quietly"]

log = get_logger(__name__)


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
    except asyncio.CancelledError:
        _close_connections(client)
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        # aiokafka's own in-flight fetch, cancelled by its stop(): not ours.
    except (TimeoutError, KafkaError, OSError, RuntimeError) as exc:
        _close_connections(client)
        log.warning(
            "kafka_client_stop_failed",
            client=type(client).__name__,
            error=f"{type(exc).__name__}: {exc}",
        )
    _retrieve_fatal_error(client)


def _close_connections(client: Any) -> None:
    """Close the connections of a client whose ``stop()`` did not finish.

    Synchronous, so that it also runs when the caller is being cancelled.
    The background tasks that could open new connections stop first (a
    producer's sender, the client's metadata sync); each socket is then
    aborted, not closed gracefully, since its peer may never read again.
    (Private attributes of aiokafka 0.14, looked up defensively: a client
    without them is left as it is.)
    """
    sender = getattr(getattr(client, "_sender", None), "sender_task", None)
    kafka = getattr(client, "_client", None) or getattr(client, "client", None)
    for task in (sender, getattr(kafka, "_sync_task", None)):
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
    """Mark a fenced producer's last transaction error as seen.

    When a fenced producer goes from an abortable to a fatal error, aiokafka
    0.14 puts the error on a fresh future that nobody awaits; garbage
    collected, it is logged as "Future exception was never retrieved", from
    inside whatever code runs then. The producer is discarded here, and the
    error was already raised to the caller as FencedError. (Read-only use of
    a private attribute, looked up defensively.)
    """
    manager = getattr(client, "_txn_manager", None)
    waiter = getattr(manager, "_transaction_waiter", None)
    if isinstance(waiter, asyncio.Future) and waiter.done() and not waiter.cancelled():
        waiter.exception()
