"""The options every command shares, declared once."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Annotated, Any

import typer

from agentlog.archive import ArchivedEventReader, ArchiveStore, open_archive
from agentlog.crypto import KeyStore, LocalKeyStore
from agentlog.errors import ConfigError
from agentlog.eventlog._base import EventReader
from agentlog.eventlog._urls import open_log
from agentlog.runtime import Runtime, RuntimeConfig, Workflow

__all__ = [
    "AppOpt",
    "ArchiveOpt",
    "EndpointOpt",
    "InternalOpt",
    "JsonOpt",
    "LogOpt",
    "existing_archive",
    "key_store",
    "size_bytes",
    "open_runtime",
    "read_history",
]

LogOpt = Annotated[
    str,
    typer.Option(
        "--log", envvar="AGENTLOG_LOG", help="Event log URL (sqlite:///FILE, kafka://HOST/NAME)."
    ),
]
ArchiveOpt = Annotated[
    str,
    typer.Option(
        "--archive",
        envvar="AGENTLOG_ARCHIVE",
        help="Archive URL: file://DIR or s3://BUCKET/PREFIX.",
    ),
]
EndpointOpt = Annotated[
    str | None,
    typer.Option(
        "--endpoint",
        envvar="AGENTLOG_S3_ENDPOINT",
        help="An S3 endpoint such as http://127.0.0.1:9000 (MinIO); default: AWS settings.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
InternalOpt = Annotated[
    bool,
    typer.Option(
        "--internal",
        help="Also show the runtime's bookkeeping (tasks, pending writes, attempts, "
        "writer_epoch...), which is hidden by default.",
    ),
]
AppOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--app",
        metavar="MODULE:ATTR",
        help="Where your workflows are: module:attribute or path/to/file.py:attribute, "
        "naming a Workflow or a list of them (repeatable). The demo's workflow is always known.",
    ),
]


_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([KMGT])(i?)B", flags=re.IGNORECASE)


def size_bytes(flag: str, value: str) -> int:
    """``value`` (``64MB``, ``1GiB``...) in bytes, read as DuckDB reads a memory limit:
    KB, MB, GB, TB are powers of 1000, KiB, MiB, GiB, TiB powers of 1024.

    Raises:
        ConfigError: not a size, naming ``flag``.
    """
    found = _SIZE.fullmatch(value.strip())
    if found is None:
        raise ConfigError(f"{flag} {value!r}: write a size such as 1GB or 512MB")
    number, unit, binary = found.groups()
    base = 1024 if binary else 1000
    return int(float(number) * base ** ("KMGT".index(unit.upper()) + 1))


def key_store() -> KeyStore | None:
    """The key store every command uses: the keyring file ``AGENTLOG_KEYRING``
    names (created on first use), or None (payloads in clear; encrypted ones
    read back as metadata only)."""
    return LocalKeyStore.from_env()


def existing_archive(url: str, endpoint: str | None = None) -> ArchiveStore | None:
    """The archive at ``url``; None for a local folder that was never written
    (the default ``file://.agentlog/archive`` before any ``agentlog archive``),
    so that commands work the same on a log that was never archived.

    Raises:
        ArchiveConfigError: ``url`` is not a supported archive URL.
    """
    if url.startswith("file://") and not Path(url[len("file://") :]).exists():
        return None
    return open_archive(url, endpoint_url=endpoint)


async def open_runtime(
    log_url: str,
    *,
    workflows: Iterable[Workflow[Any, Any]] = (),
    config: RuntimeConfig,
    archive: ArchiveStore | None = None,
) -> Runtime:
    """A runtime on ``log_url`` with the commands' key store (:func:`key_store`),
    reading runs archived and pruned from the log in ``archive``."""
    return await Runtime.open(
        log_url, workflows=workflows, config=config, keys=key_store(), archive=archive
    )


@contextlib.asynccontextmanager
async def read_history(log_url: str, archive_url: str) -> AsyncIterator[EventReader]:
    """The existing hot log, with archived runs readable through it when an archive exists.

    Read commands go through this: they never create a log (a mistyped
    ``--log`` is an error, not a new empty database), and ``show``, ``state``
    and ``diff`` work the same on a run that was archived and pruned.
    """
    hot = await open_log(log_url, create=False, keys=key_store())
    try:
        store = existing_archive(archive_url)
        if store is None:
            yield hot  # no archive was ever written
            return
        combined = ArchivedEventReader(hot, store)
        try:
            yield combined
        finally:
            await combined.close()
    finally:
        await hot.close()
