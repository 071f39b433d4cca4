"""Crypto-shredding a run: destroy its data key, and record that it was done.

``Runtime.shred(run_id)`` in four moves, each safe to repeat after a crash:

1. claim the run with ``force=True`` (as ``cancel`` does), which fences any
   writer still driving it;
2. if the run has not ended, record ``RunCancelled("shredded")``: its
   ``reason`` is content, so it must be sealed while the key still exists;
3. destroy the run's data key in the key store (``PayloadCipher.shred``):
   from here on every copy of the run's content (log, snapshots, Kafka
   topics, Parquet files) is unreadable, in every process that has not
   cached the key (see :mod:`agentlog.crypto._cache`);
4. record :class:`~agentlog.eventlog.events.RunShredded` (metadata only, so
   it stays readable: the audit trail), and let go of the run.

Shredding a shredded run records nothing and does not fail. Only an
encrypted run can be shredded: one recorded in clear raises
:class:`~agentlog.errors.NotEncryptedError` and nothing changes.

A run archived and pruned from the log (wholly, or with later events hot:
``RunInfo.archived``) is shredded the same way: the checks read its events
through the runtime's archive (:mod:`agentlog.runtime._archived`), the
Parquet files are never rewritten (they hold its sealed content, which the
destroyed key no longer opens), and the cancel and ``RunShredded`` go to its
index row in the hot log, after its archived events, as they would to a run
that was never pruned. The run index lists it as ``shredded`` at once; the
next archive pass copies those events into the archive, whose manifest then
says ``shredded`` too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from agentlog._logging import get_logger
from agentlog.crypto import PayloadCipher
from agentlog.errors import (
    FencedError,
    MissingDataKeyError,
    NoKeyStoreError,
    NotEncryptedError,
    RunArchivedError,
    UnknownRunError,
    WrongKeyError,
)
from agentlog.eventlog._base import EventLog, EventReader, RunInfo
from agentlog.eventlog._sealing import CONTENT_FIELDS
from agentlog.eventlog.events import (
    Event,
    EventData,
    RunCancelled,
    RunShredded,
    RunStatus,
    WriterClaimed,
)
from agentlog.runtime._archived import ArchiveSource, archive_history

__all__ = [
    "SHRED_REASON",
    "ShredReport",
    "check_shreddable",
    "record_shred",
    "record_shredded",
    "shredded_already",
]

_log = get_logger("agentlog.runtime")

#: The reason recorded when a run that had not ended is cancelled by a shred.
SHRED_REASON = "shredded"

#: Events read per step while looking for a run's first event with content.
_PEEK = 64

_NO_ARCHIVE = (
    "Give the runtime that archive to shred it: Runtime.open(log_url, archive=URL), "
    "URL being file://DIR or s3://BUCKET/PREFIX, or `agentlog shred RUN --archive URL`. "
    "Nothing was changed"
)


@dataclass(frozen=True, slots=True)
class ShredReport:
    """What :meth:`Runtime.shred <agentlog.runtime.Runtime.shred>` did."""

    run_id: str
    """The run."""
    shredded_at: str
    """When its data key was destroyed (ISO-8601 UTC, from the key store)."""
    key_store: str
    """Where the destroyed key lived."""
    cancelled: bool = False
    """The run had not ended, and was cancelled first."""
    already: bool = False
    """The run was shredded before: nothing was recorded this time."""
    recorded_seq: int | None = None
    """The seq of the RunShredded event recorded (None: nothing recorded here)."""


def _has_content(data: EventData) -> bool:
    return any(name in CONTENT_FIELDS for name in data.to_dict())


@contextlib.asynccontextmanager
async def _history(
    log: EventLog, info: RunInfo, archive: ArchiveSource | None
) -> AsyncIterator[EventReader]:
    """Where the run's events are read: the hot log, plus ``archive`` once
    some of them were pruned into it.

    Raises:
        RunArchivedError: the run was pruned and no ``archive`` was given.
    """
    if info.archived and archive is None:
        raise RunArchivedError(info.run_id, log.url, hint=_NO_ARCHIVE)
    async with archive_history(log, archive if info.archived else None) as history:
        yield history


async def _sealed_or_not(log: EventReader, info: RunInfo) -> None:
    """Raise unless the run's first event with content is sealed with this key store.

    A run is encrypted from its first event, or not at all, so one event
    tells; it is read a few events at a time (archived runs are read from
    Parquet).
    """
    after = 0
    while after < info.last_seq:
        upto = min(after + _PEEK, info.last_seq)
        async for event in log.read(info.run_id, after_seq=after, upto_seq=upto):
            if event.sealed is None and event.unreadable is None and not _has_content(event.data):
                continue  # metadata only: stored in clear either way
            if event.sealed is None:
                raise NotEncryptedError(info.run_id, log.url)
            if isinstance(event.unreadable, MissingDataKeyError | WrongKeyError):
                raise event.unreadable  # another key store's run: never tombstone it here
            return
        after = upto


async def check_shreddable(
    log: EventLog, run_id: str, archive: ArchiveSource | None = None
) -> tuple[PayloadCipher, RunInfo]:
    """The log's cipher and the run's index row, once the run may be shredded.

    The run's first event with content tells whether it was sealed (a run
    is encrypted from its first event, or not at all). A run pruned into an
    archive is read through ``archive``.

    Raises:
        UnknownRunError: no such run.
        NoKeyStoreError: the log has no key store.
        RunArchivedError: the run was archived and pruned, and no ``archive``
            was given (the message says how to give it); nothing was changed.
        NotEncryptedError: the run's payloads are stored in clear.
        MissingDataKeyError, WrongKeyError: this key store did not encrypt
            the run (another keyring wrote it); nothing was changed.
    """
    info = await log.find_run(run_id)
    if info is None or info.last_seq == 0:
        raise UnknownRunError(run_id, log.url)
    cipher = log.cipher
    if cipher is None:
        raise NoKeyStoreError(run_id)
    async with _history(log, info, archive) as history:
        await _sealed_or_not(history, info)
    return cipher, info


async def shredded_already(
    log: EventLog,
    cipher: PayloadCipher,
    info: RunInfo,
    archive: ArchiveSource | None = None,
) -> bool:
    """True once the run's key is destroyed and its RunShredded is recorded
    (its last event, read through ``archive`` if it was pruned into it)."""
    store = cipher.keys.store
    if not await asyncio.to_thread(store.is_shredded, info.run_id):
        return False
    if info.status == RunStatus.SHREDDED:
        return True
    async with _history(log, info, archive) as history:
        last = [e async for e in history.read(info.run_id, after_seq=info.last_seq - 1)]
    return bool(last) and isinstance(last[-1].data, RunShredded)


async def _append(log: EventLog, info: RunInfo, epoch: int, *data: EventData) -> int:
    """Append ``data`` after the run's last event at ``epoch``; return the last seq."""
    events = [
        Event(info.run_id, info.last_seq + i, item, writer_epoch=epoch)
        for i, item in enumerate(data, start=1)
    ]
    await log.append(events, durable=True)
    return events[-1].seq


