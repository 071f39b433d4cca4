"""Queries in a process of their own: keys reach it over its socket only, a
shredded run and a tampered row behave as in-process, and a killed query's
process is gone."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from agentlog.archive import Archiver, LocalArchiveStore
from agentlog.archive._errors import ArchiveQueryError
from agentlog.archive._sql import sql_cipher, sql_source
from agentlog.archive._sql_process import QueryProcess, QueryProcesses, run_query
from agentlog.crypto import ENV_VAR, LocalKeyStore, PayloadCipher
from agentlog.errors import ShreddedError
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.archive.test_encryption import CANARY, record
from tests.support.archive import NOW
from tests.ui.test_hardening import FOREVER

BOUND = 60.0  # seconds; a bound for a hung process, not a speed requirement


def wait_until(check: object, what: str) -> None:
    assert callable(check)
    deadline = time.monotonic() + BOUND
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {BOUND:g}s waiting until {what}")
        time.sleep(0.05)


@pytest.mark.process
async def test_keys_reach_the_query_process_over_its_socket_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keyring = tmp_path / "keyring.json"
    monkeypatch.setenv(ENV_VAR, str(keyring))  # the caller's; the query process must not see it
    cipher = PayloadCipher(LocalKeyStore(keyring))
    store = LocalArchiveStore(tmp_path / "archive")
    async with SqliteEventLog(tmp_path / "hot.db", cipher=cipher) as log:
        await record(log, "enc")
        await Archiver(log, store).run(now=NOW)
        await record(log, "hot")  # one run archived, one still hot
        source = await sql_source(store, log)
    query = "SELECT run_id, payload_json FROM events WHERE type = 'RunStarted' ORDER BY run_id"
    process = QueryProcess()
    try:
        seen = psutil.Process(process.pid)
        # Between fork and exec the child still shows the parent's command line
        # (or none): wait for the worker's own, then look at it and its environment.
        wait_until(
            lambda: "agentlog.archive._sql_worker" in seen.cmdline(), "the worker has exec'd"
        )
        assert ENV_VAR not in seen.environ()
        assert seen.cmdline()[-2:] == ["agentlog.archive._sql_worker", seen.cmdline()[-1]]
        assert seen.cmdline()[-1].isdigit()  # only the socket's number
        opened, _ = process.run(source, sql_cipher(cipher, None), query, limit=10)
        rows = opened.to_pylist()
        assert [r["run_id"] for r in rows] == ["enc", "hot"]
        assert all(CANARY in r["payload_json"] for r in rows), rows
        # Without keys the same rows show their metadata only.
        sealed, _ = process.run(source, None, query, limit=10)
        assert all(CANARY not in r["payload_json"] for r in sealed.to_pylist())
        # A shredded run reads as metadata, as it does in-process.
        cipher.shred("enc")
        after, _ = process.run(source, sql_cipher(cipher, None), query, limit=10)
        by_run = {r["run_id"]: r["payload_json"] for r in after.to_pylist()}
        assert CANARY not in by_run["enc"] and CANARY in by_run["hot"]
        with pytest.raises(ShreddedError):
            cipher.keys.for_open("enc")
    finally:
        process.close()
    assert not (tmp_path / ".tmp").exists()


@pytest.mark.process
async def test_a_killed_query_ends_its_process_and_the_pool_starts_another(
    tmp_path: Path,
) -> None:
    store = LocalArchiveStore(tmp_path / "archive")
    source = await sql_source(store, None)
    with QueryProcesses() as processes:
        process = processes.take()
        failed: list[BaseException] = []

        def go() -> None:
            try:
                process.run(source, None, FOREVER, limit=10)
            except BaseException as exc:
                failed.append(exc)

        worker = threading.Thread(target=go)
        worker.start()
        wait_until(lambda: process.started_at is not None, "the query runs")
        process.kill()
        worker.join(BOUND)
        assert not worker.is_alive(), "run() did not return after kill()"
        assert len(failed) == 1 and isinstance(failed[0], ArchiveQueryError), failed
        assert "stopped" in str(failed[0])
        assert process._proc.returncode == -signal.SIGKILL
        assert not psutil.pid_exists(process.pid)
        processes.give_back(process)
        table, more = run_query(source, None, "SELECT 7 AS n", limit=10, processes=processes)
        assert table.to_pylist() == [{"n": 7}] and not more
