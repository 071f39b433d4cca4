"""Encrypted runs in the archive: ciphertext in Parquet, SQL and replay open it with the keys.

A canary string goes into a run's input, a task's result and its state. It
must never reach the Parquet files (raw bytes, or any decoded cell) or the
SQLite file as plaintext; with the keys, SQL and archive replay show it;
without them, or after a shred, the rows are there with their metadata and
NULL content, and replay raises a typed error.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from agentlog.archive import (
    ArchivedEventReader,
    Archiver,
    ArchiverConfig,
    ArchiveStore,
    LocalArchiveStore,
    RetentionPolicies,
    RetentionPolicy,
    S3ArchiveStore,
    S3Config,
    open_sql,
)
from agentlog.archive._parquet import SEALED_MARKER
from agentlog.cli import app
from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.errors import KeyStoreMissingError, ShreddedError, TamperedPayloadError
from agentlog.eventlog import (
    Event,
    EventLog,
    RunCompleted,
    RunStarted,
    StepCompleted,
    SuperstepCommitted,
    TaskCompleted,
    TaskStarted,
)
from agentlog.eventlog.events import EventData
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.projector import load_state, save_state
from tests.archive.helpers import as_events
from tests.services.s3_server import S3Endpoint
from tests.support.archive import NOW
from tests.support.tamper import ATTACKS, TASK_SEQ, sealed_run

CANARY = "canary-5f0c1e-do-not-leak"

#: Where the canary is in an opened run.
TASK_KEY = "k-search"


def canary_events(run_id: str, epoch: int, *, parked: bool = False) -> list[Event]:
    """A run with the canary in its input, a task result, a write and its output.

    ``parked``: the run has not finished (no RunCompleted) and began 30 days before NOW.
    """
    data: list[EventData] = [
        RunStarted("research", "v1", {"question": CANARY}, "sync", "fp", {}, ["plan"]),
        TaskStarted(TASK_KEY, "search", "plan", 0, 0, 0),
        TaskCompleted(TASK_KEY, {"hits": [CANARY]}, 12.5),
        StepCompleted("plan", 0, 0, {"notes": CANARY}, ["review"]),
        SuperstepCommitted(0, ["review"]),
    ]
    if parked:
        return as_events(run_id, data, epoch=epoch, start=NOW - timedelta(days=30))
    return as_events(run_id, [*data, RunCompleted({"answer": CANARY})], epoch=epoch)


async def record(log: EventLog, run_id: str, *, parked: bool = False) -> None:
    """Append the canary run to ``log`` (sealed if ``log`` has a cipher)."""
    await log.append(canary_events(run_id, await log.claim_writer(run_id), parked=parked))


@pytest.fixture
def keyring_path(tmp_path: Path) -> Path:
    """Where the test's local keyring file lives (created on first use)."""
    return tmp_path / "keyring.json"


@pytest.fixture
async def sealed_hot(tmp_path: Path, keyring_path: Path) -> AsyncIterator[SqliteEventLog]:
    """A SQLite hot log that seals payloads with the test keyring."""
    log = SqliteEventLog(tmp_path / "hot.db", cipher=PayloadCipher(LocalKeyStore(keyring_path)))
    try:
        yield log
    finally:
        await log.close()


@pytest.fixture
def keyless_hot(sealed_hot: SqliteEventLog, hot: SqliteEventLog) -> SqliteEventLog:
    """The same SQLite file (conftest's ``hot``), opened with no key store."""
    return hot


@pytest.fixture
def s3_store(s3_endpoint: S3Endpoint) -> tuple[S3ArchiveStore, str]:
    """An archive in a fresh bucket of the moto S3 server, and the bucket's name."""
    bucket = f"enc-{uuid.uuid4().hex[:12]}"
    client: Any = s3_endpoint.client()
    client.create_bucket(Bucket=bucket)
    config = S3Config(
        bucket=bucket,
        prefix="agentlog/enc",
        endpoint_url=s3_endpoint.url,
        region=s3_endpoint.region,
        access_key_id=s3_endpoint.access_key_id,
        secret_access_key=s3_endpoint.secret_access_key,
        max_attempts=1,
        connect_timeout=1.0,
    )
    return S3ArchiveStore(config), bucket


