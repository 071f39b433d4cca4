"""The S3 archive against a real S3 protocol server (moto_server on loopback)."""

from __future__ import annotations

import socket
import uuid
from typing import Any

import pytest

from agentlog.archive import (
    ArchiveAccessDeniedError,
    ArchiveBucketMissingError,
    ArchivedEventReader,
    Archiver,
    ArchiveUnavailableError,
    ArchiveWriteError,
    S3ArchiveStore,
    S3Config,
    open_archive,
    open_sql,
)
from agentlog.archive._sql import sql_source
from agentlog.archive._sql_process import run_query
from agentlog.archive._store import httpfs_extension_path
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.archive.helpers import read_all, record_run
from tests.services.s3_server import S3Endpoint
from tests.support.archive import NOW

pytestmark = pytest.mark.s3


def _bucket(s3_endpoint: S3Endpoint) -> str:
    name = f"arch-{uuid.uuid4().hex[:12]}"
    client: Any = s3_endpoint.client()
    client.create_bucket(Bucket=name)
    return name


def _store(s3_endpoint: S3Endpoint, bucket: str, **overrides: Any) -> S3ArchiveStore:
    params: dict[str, Any] = {
        "bucket": bucket,
        "prefix": "agentlog/test",
        "endpoint_url": s3_endpoint.url,
        "region": s3_endpoint.region,
        "access_key_id": s3_endpoint.access_key_id,
        "secret_access_key": s3_endpoint.secret_access_key,
        "max_attempts": 1,
        "connect_timeout": 1.0,
    } | overrides
    return S3ArchiveStore(S3Config(**params))


async def test_archive_to_s3_then_replay_and_sql_through_httpfs(
    s3_endpoint: S3Endpoint, hot: SqliteEventLog
) -> None:
    store = _store(s3_endpoint, _bucket(s3_endpoint))
    expected = {f"r{i}": await record_run(hot, f"r{i}", tag=i) for i in range(3)}
    hot_only = await record_run(hot, "live", end=None, start=NOW)
    summary = await Archiver(hot, store).run(now=NOW)
    assert summary.runs == 3 and summary.pruned == 3
    keys = store.list()
    assert any(k.startswith("_manifest/") for k in keys)
    assert any(k.startswith("workflow=research/day=2024-03-01/part-") for k in keys)
    history = ArchivedEventReader(hot, store)
    for run_id, events in expected.items():
        assert await read_all(history, run_id) == events
    with await open_sql(store, hot) as db:
        assert db.archived_files == 1
        counts = dict(db.sql("SELECT run_id, count(*) FROM events GROUP BY run_id").fetchall())
        assert counts == {"r0": 19, "r1": 19, "r2": 19, "live": len(hot_only)}
        statuses = dict(db.sql("SELECT run_id, status FROM runs").fetchall())
        assert statuses == {
            "r0": "completed",
            "r1": "completed",
            "r2": "completed",
            "live": "running",
        }
    # The same in a query process: the S3 secret reaches it over its socket.
    source = await sql_source(store, hot)
    query = "SELECT run_id, count(*) AS n FROM events GROUP BY run_id ORDER BY run_id"
    table, _ = run_query(source, None, query)
    assert dict(zip(*table.to_pydict().values(), strict=True)) == counts
    await history.close()


def test_open_archive_reads_the_endpoint_from_the_url(s3_endpoint: S3Endpoint) -> None:
    store = open_archive(f"s3://bkt/pre/fix?endpoint={s3_endpoint.url}&region=eu-west-1")
    assert isinstance(store, S3ArchiveStore)
    assert store.endpoint == s3_endpoint.url and store.region == "eu-west-1"
    assert store.location("a/b.parquet") == "s3://bkt/pre/fix/a/b.parquet"
    assert httpfs_extension_path().endswith("httpfs.duckdb_extension")


async def test_missing_bucket(s3_endpoint: S3Endpoint, hot: SqliteEventLog) -> None:
    events = await record_run(hot, "a")
    store = _store(s3_endpoint, "no-such-bucket-here")
    with pytest.raises(ArchiveBucketMissingError, match="no-such-bucket-here"):
        await Archiver(hot, store).run(now=NOW)
    assert await read_all(hot, "a") == events


async def test_wrong_credentials(s3_endpoint: S3Endpoint, hot: SqliteEventLog) -> None:
    events = await record_run(hot, "a")
    bucket = _bucket(s3_endpoint)
    store = _store(s3_endpoint, bucket, access_key_id="AKIAWRONGWRONGWRONG1")
    bad_secret = _store(s3_endpoint, bucket, secret_access_key="not-the-secret")
    with s3_endpoint.auth_enforced():
        _store(s3_endpoint, bucket).check()  # the right credentials pass
        with pytest.raises(ArchiveAccessDeniedError, match="was denied"):
            await Archiver(hot, store).run(now=NOW)
        with pytest.raises(ArchiveAccessDeniedError, match="was denied"):
            await Archiver(hot, bad_secret).run(now=NOW)
    assert await read_all(hot, "a") == events


async def test_unreachable_endpoint(hot: SqliteEventLog) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    events = await record_run(hot, "a")
    store = S3ArchiveStore(
        S3Config(
            "bucket",
            endpoint_url=f"http://127.0.0.1:{port}",
            access_key_id="x",
            secret_access_key="y",
            max_attempts=1,
            connect_timeout=1.0,
        )
    )
    with pytest.raises(ArchiveUnavailableError, match="cannot reach") as caught:
        await Archiver(hot, store).run(now=NOW)
    assert caught.value.retryable
    assert await read_all(hot, "a") == events


async def test_failed_put_prunes_nothing(s3_endpoint: S3Endpoint, hot: SqliteEventLog) -> None:
    """The bucket disappears between the check and the write: nothing is pruned."""
    events = await record_run(hot, "a")
    bucket = _bucket(s3_endpoint)
    store = _store(s3_endpoint, bucket)

    class Vanishing(S3ArchiveStore):
        def check(self) -> None:
            super().check()
            client: Any = s3_endpoint.client()
            client.delete_bucket(Bucket=bucket)

    vanishing = Vanishing(store.config)
    with pytest.raises((ArchiveBucketMissingError, ArchiveWriteError)):
        await Archiver(hot, vanishing).run(now=NOW)
    assert await read_all(hot, "a") == events
