"""The ArchiveStore seam: where archive files live (a local folder or S3).

A store is a flat key space of immutable objects (``workflow=w/day=d/part-x.parquet``,
``_manifest/x.json``). Its one promise that matters: :meth:`ArchiveStore.put`
returns only once the object is durably there, because the archiver prunes
the hot log right after. Local: write a temp file, fsync, rename, fsync the
folder. S3: the put succeeded *and* a head_object sees the same size and ETag.

Both stores also tell DuckDB how to read their files (:meth:`location` and
:meth:`configure_duckdb`); for S3 that is the httpfs extension, loaded from
the PyPI package ``duckdb-extension-httpfs`` so that no download is needed.

==========================================  ==========================================
URL                                         store
==========================================  ==========================================
``file://.agentlog/archive`` (default)      :class:`LocalArchiveStore`, relative path;
                                            files 0600, or ``?file_mode=0640``
``file:///absolute/dir``                    :class:`LocalArchiveStore`, absolute path
``s3://bucket/prefix?endpoint=URL&region=R``  :class:`S3ArchiveStore`
==========================================  ==========================================
"""

from __future__ import annotations

import abc
import base64
import builtins
import hashlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from agentlog._files import DEFAULT_FILE_MODE, make_folders, open_new
from agentlog._logging import get_logger
from agentlog.archive._errors import (
    ArchiveAccessDeniedError,
    ArchiveBucketMissingError,
    ArchiveConfigError,
    ArchiveError,
    ArchiveUnavailableError,
    ArchiveWriteError,
)
from agentlog.eventlog._urls import file_mode_option, redact_url

__all__ = [
    "DEFAULT_ARCHIVE_URL",
    "ArchiveStore",
    "LocalArchiveStore",
    "S3ArchiveStore",
    "S3Config",
    "httpfs_extension_path",
    "open_archive",
]

#: Where the archive lives when nothing is configured.
DEFAULT_ARCHIVE_URL = "file://.agentlog/archive"

_log = get_logger("agentlog.archive._store")


