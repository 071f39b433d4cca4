"""The archive's errors, all under :class:`agentlog.errors.ArchiveError`.

botocore and duckdb errors are translated where they happen, with
``raise X from exc``, so callers only ever catch these types::

    ArchiveError
    ├── ArchiveConfigError        bad archive URL or option (also a ConfigError)
    ├── ArchiveUnavailableError   unreachable endpoint, unwritable folder (retryable)
    │   └── ArchiveWriteError     a write that could not be confirmed
    ├── ArchiveBucketMissingError the S3 bucket does not exist
    ├── ArchiveAccessDeniedError  wrong or missing credentials, or no permission
    ├── ArchiveCorruptError       a Parquet or manifest file that does not read back
    ├── RunNotArchivableError     a running run that is not idle past its window
    ├── ArchiveQueryError         SQL that DuckDB rejects; names the views
    │   └── SqlLimitError         a query stopped at one of its limits (memory, result size, time)
    └── ArchiveReadOnlyError      a write through the read-only archived history
"""

from __future__ import annotations

from collections.abc import Sequence

from agentlog.errors import ArchiveError, ConfigError

__all__ = [
    "ArchiveAccessDeniedError",
    "ArchiveBucketMissingError",
    "ArchiveConfigError",
    "ArchiveCorruptError",
    "ArchiveError",
    "ArchiveQueryError",
    "ArchiveReadOnlyError",
    "ArchiveUnavailableError",
    "ArchiveWriteError",
    "RunNotArchivableError",
    "SqlLimitError",
]


class ArchiveConfigError(ArchiveError, ConfigError):
    """An archive URL or option that agentlog cannot use."""


class ArchiveUnavailableError(ArchiveError):
    """The archive's storage cannot be reached or written right now."""

    retryable = True


class ArchiveWriteError(ArchiveUnavailableError):
    """A write whose success could not be confirmed; nothing was pruned."""


class ArchiveBucketMissingError(ArchiveError):
    """The S3 bucket named in the archive URL does not exist."""

    def __init__(self, bucket: str, endpoint: str) -> None:
        self.bucket, self.endpoint = bucket, endpoint
        super().__init__(
            f"S3 bucket {bucket!r} does not exist at {endpoint}; create it (for example "
            f"`aws s3 mb s3://{bucket}`) or fix the bucket in the archive URL."
        )


class ArchiveAccessDeniedError(ArchiveError):
    """The S3 store refused the credentials, or they lack a permission."""

    def __init__(self, bucket: str, endpoint: str, detail: str) -> None:
        self.bucket, self.endpoint = bucket, endpoint
        super().__init__(
            f"S3 access to bucket {bucket!r} at {endpoint} was denied ({detail}); check "
            "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or the profile in use) and the "
            "bucket policy."
        )


class ArchiveCorruptError(ArchiveError):
    """An archive file that exists but does not read back. It is never skipped."""

    def __init__(self, location: str, reason: str) -> None:
        self.location, self.reason = location, reason
        super().__init__(
            f"archive file {location} is corrupt: {reason}. Restore it from a backup, or "
            "re-archive: the hot store still holds any run whose archive was not confirmed."
        )


class RunNotArchivableError(ArchiveError):
    """A run that is still running (and not idle past its window) was asked for."""

    def __init__(self, run_id: str, status: str, idle_after: str) -> None:
        self.run_id, self.status = run_id, status
        super().__init__(
            f"run {run_id!r} is {status} and has not been idle for {idle_after}; only "
            "completed, failed or cancelled runs, and runs idle past their retention "
            "window, can be archived. Wait for it to finish or cancel it first."
        )


class ArchiveQueryError(ArchiveError):
    """SQL that DuckDB rejected; the message carries DuckDB's own words.

    DuckDB's lines are kept as they are: the line under ``LINE 1: <query>``
    holds a caret (``^``) at the column of the error, which only points right
    if that line stands on its own.
    """

    def __init__(self, sql: str, detail: str, views: Sequence[str]) -> None:
        self.sql, self.detail, self.views = sql, detail, list(views)
        shown = detail.rstrip()
        after = "\n" if "\n" in shown else ". "
        super().__init__(
            f"SQL failed: {shown}{after}The views you can query are: {', '.join(self.views)} "
            "(try `SELECT * FROM events LIMIT 5`)."
        )


class SqlLimitError(ArchiveQueryError):
    """A query stopped at one of the limits its caller set: it is not wrong, it is too big.

    Attributes:
        limit: which limit: ``"memory"``, ``"result"`` (bytes of the rows read),
            ``"time"`` or ``"running"`` (queries at once, in the UI).
    """

    def __init__(self, sql: str, limit: str, detail: str, views: Sequence[str]) -> None:
        self.sql, self.detail, self.views, self.limit = sql, detail, list(views), limit
        ArchiveError.__init__(self, f"SQL stopped: {detail}.")


class ArchiveReadOnlyError(ArchiveError):
    """A write method called on the read-only history of archived runs."""

    def __init__(self, method: str) -> None:
        super().__init__(
            f"{method}() is not allowed on the archived history, which is read-only; "
            "write through the hot event log instead."
        )