async def record_shred(
    log: EventLog, cipher: PayloadCipher, run_id: str, owner: str, lease_seconds: float
) -> ShredReport:
    """Moves 1 to 4 of the module docstring, on a log with direct writes."""
    store = cipher.keys.store
    epoch = await log.claim_writer(run_id, owner=owner, lease_seconds=lease_seconds, force=True)
    try:
        info = await log.get_run(run_id)  # as it stands now that nobody else writes
        cancelled = False
        if info.status not in RunStatus.TERMINAL:
            if await asyncio.to_thread(store.is_shredded, run_id):
                # Its key went without a cancel (KeyStore.destroy by hand): a
                # cancel can no longer be sealed, and nothing can drive it anyway.
                _log.warning("shredded run had not ended", run_id=run_id, status=info.status)
            else:
                cancel = RunCancelled(SHRED_REASON)
                await _append(log, info, epoch, WriterClaimed(epoch, owner), cancel)
                info, cancelled = await log.get_run(run_id), True
        at = await asyncio.to_thread(cipher.shred, run_id)
        seq = await _append(log, info, epoch, RunShredded(at=at, by=owner))
    finally:
        with contextlib.suppress(FencedError, UnknownRunError):
            await log.release_lease(run_id, epoch)
    _log.info("run shredded", run_id=run_id, at=at, cancelled=cancelled)
    return ShredReport(run_id, at, store.description, cancelled=cancelled, recorded_seq=seq)


async def record_shredded(
    log: EventLog, run_id: str, shredded: RunShredded, owner: str, lease_seconds: float
) -> None:
    """As the run's owner, append ``shredded`` unless it is recorded (a worker
    applying a client's ``shred`` command: the client destroyed the key).

    Only metadata is appended, and nothing is replayed: the run's content
    cannot be read any more.
    """
    epoch = await log.claim_writer(run_id, owner=owner, lease_seconds=lease_seconds, force=True)
    try:
        info = await log.get_run(run_id)
        last = [e async for e in log.read(run_id, after_seq=info.last_seq - 1)]
        if not (last and isinstance(last[-1].data, RunShredded)):
            await _append(log, info, epoch, shredded)
    finally:
        with contextlib.suppress(FencedError, UnknownRunError):
            await log.release_lease(run_id, epoch)
