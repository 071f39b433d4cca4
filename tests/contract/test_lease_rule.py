""" "Is the lease live" and "does the run need a worker" are written once (issue 22).

:meth:`RunInfo.lease_live` is the one Python definition; the SQL of it, and of
:meth:`RunInfo.needs_worker` that the SQLite and PostgreSQL runnable queries
answer from their indexes, is rendered by :mod:`agentlog.eventlog._claim_cases`.
The case table below runs every case of the rule against ``needs_worker`` and
against each backend's own ``runnable`` (memory, SQLite, PostgreSQL, Redis),
with a ``now`` of the test's, so the Python and the servers cannot drift.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

import pytest

import agentlog
from agentlog.eventlog._base import EventLog
from agentlog.eventlog._claim_cases import sql_lease_ended, sql_needs_worker
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import (
    LANGGRAPH_WORKFLOW,
    EventData,
    InterruptRaised,
    RunCompleted,
    utcnow,
)
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.eventlog.postgres import PostgresEventLog
from agentlog.eventlog.postgres import _schema as postgres_schema
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.eventlog.sqlite import _schema as sqlite_schema
from agentlog.testing import ev, started

SRC = Path(agentlog.__file__).parent
US = timedelta(microseconds=1)

Lease = Literal["none", "live", "ends now", "ended"]
Run = Literal["running", "claimed only", "timer", "input", "completed"]


@dataclass(frozen=True)
class RunnableCase:
    """A run in one state, at one ``now``, and whether a worker should drive it.

    Attributes:
        run: what the run recorded: ``running`` (started), ``claimed only``
            (no event), ``timer`` (parked on an interrupt with a due time),
            ``input`` (parked on a question, no due time), ``completed``.
        lease: the run's lease at ``now``: none, live (ends a microsecond
            after now), ends exactly now, or ended (a microsecond before now).
        due: for ``timer``: the due time minus ``now`` (<= 0: due).
        thread: the run is a LangGraph thread.
        archived: the run was pruned (its row is a tombstone).
        needs_worker: the rule's answer.
    """

    run: Run
    lease: Lease = "none"
    due: timedelta = timedelta(0)
    thread: bool = False
    archived: bool = False
    needs_worker: bool = False


CASES = (
    RunnableCase("running", needs_worker=True),
    RunnableCase("running", "live"),
    RunnableCase("running", "ends now", needs_worker=True),
    RunnableCase("running", "ended", needs_worker=True),
    RunnableCase("claimed only", "ended"),
    RunnableCase("timer", due=timedelta(0), needs_worker=True),
    RunnableCase("timer", due=-timedelta(seconds=5), needs_worker=True),
    RunnableCase("timer", due=US),
    RunnableCase("timer", "live", due=-timedelta(seconds=5)),
    RunnableCase("timer", "ends now", due=timedelta(0), needs_worker=True),
    RunnableCase("input"),
    RunnableCase("input", "ended"),
    RunnableCase("completed"),
    RunnableCase("completed", "ended"),
    RunnableCase("running", thread=True),
    RunnableCase("timer", due=-timedelta(seconds=5), thread=True),
    RunnableCase("running", archived=True, needs_worker=True),
    RunnableCase("running", "ended", archived=True, needs_worker=True),
    RunnableCase("timer", due=-timedelta(seconds=5), archived=True),
    RunnableCase("completed", archived=True),
)


def _events(case: RunnableCase, now: datetime) -> list[EventData]:
    first = started(LANGGRAPH_WORKFLOW if case.thread else "wf")
    if case.run == "claimed only":
        return []
    if case.run == "timer":
        return [first, InterruptRaised("a", 1, 0, 0, None, due_at=now + case.due, kind="timer")]
    if case.run == "input":
        return [first, InterruptRaised("a", 1, 0, 0, "ok?")]
    if case.run == "completed":
        return [first, RunCompleted()]
    return [first]


async def _set_up(log: EventLog, run_id: str, case: RunnableCase) -> datetime:
    """Record the case's run on ``log``; return the ``now`` the case is asked at."""
    now, epoch = utcnow(), 0
    if case.lease != "none":
        epoch = await log.claim_writer(run_id, owner="w", lease_seconds=600)
        claimed = await log.find_run(run_id)
        assert claimed is not None
        expires = claimed.lease_expires_at
        assert expires is not None
        shift = {"live": -US, "ends now": timedelta(0), "ended": US}[case.lease]
        now = expires + shift
    data = _events(case, now)
    if data:
        await log.append([ev(run_id, seq, d, epoch) for seq, d in enumerate(data, 1)])
    if case.archived:
        await log.prune(run_id)
    return now


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ]
)
async def log(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[EventLog]:
    """A fresh log of each backend with a runnable query of its own (or none: memory)."""
    if request.param == "memory":
        opened: EventLog = MemoryEventLog()
    elif request.param == "sqlite":
        opened = SqliteEventLog(tmp_path / "log.db")
    elif request.param == "postgres":
        opened = await PostgresEventLog.connect(request.getfixturevalue("postgres_url"))
    else:
        opened = await open_log(request.getfixturevalue("redis_url"))
    async with opened:
        yield opened


async def test_every_case_of_the_runnable_rule_on_every_backend(log: EventLog) -> None:
    wrong = []
    for n, case in enumerate(CASES):
        run_id = f"case-{n}"
        now = await _set_up(log, run_id, case)
        info = await log.find_run(run_id)
        assert info is not None, case
        assert info.lease_live(now) is (case.lease == "live"), (case, info)
        by_rule = info.needs_worker(now)
        by_backend = run_id in {r.run_id for r in await log.runnable(now=now)}
        if (by_rule, by_backend) != (case.needs_worker, case.needs_worker):
            wrong.append(f"{case}: needs_worker {by_rule}, runnable {by_backend}")
    assert not wrong, f"{type(log).__name__}:\n" + "\n".join(wrong)


def test_the_sql_dialects_render_the_rule_from_claim_cases() -> None:
    assert sql_needs_worker("?1", "?2") in sqlite_schema.RUNNABLE
    assert sql_needs_worker("%(now)s", "%(now)s") in postgres_schema.RUNNABLE
    assert sql_lease_ended("%(now)s", "agentlog_runs.") in postgres_schema.CLAIM


def test_the_lease_live_rule_is_written_once() -> None:
    # The comparison in Python, and its negation in SQL, each in one module.
    found: dict[str, list[str]] = {"python": [], "sql": []}
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        name = str(path.relative_to(SRC))
        if name.startswith("testing/"):
            continue  # the contract's examples check leases, they do not decide them
        if re.search(r"lease_expires_at\s*>", text):
            found["python"].append(name)
        if re.search(r"lease_expires_at IS NULL", text):
            found["sql"].append(name)
    assert found == {"python": ["eventlog/_records.py"], "sql": ["eventlog/_claim_cases.py"]}, found