class ArchiveStore(abc.ABC):
    """Immutable objects under string keys, with confirmed writes."""

    #: A URL that opens this store again.
    url: str = ""

    @abc.abstractmethod
    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``; return only once the write is confirmed.

        Raises:
            ArchiveWriteError: the write could not be confirmed.
        """

    @abc.abstractmethod
    def get(self, key: str) -> bytes | None:
        """The object's bytes, or None if there is no such key."""

    @abc.abstractmethod
    def list(self, prefix: str = "") -> builtins.list[str]:
        """Every key that starts with ``prefix``, sorted."""

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Remove the key; a missing key is not an error."""

    @abc.abstractmethod
    def location(self, key: str) -> str:
        """The path or URL under which DuckDB reads the object."""

    def configure_duckdb(self, conn: Any) -> None:  # noqa: B027 - optional hook
        """Prepare a DuckDB connection to read :meth:`location` paths."""

    def check(self) -> None:  # noqa: B027 - optional hook
        """Raise the typed error that any use of this store would raise."""


class LocalArchiveStore(ArchiveStore):
    """Files under one folder, written with fsync and an atomic rename.

    Files it writes (Parquet, the manifest, their temporary files) are
    ``file_mode`` (0600 by default) and the folders it creates 0700 (see
    :mod:`agentlog._files`), whatever the umask.
    """

    def __init__(self, root: str | Path, *, file_mode: int = DEFAULT_FILE_MODE) -> None:
        self.root = Path(root)
        self.file_mode = file_mode
        self.url = f"file://{self.root}" if self.root.is_absolute() else f"file://{root}"

    def _path(self, key: str) -> Path:
        if key.startswith("/") or ".." in key.split("/"):
            raise ArchiveConfigError(f"bad archive key {key!r}: keys are relative paths")
        return self.root / key

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        tmp = path.with_name(f".tmp-{uuid.uuid4().hex}-{path.name}")
        try:
            self._make_dirs(path.parent)
            with open_new(tmp, self.file_mode) as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
            _fsync_dir(path.parent)  # makes the rename itself durable
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise ArchiveWriteError(
                f"cannot write archive file {path}: {exc.strerror or exc}; check that the "
                "folder is writable and the disk is not full. Nothing was pruned."
            ) from exc

    def get(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ArchiveUnavailableError(f"cannot read archive file {key}: {exc}") from exc

    def list(self, prefix: str = "") -> builtins.list[str]:
        if not self.root.exists():
            return []
        keys = []
        for path in self.root.rglob("*"):
            if path.is_file():
                key = path.relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    keys.append(key)
        return sorted(keys)

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def location(self, key: str) -> str:
        return str(self._path(key).absolute())

    def check(self) -> None:
        try:
            self._make_dirs(self.root)
        except OSError as exc:
            raise ArchiveUnavailableError(
                f"cannot create the archive folder {self.root}: {exc}; check its permissions."
            ) from exc

    def _make_dirs(self, path: Path) -> None:
        for folder in make_folders(path, self.file_mode):
            _fsync_dir(folder.parent)  # makes the new folder's entry durable


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def httpfs_extension_path() -> str:
    """The httpfs extension file shipped by the PyPI package, for ``LOAD``.

    Raises:
        ArchiveConfigError: the package is missing or its version is not duckdb's.
    """
    import duckdb

    version = duckdb.__version__
    try:
        import duckdb_extension_httpfs  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ArchiveConfigError(
            "reading S3 from DuckDB needs the httpfs extension: "
            f"pip install 'duckdb-extension-httpfs=={version}' (agentlog's own install has it)"
        ) from exc
    base = Path(duckdb_extension_httpfs.__file__).parent / "extensions"
    path = base / f"v{version}" / "httpfs.duckdb_extension"
    if not path.exists():
        found = sorted(p.name for p in base.glob("v*")) if base.exists() else []
        raise ArchiveConfigError(
            f"duckdb-extension-httpfs ships {found or 'nothing'} but duckdb is {version}; "
            f"pip install 'duckdb-extension-httpfs=={version}'"
        )
    return str(path)


@dataclass(frozen=True)
class S3Config:
    """Where and how to reach an S3 (or MinIO) archive."""

    bucket: str
    """The bucket, which must exist."""
    prefix: str = ""
    """A key prefix inside the bucket, without leading or trailing slash."""
    endpoint_url: str | None = None
    """An explicit endpoint such as ``http://127.0.0.1:9000`` (MinIO, moto);
    None uses the standard AWS settings (``AWS_ENDPOINT_URL`` or AWS itself)."""
    region: str | None = None
    """The region; None uses the standard AWS settings, else ``us-east-1``."""
    access_key_id: str | None = None
    """Explicit credentials; None uses the standard AWS credential chain."""
    secret_access_key: str | None = None
    """The secret matching ``access_key_id``."""
    session_token: str | None = None
    """A session token for temporary credentials."""
    connect_timeout: float = 5.0
    """Seconds to wait for a connection before the endpoint counts as unreachable."""
    max_attempts: int = 3
    """Attempts per request, including the first (botocore's standard retries)."""


class S3ArchiveStore(ArchiveStore):
    """Objects in an S3 bucket, via boto3; reads by DuckDB via httpfs."""

    def __init__(self, config: S3Config) -> None:
        import boto3
        from botocore.config import Config

        self.config = config
        self.prefix = config.prefix.strip("/")
        self.url = f"s3://{config.bucket}/{self.prefix}".rstrip("/")
        session = boto3.session.Session(
            aws_access_key_id=config.access_key_id,
            aws_secret_access_key=config.secret_access_key,
            aws_session_token=config.session_token,
            region_name=config.region,
        )
        self.region = session.region_name or "us-east-1"
        style = "path" if config.endpoint_url else "auto"
        self._client = session.client(
            "s3",
            endpoint_url=config.endpoint_url,
            region_name=self.region,
            config=Config(
                s3={"addressing_style": style},
                connect_timeout=config.connect_timeout,
                read_timeout=max(config.connect_timeout, 30.0),
                retries={"max_attempts": config.max_attempts, "mode": "standard"},
            ),
        )
        self.endpoint = str(self._client.meta.endpoint_url)
        self._session = session

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _translate(self, exc: Exception, action: str) -> ArchiveError:
        from botocore.exceptions import (
            ClientError,
            ConnectionClosedError,
            ConnectTimeoutError,
            EndpointConnectionError,
            NoCredentialsError,
            ReadTimeoutError,
        )

        bucket = self.config.bucket
        if isinstance(exc, NoCredentialsError):
            return ArchiveAccessDeniedError(bucket, self.endpoint, "no credentials found")
        if isinstance(
            exc,
            EndpointConnectionError
            | ConnectTimeoutError
            | ConnectionClosedError
            | ReadTimeoutError,
        ):
            return ArchiveUnavailableError(
                f"cannot reach the S3 endpoint {self.endpoint} to {action}: {exc}; check "
                "the endpoint setting and that the server is up. Nothing was pruned."
            )
        if isinstance(exc, ClientError):
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("NoSuchBucket",) or (code == "404" and action == "check the bucket"):
                return ArchiveBucketMissingError(bucket, self.endpoint)
            if (
                code
                in (
                    "AccessDenied",
                    "InvalidAccessKeyId",
                    "SignatureDoesNotMatch",
                    "ExpiredToken",
                    "InvalidToken",
                    "403",
                )
                or status == 403
            ):
                return ArchiveAccessDeniedError(bucket, self.endpoint, code or "403")
            return ArchiveUnavailableError(
                f"S3 {action} failed at {self.endpoint}: {code} {error.get('Message', '')}"
            )
        return ArchiveUnavailableError(f"S3 {action} failed at {self.endpoint}: {exc}")

    def check(self) -> None:
        try:
            self._client.head_bucket(Bucket=self.config.bucket)
        except Exception as exc:
            raise self._translate(exc, "check the bucket") from exc

    def put(self, key: str, data: bytes) -> None:
        digest = hashlib.md5(data, usedforsecurity=False)
        full = self._key(key)
        try:
            self._client.put_object(
                Bucket=self.config.bucket,
                Key=full,
                Body=data,
                ContentMD5=base64.b64encode(digest.digest()).decode("ascii"),
            )
            head = self._client.head_object(Bucket=self.config.bucket, Key=full)
        except Exception as exc:
            error = self._translate(exc, f"write {full}")
            if type(error) is ArchiveUnavailableError:
                raise ArchiveWriteError(str(error)) from exc
            raise error from exc
        etag = str(head.get("ETag", "")).strip('"')
        if head.get("ContentLength") != len(data) or etag != digest.hexdigest():
            raise ArchiveWriteError(
                f"S3 object {full} did not read back as written (size "
                f"{head.get('ContentLength')} vs {len(data)}); nothing was pruned, retry."
            )

    def get(self, key: str) -> bytes | None:
        try:
            response = self._client.get_object(Bucket=self.config.bucket, Key=self._key(key))
            return response["Body"].read()  # type: ignore[no-any-return]
        except Exception as exc:
            from botocore.exceptions import ClientError

            if isinstance(exc, ClientError) and exc.response.get("Error", {}).get("Code") in (
                "NoSuchKey",
                "404",
            ):
                return None
            raise self._translate(exc, f"read {key}") from exc

    def list(self, prefix: str = "") -> builtins.list[str]:
        full = self._key(prefix)
        strip = len(self.prefix) + 1 if self.prefix else 0
        keys: list[str] = []
        try:
            paginator = self._client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.config.bucket, Prefix=full):
                keys.extend(item["Key"][strip:] for item in page.get("Contents", []))
        except Exception as exc:
            raise self._translate(exc, f"list {full}") from exc
        return sorted(keys)

    def delete(self, key: str) -> None:
        try:
            self._client.delete_object(Bucket=self.config.bucket, Key=self._key(key))
        except Exception as exc:
            raise self._translate(exc, f"delete {key}") from exc

    def location(self, key: str) -> str:
        return f"s3://{self.config.bucket}/{self._key(key)}"

    def configure_duckdb(self, conn: Any) -> None:
        conn.execute(f"LOAD '{httpfs_extension_path()}'")
        credentials = self._session.get_credentials()
        frozen = credentials.get_frozen_credentials() if credentials is not None else None
        endpoint = urlsplit(self.endpoint)
        options = {
            "TYPE": "s3",
            "REGION": self.region,
            "KEY_ID": frozen.access_key if frozen else "",
            "SECRET": frozen.secret_key if frozen else "",
        }
        if frozen and frozen.token:
            options["SESSION_TOKEN"] = frozen.token
        if self.config.endpoint_url or not endpoint.netloc.endswith("amazonaws.com"):
            options["ENDPOINT"] = endpoint.netloc
            options["URL_STYLE"] = "path"
            options["USE_SSL"] = "true" if endpoint.scheme == "https" else "false"
        body = ", ".join(
            f"{name} {value}" if name in ("TYPE", "USE_SSL") else f"{name} '{_sql_str(value)}'"
            for name, value in options.items()
        )
        conn.execute(f"CREATE OR REPLACE SECRET agentlog_archive ({body})")


