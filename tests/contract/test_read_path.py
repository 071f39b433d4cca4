"""The indexed read path is written once (issue 22 item 1), and what that fixes.

Read, tail, the gap check, ``page_runs`` and ``list_workflows`` live in
:mod:`agentlog.eventlog._indexed`, :mod:`agentlog.eventlog._sql_index` and
``EventReader.tail``; a backend gives hooks only. These tests pin that
structure, and the drift it removed: PostgreSQL raised a corrupt read
without the ``corrupt_event`` log line that SQLite and Redis wrote.
"""

from __future__ import annotations

import ast
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import structlog

from agentlog.errors import CorruptEventError
from agentlog.eventlog import _row_format as row_format
from agentlog.eventlog._base import EventLog
from agentlog.eventlog._indexed import IndexedEventLog
from agentlog.eventlog._sql_index import SqlIndexedEventLog
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import Event, TaskCompleted
from agentlog.eventlog.kafka._grouplog import PartitionedKafkaEventLog
from agentlog.eventlog.kafka._log import KafkaEventLog
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.eventlog.postgres import PostgresEventLog
from agentlog.eventlog.redis import RedisEventLog
from agentlog.eventlog.sqlite import SqliteEventLog

EVENTLOG = Path(row_format.__file__).parent
INDEXED = [MemoryEventLog, SqliteEventLog, PostgresEventLog, RedisEventLog]
EVERY = [*INDEXED, KafkaEventLog, PartitionedKafkaEventLog]


@pytest.mark.parametrize("backend", INDEXED, ids=lambda cls: cls.__name__)
def test_no_indexed_backend_writes_its_own_read_or_tail(backend: type[EventLog]) -> None:
    assert issubclass(backend, IndexedEventLog)
    own = set(vars(backend)) & {"read", "tail", "_read_start", "_gap", "_scan"}
    assert not own, f"{backend.__name__} defines {sorted(own)}: use the hooks of _indexed.py"


@pytest.mark.parametrize("backend", EVERY, ids=lambda cls: cls.__name__)
def test_no_backend_writes_its_own_tail_loop(backend: type[EventLog]) -> None:
    assert "tail" not in vars(backend), f"{backend.__name__} defines tail: give _tail_wake"


@pytest.mark.parametrize("backend", [SqliteEventLog, PostgresEventLog], ids=lambda c: c.__name__)
def test_sql_backends_share_one_run_list(backend: type[EventLog]) -> None:
    assert issubclass(backend, SqlIndexedEventLog)
    own = set(vars(backend)) & {"page_runs", "list_workflows", "list_runs"}
    assert not own, f"{backend.__name__} defines {sorted(own)}: _sql_index.py has them"


def _sources() -> dict[str, str]:
    return {
        str(path.relative_to(EVENTLOG)): path.read_text() for path in sorted(EVENTLOG.rglob("*.py"))
    }


def test_the_run_ended_check_is_written_once() -> None:
    found = [name for name, text in _sources().items() if "in RunStatus.TERMINAL" in text]
    assert found == ["_records.py"], found  # status_ended


def _imports(text: str) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
    return modules


def test_the_row_format_has_its_own_module() -> None:
    for name in ("event_row", "event_rows", "event_from_row", "info_from_row", "info_to_row"):
        assert getattr(row_format, name).__module__ == "agentlog.eventlog._row_format"
    sources = _sources()
    for name in (
        "postgres/_log.py",
        "redis/_log.py",
        "redis/_rows.py",
        "_indexed.py",
        "_sql_index.py",
    ):
        assert "agentlog.eventlog.sqlite._schema" not in _imports(sources[name]), name


# -- the drift the shared path fixed: every backend logs a corrupt read -----------------

RUN = "gappy"
Remove = Callable[[int], Awaitable[None]]


def _sqlite_remove(path: Path) -> Remove:
    async def remove(seq: int) -> None:
        with closing(sqlite3.connect(path)) as conn, conn:
            assert conn.execute("DELETE FROM events WHERE seq = ?", (seq,)).rowcount == 1

    return remove


def _postgres_remove(log: PostgresEventLog) -> Remove:
    async def remove(seq: int) -> None:
        async def body(conn: Any) -> int:
            cur = await conn.execute(
                "DELETE FROM agentlog_events WHERE run_id = %s AND seq = %s", (RUN, seq)
            )
            return int(cur.rowcount)

        assert await log._call(body, "test delete") == 1

    return remove


def _redis_remove(log: RedisEventLog) -> Remove:
    async def remove(seq: int) -> None:
        assert await log._client.xdel(log._keys.events(RUN), f"{seq}-0") == 1

    return remove


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ]
)
async def damaged(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[EventLog, Remove]]:
    """An open log and a way to delete one of run ``RUN``'s stored events."""
    if request.param == "sqlite":
        path = tmp_path / "log.db"
        async with SqliteEventLog(path) as sqlite_log:
            yield sqlite_log, _sqlite_remove(path)
    elif request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        async with await PostgresEventLog.connect(url) as pg_log:
            yield pg_log, _postgres_remove(pg_log)
    else:
        log = await open_log(request.getfixturevalue("redis_url"))
        assert isinstance(log, RedisEventLog)
        async with log:
            yield log, _redis_remove(log)


async def test_a_corrupt_read_is_logged_on_every_backend(
    damaged: tuple[EventLog, Remove],
) -> None:
    log, remove = damaged
    await log.append([Event(RUN, seq, TaskCompleted(f"k{seq}", seq)) for seq in range(1, 6)])
    await remove(3)
    seen = []
    with structlog.testing.capture_logs() as lines, pytest.raises(CorruptEventError) as caught:
        async for event in log.read(RUN):
            seen.append(event.seq)
    assert seen == [1, 2]  # the good events before the gap still arrive
    assert (caught.value.run_id, caught.value.seq) == (RUN, 3)
    assert "seq 3 is missing" in caught.value.reason
    logged = [line for line in lines if line["event"] == "corrupt_event"]
    assert [(line["run_id"], line["seq"], line["log_level"]) for line in logged] == [
        (RUN, 3, "debug")
    ], lines