def parquet_objects(s3_endpoint: S3Endpoint, bucket: str) -> dict[str, bytes]:
    """Every Parquet object in the bucket, read with boto3."""
    client: Any = s3_endpoint.client()
    listed = client.list_objects_v2(Bucket=bucket).get("Contents", [])
    return {
        o["Key"]: client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
        for o in listed
        if o["Key"].endswith(".parquet")
    }


def events_objects(s3_endpoint: S3Endpoint, bucket: str) -> dict[str, bytes]:
    """The events files of the bucket (not their tasks tables)."""
    objects = parquet_objects(s3_endpoint, bucket)
    return {k: v for k, v in objects.items() if not k.endswith(".tasks.parquet")}


def cells(raw: bytes) -> list[Any]:
    """Every decoded cell of a Parquet file (so compression cannot hide the canary)."""
    table = pq.read_table(pa.BufferReader(raw))
    return [value for column in table.columns for value in column.to_pylist()]


def holds_canary(value: Any) -> bool:
    """Whether one decoded cell carries the canary."""
    blob = value if isinstance(value, bytes) else str(value).encode()
    return CANARY.encode() in blob


def sqlite_bytes(tmp_path: Path) -> bytes:
    """The SQLite file and its WAL, as on disk."""
    return b"".join(p.read_bytes() for p in sorted(tmp_path.glob("hot.db*")) if p.is_file())


async def payload_json_of(
    store: ArchiveStore, log: EventLog | None, run_id: str, **kw: Any
) -> dict[str, Any]:
    """type -> (seq, task_name, result, input, error of the run's events) through open_sql."""
    with await open_sql(store, log, **kw) as db:
        rows = db.sql(
            "SELECT type, seq, task_name, payload_json ->> 'result', payload_json ->> 'input', "
            "payload_json ->> 'writes' FROM events WHERE run_id = ? ORDER BY seq",
            [run_id],
        ).fetchall()
    return {row[0]: row[1:] for row in rows}


async def test_parquet_in_s3_and_sqlite_hold_no_plaintext(
    s3_endpoint: S3Endpoint,
    s3_store: tuple[S3ArchiveStore, str],
    sealed_hot: SqliteEventLog,
    tmp_path: Path,
) -> None:
    store, bucket = s3_store
    await record(sealed_hot, "enc")
    assert CANARY.encode() not in sqlite_bytes(tmp_path)
    summary = await Archiver(sealed_hot, store).run(now=NOW)
    assert summary.runs == 1 and summary.pruned == 1
    objects = parquet_objects(s3_endpoint, bucket)
    assert objects, "the archive wrote no Parquet file"
    for key, raw in objects.items():
        assert CANARY.encode() not in raw, key
        assert not any(holds_canary(v) for v in cells(raw)), key
    assert CANARY.encode() not in sqlite_bytes(tmp_path)
    # ...and yet it is all there for the key holder.
    history = ArchivedEventReader(sealed_hot, store)
    state = await load_state(history, "enc")
    await history.close()
    assert state.input == {"question": CANARY} and state.values["notes"] == CANARY