def _sql_str(value: str) -> str:
    return value.replace("'", "''")


def open_archive(
    url: str = DEFAULT_ARCHIVE_URL,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
) -> ArchiveStore:
    """Open the archive store that ``url`` names (see the module table).

    Args:
        url: ``file://...`` or ``s3://bucket/prefix``; an S3 URL may carry
            ``?endpoint=http://host:port&region=...``.
        endpoint_url: an S3 endpoint that overrides the URL's (MinIO, moto).
        region: an S3 region that overrides the URL's.

    Raises:
        ArchiveConfigError: the URL is not one of the supported shapes.
    """
    parts = urlsplit(url)
    shown = redact_url(url)
    if parts.scheme == "file":
        path = url[len("file://") :].split("?", 1)[0]
        if not path:
            raise ArchiveConfigError(
                f"bad archive URL {shown!r}: write file://relative/dir or file:///absolute/dir, "
                f"for example {DEFAULT_ARCHIVE_URL}"
            )
        options = url[len("file://") :].partition("?")[2]
        return LocalArchiveStore(path, file_mode=file_mode_option(url, options))
    if parts.scheme == "s3":
        if not parts.netloc:
            raise ArchiveConfigError(
                f"bad archive URL {shown!r}: write s3://bucket/prefix, for example "
                "s3://agentlog-archive/prod"
            )
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        unknown = set(query) - {"endpoint", "region"}
        if unknown:
            raise ArchiveConfigError(
                f"bad archive URL {shown!r}: unknown option(s) {sorted(unknown)}; the options "
                "are endpoint and region"
            )
        return S3ArchiveStore(
            S3Config(
                bucket=parts.netloc,
                prefix=parts.path.strip("/"),
                endpoint_url=endpoint_url or query.get("endpoint"),
                region=region or query.get("region"),
            )
        )
    raise ArchiveConfigError(
        f"bad archive URL {shown!r}: the scheme must be file:// or s3://, for example "
        f"{DEFAULT_ARCHIVE_URL}"
    )
