"""Runs whose events were archived and pruned from the hot log, read through the archive.

The archiver (:mod:`agentlog.archive`) moves a run's events to Parquet and
leaves its index row in the hot log as a tombstone (``RunInfo.archived``):
the run id stays taken, but a finished run's state can then only be folded
from the archive. A runtime given the archive (``Runtime.open(url,
archive=URL)``) reads such a run through it, so ``start`` of its id returns
it and ``wait``, ``result`` and ``get_state`` answer with the archived run;
``fork`` copies an archived origin from it. A runtime without one says that
the run is archived and how to read it, instead of starting a second history.

This is the one runtime module that loads :mod:`agentlog.archive`, and only
lazily: the archive (and DuckDB with it) is imported when a runtime is given
an archive URL or reads an archived run, never by ``import agentlog``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, TypeAlias, Union

from agentlog.errors import RunArchivedError
from agentlog.eventlog._base import EventLog, EventReader
from agentlog.projector._snapshots import load_state
from agentlog.projector._state import RunState

if TYPE_CHECKING:  # only named in annotations: the archive is imported when it is read
    import agentlog.archive._store
    from agentlog.archive._store import ArchiveStore

#: Where archived runs are read from: an archive URL or an open store. A
#: ``Union`` naming the store by its full path, not one string, so that
#: ``ArchiveSource | None`` is a type at run time too and resolves in any
#: module that uses it (the API reference evaluates Runtime's signatures).
ArchiveSource: TypeAlias = Union[str, "agentlog.archive._store.ArchiveStore"]

__all__ = ["ArchiveSource", "archive_history", "open_archive_source", "read_state"]

_NO_ARCHIVE = (
    "Give the runtime that archive to read it here: Runtime.open(log_url, archive=URL) "
    "or Runtime(log, archive=URL), URL being file://DIR or s3://BUCKET/PREFIX; or read "
    "it with `agentlog show RUN --archive URL`"
)


def open_archive_source(source: ArchiveSource) -> ArchiveStore:
    """``source`` as an open store, so a bad URL fails when it is given, not at
    the first read.

    Raises:
        ArchiveConfigError: ``source`` is not a supported archive URL.
    """
    if not isinstance(source, str):
        return source
    from agentlog.archive._store import open_archive

    return open_archive(source)


@contextlib.asynccontextmanager
async def archive_history(
    log: EventLog, archive: ArchiveSource | None
) -> AsyncIterator[EventReader]:
    """Where a run's history is read: the hot log, plus ``archive`` if given.

    Sealed archived content is opened with the hot log's cipher.
    """
    if archive is None:
        yield log
        return
    from agentlog.archive._reader import ArchivedEventReader

    combined = ArchivedEventReader(log, open_archive_source(archive))
    try:
        yield combined
    finally:
        await combined.close()


async def read_state(log: EventLog, archive: ArchiveSource | None, run_id: str) -> RunState:
    """The run's state: from the hot log, or from ``archive`` once its events
    were pruned into it.

    Raises:
        UnknownRunError: no such run.
        RunArchivedError: its events were pruned into an archive and no
            ``archive`` was given (the message says how to give one), or
            ``archive`` does not hold them.
    """
    try:
        return await load_state(log, run_id)
    except RunArchivedError:
        if archive is None:
            raise RunArchivedError(run_id, log.url, hint=_NO_ARCHIVE) from None
    async with archive_history(log, archive) as history:
        return await load_state(history, run_id)