async def test_plain_and_encrypted_runs_archived_together(
    s3_endpoint: S3Endpoint,
    s3_store: tuple[S3ArchiveStore, str],
    sealed_hot: SqliteEventLog,
    keyless_hot: SqliteEventLog,
) -> None:
    store, bucket = s3_store
    await record(sealed_hot, "enc")
    await record(keyless_hot, "plain")  # the same file, written without keys: stored in clear
    await Archiver(keyless_hot, store).run(now=NOW)  # an archiver without keys
    objects = events_objects(s3_endpoint, bucket)
    assert len(objects) == 1  # one workflow, one day: both runs in one file
    decoded = cells(next(iter(objects.values())))
    assert any(holds_canary(v) for v in decoded)  # the plain run's payload: the check sees it
    with await open_sql(store, None) as db:
        leaked = db.sql(
            "SELECT run_id, seq FROM events WHERE run_id = 'enc' AND "
            "(contains(payload_json, ?) OR contains(CAST(payload AS VARCHAR), ?))",
            [CANARY, CANARY],
        ).fetchall()
    assert leaked == []
    for kw in ({}, {"keys": LocalKeyStore(store_path(sealed_hot))}):
        rows = await payload_json_of(store, None, "plain", **kw)
        assert CANARY in rows["TaskCompleted"][2]
    with_keys = await payload_json_of(store, sealed_hot, "enc")
    assert CANARY in with_keys["TaskCompleted"][2] and CANARY in with_keys["RunStarted"][3]
    without = await payload_json_of(store, keyless_hot, "enc")
    assert without["TaskCompleted"] == (3, "search", None, None, None)
    assert without["StepCompleted"] == (4, None, None, None, None)
    # Replay of both from the archive alone.
    history = ArchivedEventReader(sealed_hot, store)
    assert (await load_state(history, "plain")).values["notes"] == CANARY
    assert (await load_state(history, "enc")).values["notes"] == CANARY
    await history.close()


def store_path(log: SqliteEventLog) -> Path:
    """The keyring file behind ``log``'s cipher."""
    assert log.cipher is not None
    keys = log.cipher.keys.store
    assert isinstance(keys, LocalKeyStore)
    return Path(keys.path)


async def test_sql_and_replay_without_keys(
    s3_store: tuple[S3ArchiveStore, str],
    sealed_hot: SqliteEventLog,
    keyless_hot: SqliteEventLog,
) -> None:
    store, _ = s3_store
    await record(sealed_hot, "enc")
    await Archiver(sealed_hot, store).run(now=NOW)
    with await open_sql(store, keyless_hot) as db:
        rows = db.sql(
            "SELECT seq, type, task_name, task_key, step, duration_ms, ts IS NOT NULL, "
            "payload_json FROM events WHERE run_id = 'enc' ORDER BY seq"
        ).fetchall()
        assert [r[1] for r in rows] == [
            "RunStarted",
            "TaskStarted",
            "TaskCompleted",
            "StepCompleted",
            "SuperstepCommitted",
            "RunCompleted",
        ]
        completed = rows[2]
        assert completed[2:7] == ("search", TASK_KEY, None, 12.5, True)
        assert SEALED_MARKER in completed[7] and CANARY not in completed[7]
        assert db.sql("SELECT status, steps FROM runs WHERE run_id = 'enc'").fetchall() == [
            ("completed", 1)
        ]
        tasks = db.sql("SELECT name, status FROM tasks WHERE run_id = 'enc'").fetchall()
        assert tasks == [("search", "completed")]
    history = ArchivedEventReader(keyless_hot, store)
    with pytest.raises(KeyStoreMissingError, match="AGENTLOG_KEYRING"):
        await load_state(history, "enc")
    events = [e async for e in history.read("enc")]  # the metadata still reads
    assert [e.seq for e in events] == [1, 2, 3, 4, 5, 6]
    assert isinstance(events[0].unreadable, KeyStoreMissingError) and events[0].sealed
    await history.close()


async def test_shred_reaches_the_archive(
    s3_store: tuple[S3ArchiveStore, str], sealed_hot: SqliteEventLog, keyring_path: Path
) -> None:
    store, _ = s3_store
    await record(sealed_hot, "enc")
    await record(sealed_hot, "kept")
    await Archiver(sealed_hot, store).run(now=NOW)
    LocalKeyStore(keyring_path).destroy("enc")
    fresh = LocalKeyStore(keyring_path)  # a new process: nothing cached
    async with SqliteEventLog(sealed_hot.path, cipher=PayloadCipher(fresh)) as hot:
        history = ArchivedEventReader(hot, store)
        with pytest.raises(ShreddedError, match="'enc' was shredded"):
            await load_state(history, "enc")
        assert (await load_state(history, "kept")).values["notes"] == CANARY
        await history.close()
        enc = await payload_json_of(store, hot, "enc")
        kept = await payload_json_of(store, hot, "kept")
    assert enc["TaskCompleted"] == (3, "search", None, None, None)
    assert enc["RunStarted"] == (1, None, None, None, None)
    assert CANARY in kept["TaskCompleted"][2]


