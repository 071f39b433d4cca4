"""The archive: finished history as Parquet on a local folder or S3, retention, SQL.

* :class:`Archiver` moves completed (and idle-expired) runs from the hot log
  into Parquet, then prunes the hot log per :class:`RetentionPolicies`.
* :class:`ArchiveStore` is where the files live: :class:`LocalArchiveStore`
  (``file://.agentlog/archive``, the default) or :class:`S3ArchiveStore`;
  :func:`open_archive` picks one from a URL.
* :func:`open_sql` gives DuckDB views ``events``, ``runs``, ``tasks`` and
  ``interrupts`` over the archive and the hot log together.
* :class:`ArchivedEventReader` replays archived runs through the EventLog seam.
"""

from agentlog._renamed import renamed
from agentlog.archive._archiver import Archiver, ArchiverConfig, ArchiveSummary, RunPlan
from agentlog.archive._errors import (
    ArchiveAccessDeniedError,
    ArchiveBucketMissingError,
    ArchiveConfigError,
    ArchiveCorruptError,
    ArchiveError,
    ArchiveQueryError,
    ArchiveReadOnlyError,
    ArchiveUnavailableError,
    ArchiveWriteError,
    RunNotArchivableError,
)
from agentlog.archive._reader import ArchivedEventReader, ArchiveReader
from agentlog.archive._retention import RetentionMode, RetentionPolicies, RetentionPolicy
from agentlog.archive._sql import VIEWS, ArchiveSQL, open_sql
from agentlog.archive._store import (
    DEFAULT_ARCHIVE_URL,
    ArchiveStore,
    LocalArchiveStore,
    S3ArchiveStore,
    S3Config,
    open_archive,
)

__all__ = [
    "DEFAULT_ARCHIVE_URL",
    "VIEWS",
    "ArchiveAccessDeniedError",
    "ArchiveBucketMissingError",
    "ArchiveConfigError",
    "ArchiveCorruptError",
    "ArchiveError",
    "ArchiveQueryError",
    "ArchiveReadOnlyError",
    "ArchiveReader",
    "ArchiveSQL",
    "ArchiveStore",
    "ArchiveSummary",
    "ArchiveUnavailableError",
    "ArchiveWriteError",
    "ArchivedEventReader",
    "Archiver",
    "ArchiverConfig",
    "LocalArchiveStore",
    "RetentionMode",
    "RetentionPolicies",
    "RetentionPolicy",
    "RunNotArchivableError",
    "RunPlan",
    "S3ArchiveStore",
    "S3Config",
    "open_archive",
    "open_sql",
]

__getattr__ = renamed("agentlog.archive", {"ArchivedEventLog": "ArchivedEventReader"}, globals())
