"""One place that turns aiokafka's errors into agentlog's, as httpx maps transport errors.

Every call into aiokafka runs inside :func:`kafka_errors`, which names what
was being done and what to do about a failure::

    with kafka_errors(f"cannot save snapshot of run {run_id!r}", "retry ..."):
        await producer.send_and_wait(...)

The mapping, most specific first (always ``raise ... from exc``):

* ``ProducerFenced``, ``InvalidProducerEpoch`` -> the block's ``fenced()``
  error, a :class:`FencedError` that names what was fenced: another producer
  opened the transactional id (a newer writer of the run, a reader aborting
  a stalled transaction, a newer owner of the partition); the caller looks
  at the tail to tell which. A block that gives no ``fenced`` uses no
  transactional producer: a fence there is an :class:`EventLogError`.
* ``MessageSizeTooLargeError``, ``RecordListTooLargeError``,
  ``InvalidTopicError`` -> :class:`EventLogError`: Kafka refused the records;
  no retry can fix that.
* any other ``KafkaError``, ``OSError`` or ``TimeoutError`` ->
  :class:`BackendUnavailableError`: the broker did not answer, or answered
  with an error; whatever was in flight may or may not be recorded.

agentlog's own errors pass through untouched, so blocks may nest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from aiokafka.errors import (
    InvalidProducerEpoch,
    InvalidTopicError,
    KafkaError,
    MessageSizeTooLargeError,
    ProducerFenced,
    RecordListTooLargeError,
)

from agentlog.errors import BackendUnavailableError, EventLogError, FencedError

__all__ = ["RETRY", "is_transient", "kafka_errors"]

#: The usual advice when the broker does not answer.
RETRY = "retry once the broker answers"

_FENCED = (ProducerFenced, InvalidProducerEpoch)
_REFUSED = (MessageSizeTooLargeError, RecordListTooLargeError, InvalidTopicError)
_DRIVER = (KafkaError, OSError, TimeoutError)


@contextmanager
def kafka_errors(
    doing: str | Callable[[], str],
    fix: str | Callable[[], str] = RETRY,
    *,
    fenced: Callable[[], FencedError] | None = None,
) -> Iterator[None]:
    """Map the aiokafka errors raised inside the block to agentlog's.

    Args:
        doing: what failed, phrased to start the message ("cannot read topic
            X partition 0 within 3s"); a callable is asked only on failure,
            for a message that depends on how far the block got.
        fix: what the caller can do about it, ending the message (a
            callable too, asked only on failure).
        fenced: the error for a fence of the block's transactional
            producer, naming the run (and its epochs) or the partition it writes.

    Raises:
        FencedError: what ``fenced()`` returns: the block's transactional
            producer was fenced.
        EventLogError: Kafka refused the records (too large, bad topic).
        BackendUnavailableError: any other driver error; see :func:`is_transient`.
    """
    try:
        yield
    except _FENCED as exc:
        if fenced is None:
            raise EventLogError(
                f"{_text(doing)}: another producer with the same transactional id fenced "
                f"this one ({_cause(exc)}); {_text(fix)}"
            ) from exc
        raise fenced() from exc
    except _REFUSED as exc:
        raise EventLogError(
            f"{_text(doing)}: Kafka refused it ({_cause(exc)}); no retry can fix this. "
            "Make the records smaller (16 MiB at most) or check the topic."
        ) from exc
    except _DRIVER as exc:
        raise BackendUnavailableError(f"{_text(doing)} ({_cause(exc)}); {_text(fix)}") from exc


def is_transient(error: BaseException) -> bool:
    """Whether a mapped error came from a failure that may pass by itself.

    aiokafka marks each of its errors ``retriable`` or not; a timeout or a
    socket error always may pass. An error that is not transient (an error
    code aiokafka does not know, say) still leaves a commit in doubt, but
    repeating the same call is unlikely to help.
    """
    cause = error.__cause__
    if isinstance(cause, KafkaError):
        return bool(cause.retriable)
    return isinstance(cause, OSError | TimeoutError)


def _text(doing: str | Callable[[], str]) -> str:
    return doing if isinstance(doing, str) else doing()


def _cause(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