async def test_kek_rotation_old_and_new_runs_replay_from_the_archive(
    s3_store: tuple[S3ArchiveStore, str], tmp_path: Path, keyring_path: Path
) -> None:
    store, _ = s3_store
    keys = LocalKeyStore(keyring_path)
    async with SqliteEventLog(tmp_path / "hot.db", cipher=PayloadCipher(keys)) as hot:
        await record(hot, "before")
        await Archiver(hot, store).run(now=NOW)
        keys.rotate()
        await record(hot, "after")
        await Archiver(hot, store).run(now=NOW)
    fresh = PayloadCipher(LocalKeyStore(keyring_path))
    async with SqliteEventLog(tmp_path / "hot.db", cipher=fresh) as hot:
        history = ArchivedEventReader(hot, store)
        for run_id in ("before", "after"):
            assert (await load_state(history, run_id)).values["notes"] == CANARY
            assert CANARY in (await payload_json_of(store, hot, run_id))["TaskCompleted"][2]
            # ...and the archived copy is sealed under either KEK: no content without keys.
            assert (await payload_json_of(store, None, run_id))["TaskCompleted"][2] is None
        await history.close()


async def test_idle_encrypted_run_is_archived_without_keys_and_kept_hot(
    tmp_path: Path, sealed_hot: SqliteEventLog, keyless_hot: SqliteEventLog
) -> None:
    store = LocalArchiveStore(tmp_path / "archive")
    config = ArchiverConfig(RetentionPolicies(RetentionPolicy(idle_after=timedelta(days=7))))
    await record(sealed_hot, "parked", parked=True)
    await save_state(sealed_hot, await load_state(sealed_hot, "parked"))  # a sealed snapshot
    # Without keys the sealed snapshot cannot be checked, nor a new one saved: archive, keep hot.
    summary = await Archiver(keyless_hot, store, config).run(now=NOW)
    assert summary.run_ids == ("parked",) and summary.pruned == 0
    assert (await keyless_hot.find_run("parked")) is not None
    for raw in (p.read_bytes() for p in (tmp_path / "archive").rglob("*.parquet")):
        assert not any(holds_canary(v) for v in cells(raw))
    # With the keys the snapshot checks out: the run is pruned and resumes from it.
    summary = await Archiver(sealed_hot, store, config).run(now=NOW + timedelta(days=1))
    assert summary.pruned == 1
    history = ArchivedEventReader(sealed_hot, store)
    state = await load_state(history, "parked")
    assert state.values["notes"] == CANARY and state.seq == 5
    await history.close()


@pytest.mark.process
def test_sql_cli_with_and_without_agentlog_keyring(tmp_path: Path, keyring_path: Path) -> None:
    async def seed() -> None:
        cipher = PayloadCipher(LocalKeyStore(keyring_path))
        async with SqliteEventLog(tmp_path / "hot.db", cipher=cipher) as log:
            await record(log, "enc")

    asyncio.run(seed())
    opts = ["--log", f"sqlite:///{tmp_path / 'hot.db'}", "--archive", f"file://{tmp_path / 'a'}"]
    runner = CliRunner()
    archived = runner.invoke(app, ["archive", *opts], env={"AGENTLOG_KEYRING": ""})
    assert archived.exit_code == 0, archived.output
    query = "SELECT seq, type, payload_json ->> 'result' AS result FROM events WHERE seq = 3"
    with_keys = runner.invoke(
        app, ["sql", query, "--json", *opts], env={"AGENTLOG_KEYRING": str(keyring_path)}
    )
    assert with_keys.exit_code == 0, with_keys.output
    assert CANARY in with_keys.stdout
    without = runner.invoke(app, ["sql", query, "--json", *opts], env={"AGENTLOG_KEYRING": ""})
    assert without.exit_code == 0, without.output
    assert CANARY not in without.stdout and '"result": null' in without.stdout
    assert '"type": "TaskCompleted"' in without.stdout


