"""What every route of the UI shares, opened once for the server's lifetime."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.requests import Request

from agentlog.archive import ArchivedEventLog, ArchiveStore, open_archive
from agentlog.crypto import KeyStore
from agentlog.eventlog.base import EventLog, EventReader
from agentlog.eventlog.urls import open_log, redact_url
from agentlog.replay import RunCatalog, RunHistory
from agentlog.runtime import Runtime, RuntimeConfig, Workflow

__all__ = ["UiContext", "open_context", "ui_context"]


@dataclass
class UiContext:
    """The open log, archive and (with actions) runtime behind the pages."""

    log_url: str
    """The hot log's URL (shown redacted, never with a password)."""
    hot: EventLog
    """The hot log, opened without creating it."""
    reader: EventReader
    """The hot log and the archive as one history (the hot log alone with no archive)."""
    store: ArchiveStore | None
    """The archive, or None when none was ever written."""
    keys: KeyStore | None
    """Opens encrypted payloads; None shows sealed content as metadata only."""
    allow_actions: bool
    """Whether resume, cancel and fork are served (``--allow-actions``)."""
    runtime: Runtime | None = None
    """Drives the runs an action resumes (only with actions)."""
    csrf_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    """The per-process secret every action request must carry in ``X-CSRF-Token``."""

    @property
    def where(self) -> str:
        """The log's URL without credentials, for page titles."""
        return redact_url(self.log_url)

    def catalog(self) -> RunCatalog:
        """The runs of the hot log and the archive, for the runs page."""
        return RunCatalog(self.reader, self.store, keys=self.keys)

    async def history(self, run_id: str) -> RunHistory:
        """One run's history. Raises UnknownRunError for an unknown run."""
        return await RunHistory.open(run_id, self.reader, self.store, keys=self.keys)


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
    workflows: Iterable[Workflow[Any]],
) -> AsyncIterator[UiContext]:
    """Open the log (never creating it), the archive if one exists, and with
    actions a runtime that drives what the UI resumes; close them all at the end."""
    hot = await open_log(log_url, create=False, keys=keys)
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(hot.close)
        store = _archive_or_none(archive_url)
        reader: EventReader = hot
        if store is not None:
            reader = ArchivedEventLog(hot, store)
            stack.push_async_callback(reader.close)
        runtime = None
        if allow_actions:
            runtime = await Runtime.open(
                log_url, workflows=workflows, config=RuntimeConfig(worker=False), keys=keys
            )
            stack.push_async_callback(runtime.close)
        yield UiContext(log_url, hot, reader, store, keys, allow_actions, runtime)


def _archive_or_none(archive_url: str) -> ArchiveStore | None:
    local = archive_url.startswith("file://")
    if local and not Path(archive_url[len("file://") :]).exists():
        return None  # no archive was ever written here
    return open_archive(archive_url)
