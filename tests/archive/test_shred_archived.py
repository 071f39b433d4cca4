"""Shredding a run archived and pruned from the hot log (issue 20 item 1).

``rt.shred`` and ``agentlog shred`` refused such a run ("run is archived
... its run id stays taken"), so its wrapped key stayed and the archive
kept answering with its content. Now the checks read the run through the
runtime's archive, the key is destroyed, ``RunShredded`` goes to the run's
hot index row (the tombstone), and every listing says ``shredded``: the
run index, ``agentlog runs``, SQL and the UI. The Parquet files are never
rewritten: the key that opened their sealed content is gone.

Real SQLite files, a real keyring, a local archive folder and an S3 archive
on moto_server.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Coroutine, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from agentlog.archive import (
    ArchivedEventReader,
    Archiver,
    ArchiveStore,
    LocalArchiveStore,
    S3ArchiveStore,
    S3Config,
    open_sql,
)
from agentlog.archive._parquet import Manifest
from agentlog.cli import app
from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.errors import RunArchivedError, ShreddedError
from agentlog.eventlog.events import RunStatus, utcnow
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.projector import load_state
from agentlog.runtime import Runtime
from agentlog.ui import create_app
from tests.support.shred import CANARY, ONE_SHOT, canary_workflow, raw_bytes, sqlite_files

runner = CliRunner()

#: Long after every run here: idle unfinished runs count as idle (7 days by default).
LATER = timedelta(days=30)


def _s3_store(request: pytest.FixtureRequest) -> S3ArchiveStore:
    s3 = request.getfixturevalue("s3_endpoint")
    bucket = f"shred-{uuid.uuid4().hex[:12]}"
    s3.client().create_bucket(Bucket=bucket)
    return S3ArchiveStore(
        S3Config(
            bucket=bucket,
            prefix="agentlog/shred",
            endpoint_url=s3.url,
            region=s3.region,
            access_key_id=s3.access_key_id,
            secret_access_key=s3.secret_access_key,
            max_attempts=1,
        )
    )


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ArchiveStore:
    """The archive: a local folder, or a bucket on the moto S3 server."""
    if request.param == "local":
        return LocalArchiveStore(tmp_path / "archive")
    return _s3_store(request)


@pytest.fixture
def local(tmp_path: Path) -> LocalArchiveStore:
    """A local archive folder."""
    return LocalArchiveStore(tmp_path / "archive")


class Setup:
    """A SQLite log sealed with one keyring file."""

    def __init__(self, tmp_path: Path) -> None:
        self.db = tmp_path / "log.db"
        self.url = f"sqlite:///{self.db}"
        self.keyring = tmp_path / "keyring.json"

    def keys(self) -> LocalKeyStore:
        """The keyring as a new process opens it: no key cached."""
        return LocalKeyStore(self.keyring)

    def runtime(self, archive: ArchiveStore | None = None) -> Coroutine[Any, Any, Runtime]:
        """A one-shot runtime on the log (to await)."""
        wf = canary_workflow()
        return Runtime.open(
            self.url, workflows=[wf], config=ONE_SHOT, keys=self.keys(), archive=archive
        )

    async def parked(self, run_id: str) -> int:
        """Start ``run_id`` and let it park on its question; return its seq."""
        async with await self.runtime() as rt:
            await rt.start(
                canary_workflow(), run_id=run_id, input={"secret": CANARY}, durability="sync"
            )
            state = await rt.wait(run_id)
        assert state.status == RunStatus.WAITING
        return state.seq

    async def completed(self, run_id: str) -> None:
        """Start ``run_id`` and answer its question: it completes."""
        await self.parked(run_id)
        async with await self.runtime() as rt:
            await rt.resume(run_id, "yes")
            assert (await rt.wait(run_id)).status == RunStatus.COMPLETED

    async def archive(self, store: ArchiveStore, *, later: bool = False) -> tuple[int, int]:
        """One archive pass (with the keys, so idle runs get their snapshot);
        return (runs archived, runs pruned)."""
        now = utcnow() + LATER if later else None
        async with SqliteEventLog(self.db, cipher=PayloadCipher(self.keys())) as hot:
            summary = await Archiver(hot, store).run(now=now)
        return summary.runs, summary.pruned


def _parquet(store: ArchiveStore) -> dict[str, bytes | None]:
    """Every Parquet file of the archive, as stored."""
    return {key: store.get(key) for key in store.list() if key.endswith(".parquet")}


async def _sql_rows(store: ArchiveStore, log: Any, query: str) -> list[tuple[Any, ...]]:
    with await open_sql(store, log) as db:
        return list(db.sql(query).fetchall())


async def test_an_archived_run_is_shredded_through_the_runtimes_archive(
    tmp_path: Path, store: ArchiveStore
) -> None:
    setup = Setup(tmp_path)
    await setup.completed("r1")
    await setup.completed("r2")
    assert await setup.archive(store) == (2, 2)
    files = _parquet(store)
    assert files and all(CANARY.encode() not in (raw or b"") for raw in files.values())
    async with await setup.runtime(store) as rt:
        info = await rt.log.get_run("r1")
        assert info.archived
        report = await rt.shred("r1")
    assert not report.already and not report.cancelled
    assert report.recorded_seq == info.last_seq + 1  # on the tombstone, after the archived events
    assert setup.keys().is_shredded("r1") and not setup.keys().is_shredded("r2")
    assert _parquet(store) == files  # no Parquet file was rewritten

    async with await setup.runtime(store) as rt:  # a new process: no key cached
        with pytest.raises(ShreddedError, match="'r1' was shredded"):
            await rt.get_state("r1")
        assert (await rt.get_state("r2")).values["secret"] == f"{CANARY}-state"
        shredded = await rt.log.get_run("r1")
        assert shredded.status == RunStatus.SHREDDED and shredded.archived
        assert [i.run_id for i in await rt.log.list_runs(status=RunStatus.SHREDDED)] == ["r1"]
        rows = await _sql_rows(store, rt.log, "SELECT run_id, status FROM runs ORDER BY run_id")
        assert rows == [("r1", "shredded"), ("r2", "completed")]
        results = await _sql_rows(
            store,
            rt.log,
            "SELECT run_id, payload_json ->> 'result' FROM events "
            "WHERE type = 'TaskCompleted' ORDER BY run_id",
        )
        assert results[0] == ("r1", None) and CANARY in str(results[1][1])

    # The next pass carries RunShredded into the archive: its manifest says shredded too.
    assert await setup.archive(store) == (1, 1)
    latest = Manifest.load(store).latest("r1")
    assert latest is not None and latest.status == RunStatus.SHREDDED
    assert await _sql_rows(store, None, "SELECT status FROM runs WHERE run_id = 'r1'") == [
        ("shredded",)
    ]
    async with SqliteEventLog(setup.db, cipher=PayloadCipher(setup.keys())) as hot:
        history = ArchivedEventReader(hot, store)
        try:
            with pytest.raises(ShreddedError):
                await load_state(history, "r1")
            types = [e.type async for e in history.read("r1")]
        finally:
            await history.close()
    assert types[-2:] == ["RunCompleted", "RunShredded"]
    async with await setup.runtime(store) as rt:
        again = await rt.shred("r1")
        assert again.already and again.shredded_at == report.shredded_at
        assert (await rt.log.get_run("r1")).last_seq == info.last_seq + 1  # nothing recorded


async def test_without_the_archive_the_shred_says_how_and_changes_nothing(
    tmp_path: Path, local: LocalArchiveStore
) -> None:
    setup = Setup(tmp_path)
    await setup.completed("r1")
    await setup.archive(local)
    async with await setup.runtime() as rt:
        before = await rt.log.get_run("r1")
        with pytest.raises(RunArchivedError, match=r"archive=URL\).*agentlog shred RUN --archive"):
            await rt.shred("r1")
        assert await rt.log.get_run("r1") == before
    assert not setup.keys().is_shredded("r1")
    async with await setup.runtime(local) as rt:
        assert (await rt.get_state("r1")).values["answer"] == "yes"


async def test_partly_archived_runs_are_shredded(tmp_path: Path, local: LocalArchiveStore) -> None:
    """An idle parked run pruned into the archive (cancelled by the shred), and
    one that went on after its prune (its later events hot)."""
    setup = Setup(tmp_path)
    await setup.parked("idle")
    await setup.parked("woke")
    assert await setup.archive(local, later=True) == (2, 2)
    async with await setup.runtime(local) as rt:
        await rt.resume("woke", "yes")
        assert (await rt.wait("woke")).status == RunStatus.COMPLETED
        woke = await rt.log.get_run("woke")
        assert woke.archived and Manifest.load(local).archived_upto("woke") < woke.last_seq
        idle = await rt.shred("idle")
        done = await rt.shred("woke")
    assert idle.cancelled and not done.cancelled
    async with await setup.runtime(local) as rt:
        for run_id in ("idle", "woke"):
            assert (await rt.log.get_run(run_id)).status == RunStatus.SHREDDED
            with pytest.raises(ShreddedError):
                await rt.get_state(run_id)
        assert idle.recorded_seq is not None
        hot_types = [e.type async for e in rt.log.read("idle", after_seq=idle.recorded_seq - 3)]
    assert hot_types == ["WriterClaimed", "RunCancelled", "RunShredded"]
    assert CANARY.encode() not in raw_bytes(*sqlite_files(setup.db))


async def test_a_fork_of_a_shredded_archived_origin_keeps_its_own_key(
    tmp_path: Path, local: LocalArchiveStore
) -> None:
    """What a shred of an origin means for its forks: nothing. A fork is a run of
    its own, its copy of the origin's history sealed under its own key; it is
    shredded only by shredding it."""
    setup = Setup(tmp_path)
    at = await setup.parked("origin")
    async with await setup.runtime() as rt:
        await rt.resume("origin", "yes")
        assert (await rt.wait("origin")).status == RunStatus.COMPLETED
    await setup.archive(local)
    async with await setup.runtime(local) as rt:
        await rt.fork("origin", at, new_run_id="fork")
        assert (await rt.wait("fork")).status == RunStatus.WAITING
        await rt.shred("origin")
    assert not setup.keys().is_shredded("fork")
    async with await setup.runtime(local) as rt:  # a new process: no key cached
        with pytest.raises(ShreddedError):
            await rt.get_state("origin")
        with pytest.raises(ShreddedError):
            await rt.fork("origin", at, new_run_id="fork-2")
        fork = await rt.get_state("fork")
        assert fork.forked_from == {"run_id": "origin", "seq": at}
        assert fork.values["secret"] == f"{CANARY}-state"
        # The forks of a run are found by their RunForked marker (metadata).
        forks = await _sql_rows(
            local,
            rt.log,
            "SELECT run_id FROM events WHERE type = 'RunForked' "
            "AND (payload_json ->> 'origin_run_id') = 'origin'",
        )
        assert forks == [("fork",)]
        await rt.resume("fork", "yes")
        done = await rt.wait("fork")
        assert done.status == RunStatus.COMPLETED and done.values["answer"] == "yes"
        await rt.shred("fork")  # erasing the copy too takes a shred of the fork
    async with await setup.runtime(local) as rt:
        with pytest.raises(ShreddedError):
            await rt.get_state("fork")
    assert CANARY.encode() not in raw_bytes(*sqlite_files(setup.db))


@pytest.fixture
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str | None]]:
    """The commands' environment in ``tmp_path``: the default log and archive
    (``.agentlog/...``), and the keyring."""
    monkeypatch.chdir(tmp_path)
    yield {
        "AGENTLOG_KEYRING": str(tmp_path / "keyring.json"),
        "AGENTLOG_LOG": None,
        "AGENTLOG_ARCHIVE": None,
        "AGENTLOG_S3_ENDPOINT": None,
    }


def _completed_at_default_log(tmp_path: Path) -> None:
    """Run ``r1`` to its end in the default log (the commands run their own event loop)."""
    setup = Setup(tmp_path)
    setup.db = tmp_path / ".agentlog" / "agentlog.db"
    setup.db.parent.mkdir()
    setup.url = f"sqlite:///{setup.db}"
    asyncio.run(setup.completed("r1"))


def _json(args: list[str], env: dict[str, str | None]) -> Any:
    result = runner.invoke(app, [*args, "--json"], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.process
def test_agentlog_shred_of_an_archived_run_uses_the_default_archive(
    tmp_path: Path, cli_env: dict[str, str | None]
) -> None:
    _completed_at_default_log(tmp_path)
    archived = runner.invoke(app, ["archive"], env=cli_env)
    assert archived.exit_code == 0, archived.output
    done = runner.invoke(app, ["shred", "r1", "--yes"], env=cli_env)
    assert done.exit_code == 0, done.output
    assert "shredded at" in done.stdout and "RunShredded recorded at seq 12" in done.stdout
    listed = _json(["runs"], cli_env)
    assert [(r["run_id"], r["status"]) for r in listed] == [("r1", "shredded")]
    assert [r["run_id"] for r in _json(["runs", "--status", "shredded"], cli_env)] == ["r1"]
    state = runner.invoke(app, ["state", "r1"], env=cli_env)
    assert state.exit_code == 2 and "was shredded" in state.output
    rows = _json(["sql", "SELECT run_id, status FROM runs"], cli_env)
    assert rows == [{"run_id": "r1", "status": "shredded"}]
    shown = _json(["show", "r1"], cli_env)
    assert shown[-1]["type"] == "RunShredded"
    assert {r.get("unreadable") for r in shown if r["type"] == "TaskCompleted"} == {"«shredded»"}
    assert CANARY not in json.dumps(shown)

    # The UI lists it as shredded, and says so on its page.
    app_ = create_app("sqlite:///.agentlog/agentlog.db", "file://.agentlog/archive")
    with TestClient(app_, base_url="http://127.0.0.1:8765") as client:
        page = client.get("/api/runs", params={"status": "shredded"}).json()
        assert [r["run_id"] for r in page["rows"]] == ["r1"] and page["counts"] == {"shredded": 1}
        assert "shredded" in client.get("/api/workflows").json()["statuses"]
        assert client.get("/api/runs/r1").json()["info"]["status"] == "shredded"


@pytest.mark.s3
def test_agentlog_shred_reaches_an_s3_archive(
    tmp_path: Path, cli_env: dict[str, str | None], request: pytest.FixtureRequest
) -> None:
    store = _s3_store(request)
    s3 = request.getfixturevalue("s3_endpoint")
    env = {
        **cli_env,  # the read commands take the endpoint in the URL
        "AGENTLOG_ARCHIVE": f"s3://{store.config.bucket}/{store.config.prefix}?endpoint={s3.url}",
        "AWS_ACCESS_KEY_ID": s3.access_key_id,
        "AWS_SECRET_ACCESS_KEY": s3.secret_access_key,
        "AWS_DEFAULT_REGION": s3.region,
    }
    _completed_at_default_log(tmp_path)
    archived = runner.invoke(app, ["archive"], env=env)
    assert archived.exit_code == 0, archived.output
    files = _parquet(store)
    assert files
    query = "SELECT payload_json ->> 'result' AS r FROM events WHERE seq = 3"
    assert CANARY in _json(["sql", query], env)[0]["r"]  # the keyring opens it until the shred
    bucket = f"s3://{store.config.bucket}/{store.config.prefix}"
    done = runner.invoke(
        app, ["shred", "r1", "--yes", "--archive", bucket, "--endpoint", s3.url], env=env
    )
    assert done.exit_code == 0, done.output
    assert _parquet(store) == files  # no object was rewritten
    assert [r["status"] for r in _json(["runs"], env)] == ["shredded"]
    assert LocalKeyStore(tmp_path / "keyring.json").is_shredded("r1")
    state = runner.invoke(app, ["state", "r1"], env=env)
    assert state.exit_code == 2 and "was shredded" in state.output
    assert _json(["sql", query], env) == [{"r": None}]