async def test_tampered_archived_payload_is_a_typed_error(
    tmp_path: Path, sealed_hot: SqliteEventLog
) -> None:
    store = LocalArchiveStore(tmp_path / "archive")
    await record(sealed_hot, "enc")
    await Archiver(sealed_hot, store).run(now=NOW)
    (path,) = (p for p in (tmp_path / "archive").rglob("*.parquet") if ".tasks." not in p.name)
    table = pq.read_table(path)
    payloads = table.column("payload").to_pylist()
    payloads[2] = payloads[2][:-1] + bytes([payloads[2][-1] ^ 1])  # the tag's last byte
    index = table.schema.get_field_index("payload")
    pq.write_table(table.set_column(index, "payload", pa.array(payloads, pa.binary())), path)
    with await open_sql(store, sealed_hot) as db:
        assert db.sql("SELECT count(*) FROM events").fetchall() == [(6,)]  # metadata: fine
        with pytest.raises(TamperedPayloadError, match=r"'enc'.*seq 3"):
            db.arrow("SELECT payload_json FROM events")
    history = ArchivedEventReader(sealed_hot, store)
    with pytest.raises(TamperedPayloadError, match="seq 3"):
        await load_state(history, "enc")
    await history.close()


async def test_sql_stays_read_only_with_keys(tmp_path: Path, sealed_hot: SqliteEventLog) -> None:
    store = LocalArchiveStore(tmp_path / "archive")
    await record(sealed_hot, "enc")
    await Archiver(sealed_hot, store).run(now=NOW)
    secret = tmp_path / "secret.txt"
    secret.write_text("not for SQL")
    with await open_sql(store, sealed_hot) as db:
        assert db.opener is not None
        for query in (
            f"SELECT * FROM read_text('{secret}')",
            f"COPY (SELECT 1) TO '{tmp_path / 'out.csv'}'",
            "SET enable_external_access = true",
            "CREATE FUNCTION f(x) AS x",
        ):
            with pytest.raises(Exception) as caught:
                db.arrow(query)
            assert "not for SQL" not in str(caught.value)
        # The function opens a blob only for its own run, seq and type.
        moved = db.arrow(
            "SELECT agentlog_open_payload('other', seq, type, schema_v, payload, '') AS j "
            "FROM events WHERE seq = 3"
        )
        assert moved.column("j").to_pylist() == [""]  # no key for 'other': nothing opened
        with pytest.raises(TamperedPayloadError, match="seq 2"):
            db.arrow(
                "SELECT agentlog_open_payload(run_id, 2, type, schema_v, payload, '') "
                "FROM events WHERE seq = 3"
            )


@pytest.mark.parametrize("attack", sorted(ATTACKS))
async def test_an_archived_encrypted_run_tampered_in_s3_is_refused(
    s3_endpoint: S3Endpoint,
    s3_store: tuple[S3ArchiveStore, str],
    sealed_hot: SqliteEventLog,
    attack: str,
) -> None:
    """Plain content, or edited metadata, put into the Parquet object of an
    encrypted run: replay with the keys refuses it (the hot copy is pruned)."""
    store, bucket = s3_store
    await sealed_hot.append(sealed_run("r1", await sealed_hot.claim_writer("r1")))
    assert (await Archiver(sealed_hot, store).run(now=NOW)).pruned == 1
    client: Any = s3_endpoint.client()
    ((key, raw),) = events_objects(s3_endpoint, bucket).items()
    table = pq.read_table(pa.BufferReader(raw))
    seqs, payloads = table.column("seq").to_pylist(), table.column("payload").to_pylist()
    at = seqs.index(TASK_SEQ)
    payloads[at] = ATTACKS[attack](payloads[at])
    index = table.schema.get_field_index("payload")
    changed = table.set_column(index, "payload", pa.array(payloads, pa.binary()))
    sink = pa.BufferOutputStream()
    pq.write_table(changed, sink)
    client.put_object(Bucket=bucket, Key=key, Body=sink.getvalue().to_pybytes())
    history = ArchivedEventReader(sealed_hot, store)
    try:
        with pytest.raises(TamperedPayloadError, match=rf"run 'r1' seq {TASK_SEQ}"):
            await load_state(history, "r1", use_snapshots=False)
    finally:
        await history.close()
