"""The read side of the EventLog seam: :class:`EventReader`.

A run's events (``read``, and ``tail``, the one tail loop written over it),
its index row (``find_run``, ``get_run``, ``list_runs``, ``page_runs``) and
its snapshots (``load_snapshot``). A read-only source implements it alone,
as the archive's history does; every
:class:`~agentlog.eventlog._base.EventLog` is one too, and
:mod:`agentlog.eventlog._base` re-exports it, where backends import it from.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Self

from agentlog.crypto import PayloadCipher
from agentlog.errors import RunArchivedError, UnknownRunError
from agentlog.eventlog._records import RunInfo, Snapshot, status_ended
from agentlog.eventlog._run_pages import RunQuery, RunsPage, page_in_memory
from agentlog.eventlog._sealing import open_blob
from agentlog.eventlog._tail import TailWake
from agentlog.eventlog.events import Event, status_after

__all__ = ["EventReader"]


class EventReader(abc.ABC):
    """The read side of the seam: a run's events, its index row, its snapshots.

    A read-only source (the archive's history,
    :class:`~agentlog.archive.ArchivedEventReader`) implements this alone; every
    :class:`EventLog` is one too. The projector, replay and the CLI's read
    commands take an EventReader. Every method is a coroutine; use it as an
    async context manager, or call :meth:`close`.
    """

    #: A URL that opens this source again, such as ``sqlite:///.agentlog/agentlog.db``.
    url: str = ""

    #: Opens payload content and snapshots sealed at rest (see
    #: :mod:`agentlog.eventlog._sealing`); None reads them in clear only.
    cipher: PayloadCipher | None = None

    def _opened_snapshot(self, snapshot: Snapshot | None) -> Snapshot | None:
        """A stored snapshot with its state opened (plain ones pass through).

        Raises:
            ShreddedError, KeyStoreMissingError and the other EncryptionErrors.
        """
        if snapshot is None:
            return None
        state = open_blob(self.cipher, snapshot.run_id, snapshot.seq, "snapshot", snapshot.state)
        return snapshot if state is snapshot.state else dataclasses.replace(snapshot, state=state)

    # -- events ---------------------------------------------------------------

    @abc.abstractmethod
    def read(
        self, run_id: str, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> AsyncIterator[Event]:
        """The run's events with ``after_seq < seq <= upto_seq``, in seq order.

        The seqs come with no gap, up to ``upto_seq`` or the run's last seq.

        Raises:
            UnknownRunError: nothing was ever recorded for ``run_id``.
            RunArchivedError: the run was pruned (``RunInfo.archived``) and
                the range starts before the first event still stored; read
                it through the archive.
            CorruptEventError: a stored event does not decode or fails its
                checksum, or a seq is missing; it names the run and the seq.
        """

    async def tail(
        self, run_id: str, *, after_seq: int = 0, poll_seconds: float = 0.05
    ) -> AsyncIterator[Event]:
        """Follow the run: yield events as they are recorded.

        Ends after the run's terminal event (completed, failed or cancelled).
        Between reads it waits as the backend's :meth:`_tail_wake` says: this
        default polls :meth:`read` every ``poll_seconds``; a backend with change
        notification wakes at once (``Capabilities.live_tail``) and waits for
        a run that has no event yet.
        """
        wake = await self._tail_wake(run_id, poll_seconds)
        try:
            while True:
                armed = wake.arm()
                try:
                    async for event in self.read(run_id, after_seq=after_seq):
                        after_seq = event.seq
                        yield event
                        if status_ended(status_after("", event.type)):
                            return
                except RunArchivedError:
                    raise
                except UnknownRunError:
                    if not wake.waits_for_start:
                        raise
                await wake.wait(armed, after_seq)
        finally:
            await wake.close()

    async def _tail_wake(self, run_id: str, poll_seconds: float) -> TailWake:
        """How :meth:`tail` waits between reads of ``run_id`` (see
        :mod:`agentlog.eventlog._tail`); this default polls."""
        del run_id
        return TailWake(poll_seconds)

    # -- the run index ----------------------------------------------------------

    @abc.abstractmethod
    async def find_run(self, run_id: str) -> RunInfo | None:
        """The run's index row, or None if the run is unknown."""

    async def get_run(self, run_id: str) -> RunInfo:
        """The run's index row. Raises UnknownRunError if it is unknown."""
        info = await self.find_run(run_id)
        if info is None or info.last_seq == 0:
            raise UnknownRunError(run_id, self.url)
        return info

    @abc.abstractmethod
    async def list_runs(self, *, status: str | None = None) -> list[RunInfo]:
        """Every run with at least one event, most recently updated first."""

    async def page_runs(self, query: RunQuery) -> RunsPage:
        """One page of the run list: the rows, the total and the counts by status.

        Filters and order are :class:`~agentlog.eventlog._run_pages.RunQuery`'s
        (newest update first, then run id). This default pages
        :meth:`list_runs` in memory; a backend with a run index table overrides
        it with one indexed query, so a page of 100,000 runs reads one page.
        """
        return page_in_memory(await self.list_runs(), query)

    async def list_workflows(self) -> list[str]:
        """The workflow names of every run with at least one event, sorted."""
        return sorted({info.workflow for info in await self.list_runs()})

    # -- snapshots ----------------------------------------------------------------

    @abc.abstractmethod
    async def load_snapshot(
        self, run_id: str, *, at_or_before: int | None = None
    ) -> Snapshot | None:
        """The newest snapshot with ``seq <= at_or_before`` (any seq if None)."""

    # -- lifecycle ------------------------------------------------------------------

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections and files."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
