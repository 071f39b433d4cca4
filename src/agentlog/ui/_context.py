"""What every route of the UI shares, opened once for the server's lifetime."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.requests import Request

from agentlog.archive import ArchivedEventReader, ArchiveStore, open_archive
from agentlog.crypto import KeyStore
from agentlog.eventlog._base import EventLog, EventReader
from agentlog.eventlog._urls import open_log, redact_url
from agentlog.replay import RunCatalog, RunHistory
from agentlog.runtime import Runtime, RuntimeConfig, Workflow

__all__ = ["HISTORIES_KEPT", "UiContext", "open_context", "ui_context"]

#: How many runs' histories stay open between requests: a run page's calls
#: (events, states, the live timeline) reuse one, and its timeline grows by
#: the new events only instead of being folded again from seq 1.
HISTORIES_KEPT = 32


@dataclass
class UiContext:
    """The open log, archive and (with actions) runtime behind the pages."""

    log_url: str
    """The hot log's URL (shown redacted, never with a password)."""
    log: EventLog
    """The hot log, opened without creating it."""
    reader: EventReader
    """The hot log and the archive as one history (the hot log alone with no
    archive): what the live feed tails."""
    store: ArchiveStore | None
    """The archive, or None when none was ever written."""
    keys: KeyStore | None
    """Opens encrypted payloads; None shows sealed content as metadata only."""
    catalog: RunCatalog
    """The runs of the hot log and the archive, for the runs page."""
    allow_actions: bool
    """Whether resume, cancel and fork are served (``--allow-actions``)."""
    runtime: Runtime | None = None
    """Drives the runs an action resumes (only with actions)."""
    trace_url: str | None = None
    """A trace viewer's URL with ``{trace_id}`` in it: the run page links to
    the run's OpenTelemetry trace there (``agentlog ui --trace-url``)."""
    csrf_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    """The per-process secret every action request must carry in ``X-CSRF-Token``."""
    live_feeds: int = 0
    """Live feeds (server-sent event streams) open now: ``/api/health`` shows it."""
    sql_running: int = 0
    """SQL queries running now (``/api/health``): a stopped one is gone from here."""
    catalog_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """One catalog query at a time: its DuckDB connection serves one thread."""
    _histories: OrderedDict[str, tuple[RunHistory, asyncio.Lock]] = field(
        default_factory=OrderedDict
    )
    _opening: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def where(self) -> str:
        """The log's URL without credentials, for page titles."""
        return redact_url(self.log_url)

    async def history(self, run_id: str) -> RunHistory:
        """One run's history (kept open for the next request).

        Raises:
            UnknownRunError: the run is neither in the hot log nor in the archive.
        """
        return (await self._entry(run_id))[0]

    async def timeline(self, run_id: str, first_step: int | None, steps: int) -> dict[str, Any]:
        """A window of at most ``steps`` supersteps of the run's timeline, from
        ``first_step`` (None: the latest ones, where a live run moves).

        One request at a time extends a run's kept window with its new events.
        """
        history, lock = await self._entry(run_id)
        async with lock:
            return await history.timeline(first_step=first_step, max_steps=steps)

    async def origin(self, run_id: str) -> dict[str, Any] | None:
        """``{"run_id", "seq"}`` of the run ``run_id`` was forked from, or None."""
        return await (await self.history(run_id)).forked_from()

    async def _entry(self, run_id: str) -> tuple[RunHistory, asyncio.Lock]:
        async with self._opening:
            entry = self._histories.get(run_id)
            if entry is not None:
                self._histories.move_to_end(run_id)
                return entry
            history = await RunHistory.open(run_id, self.log, self.store, keys=self.keys)
            entry = self._histories[run_id] = (history, asyncio.Lock())
            while len(self._histories) > HISTORIES_KEPT:
                await self._histories.popitem(last=False)[1][0].close()
            return entry

    async def close(self) -> None:
        """Close the kept histories."""
        while self._histories:
            await self._histories.popitem()[1][0].close()


def ui_context(request: Request) -> UiContext:
    """The context the app was started with."""
    context: UiContext = request.app.state.ui
    return context


@contextlib.asynccontextmanager
async def open_context(
    log_url: str,
    archive_url: str,
    *,
    allow_actions: bool,
    keys: KeyStore | None,
    workflows: Iterable[Workflow[Any, Any]],
) -> AsyncIterator[UiContext]:
    """Open the log (never creating it), the archive if one exists, and with
    actions a runtime that drives what the UI resumes; close them all at the end."""
    hot = await open_log(log_url, create=False, keys=keys)
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(hot.close)
        store = _archive_or_none(archive_url)
        reader: EventReader = hot
        if store is not None:
            reader = ArchivedEventReader(hot, store)
            stack.push_async_callback(reader.close)
        catalog = RunCatalog(hot, store, keys=keys)
        stack.push_async_callback(catalog.close)
        runtime = None
        if allow_actions:
            runtime = await Runtime.open(
                log_url, workflows=workflows, config=RuntimeConfig(worker=False), keys=keys
            )
            stack.push_async_callback(runtime.close)
        context = UiContext(log_url, hot, reader, store, keys, catalog, allow_actions, runtime)
        stack.push_async_callback(context.close)
        yield context


def _archive_or_none(archive_url: str) -> ArchiveStore | None:
    local = archive_url.startswith("file://")
    if local and not Path(archive_url[len("file://") :]).exists():
        return None  # no archive was ever written here
    return open_archive(archive_url)
