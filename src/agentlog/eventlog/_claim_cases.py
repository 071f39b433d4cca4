"""The claim, lease and append rules as tables of cases, and the server code made from them.

A rule that must run inside a server (PostgreSQL's claim upsert, a Redis
Lua script) cannot call Python, so it used to be written again in SQL and
in Lua beside the Python of :mod:`~agentlog.eventlog._fencing`, and the three
could drift. Here each rule is written once, as an ordered table of cases:
each case is the conditions under which it applies (all must hold) and its
outcome, a refusal with the typed error it deserves or a grant with the new
epoch and lease. Every condition is said once in each language that tests
it. :mod:`~agentlog.eventlog._fencing` decides in Python by reading the
table (:func:`refuse`); :func:`sql_grant` and :func:`lua_refusals` render
the same table into the SQL of ``postgres_schema`` and the Lua of
``redis_scripts`` when those modules are imported, so no server text is
written by hand. ``agentlog.testing`` runs concrete examples of every case
against every backend.

An append's fence and seq check (:data:`APPEND_CHECKS`) run on every write,
so they compare four numbers instead of reading a row; :func:`sql_append_grant`
and :func:`lua_append_refusals` render them into PostgreSQL's one-statement
append and the Redis append script. Whether a lease is live is
:meth:`RunInfo.lease_live <agentlog.eventlog._records.RunInfo.lease_live>`;
its SQL, and that of :meth:`RunInfo.needs_worker
<agentlog.eventlog._records.RunInfo.needs_worker>` for the runnable queries,
is :func:`sql_lease_ended` and :func:`sql_needs_worker`.

The Lua fragments read these locals, which each script binds first:
``row_epoch``, ``row_owner`` and ``row_expiry`` (the run's hash fields, nil
when absent), ``force`` (a boolean), ``now`` (microseconds) and ``epoch``
(the epoch a renewal or release names, a number). The SQL fragments name
the ``agentlog_runs`` columns and the statement's parameters ``%(force)s``,
``%(now)s`` and ``%(epoch)s``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from agentlog.errors import (
    ConflictError,
    EventLogError,
    FencedError,
    LeaseHeldError,
    UnknownRunError,
)
from agentlog.eventlog._records import RunInfo
from agentlog.eventlog.events import LANGGRAPH_WORKFLOW, RunStatus

__all__ = [
    "APPEND_CHECKS",
    "CLAIM_CASES",
    "EPOCH_CHECK",
    "LEASE_CASES",
    "AppendCheck",
    "Ask",
    "Case",
    "Condition",
    "Grant",
    "epoch_error",
    "grant",
    "lua_append_refusals",
    "lua_refusals",
    "refuse",
    "sql_append_grant",
    "sql_grant",
    "sql_lease_ended",
    "sql_needs_worker",
]


@dataclass(frozen=True, slots=True)
class Ask:
    """What a case looks at: the run's row as it stands, and the request.

    Attributes:
        run_id: the run asked about.
        row: its index row in the call's transaction; None if it has none.
        now: the time the call decides at (a claim's lease check needs it).
        force: a claim that takes over a live lease.
        epoch: the epoch a renewal or release names as its own.
    """

    run_id: str
    row: RunInfo | None
    now: datetime | None = None
    force: bool = True
    epoch: int = 0


@dataclass(frozen=True, slots=True)
class Condition:
    """One test of a case, said once in each language that runs it.

    Attributes:
        name: what it says, for the docs and the failure messages.
        holds: the test in Python.
        sql_unless: SQL that is true exactly when the test fails (NULL-safe),
            or None where the statement's ``WHERE run_id = ...`` already
            leaves the case out (a run with no row is not updated).
        lua: the test in Lua, over the locals the module docstring lists.
    """

    name: str
    holds: Callable[[Ask], bool]
    sql_unless: str | None
    lua: str


@dataclass(frozen=True, slots=True)
class Grant:
    """What a granted call does to the row: the epoch step; the lease is the asked one.

    Attributes:
        epoch_step: added to the row's writer epoch (a claim fences every
            older writer; a renewal or release keeps the epoch).
        takes_owner: the row's lease owner becomes the caller.
    """

    epoch_step: int
    takes_owner: bool


@dataclass(frozen=True, slots=True)
class Case:
    """One row of a rule's table: when it applies, and what follows.

    Attributes:
        name: the case, as the docs and the tests name it.
        when: conditions that must all hold (none: the case always applies).
        error: for a refusal, the typed error it deserves, built from the
            ask and the log's URL (``where``); None for a grant.
        reply: for a refusal, the Lua script's reply, read back by the Redis
            backend to raise the error.
        grant: for a grant, what it does to the row.
    """

    name: str
    when: tuple[Condition, ...]
    error: Callable[[Ask, str], EventLogError] | None = None
    reply: str = ""
    grant: Grant | None = None


def epoch_error(run_id: str, epoch: int, current: int) -> EventLogError:
    """The error of a writer whose ``epoch`` is not the run's ``current`` one.

    An older epoch is a :class:`~agentlog.errors.FencedError` (a newer writer
    claimed the run); a newer one was never claimed, which is a caller's bug.
    """
    if epoch < current:
        return FencedError(run_id, epoch, current)
    return EventLogError(
        f"run {run_id!r}: writer epoch {epoch} was never claimed (current is "
        f"{current}); call claim_writer() before appending."
    )


def sql_lease_ended(now: str, table: str = "") -> str:
    """SQL that is true exactly when no writer's lease on the run is live at ``now``.

    :meth:`RunInfo.lease_live <agentlog.eventlog._records.RunInfo.lease_live>`
    negated, NULL-safe (a lease that ends exactly at ``now`` is over), in the
    one text that every dialect's statement uses: the claim's refusal and
    the runnable queries (:func:`sql_needs_worker`).

    Args:
        now: the statement's parameter for now (``?1``, ``%(now)s``).
        table: the column's qualifier, such as ``"agentlog_runs."`` in an
            upsert, whose ``EXCLUDED`` row has the column too.
    """
    return f"{table}lease_expires_at IS NULL OR {table}lease_expires_at <= {now}"


def sql_lease_live(now: str) -> str:
    """:func:`sql_lease_ended` negated, as a range an index on the lease's end
    answers (a queue's slot holders)."""
    return f"{now} < lease_expires_at"


def sql_needs_worker(now: str, due: str) -> str:
    """:meth:`RunInfo.needs_worker <agentlog.eventlog._records.RunInfo.needs_worker>`
    over the run index's columns: the WHERE body of SQLite's and PostgreSQL's
    runnable queries, which their indexes answer. Case for case: a
    LangGraph thread never; an archived run only while it is running (the
    SQL before this rendering left that out, so SQLite and PostgreSQL, unlike
    the other backends, handed a worker an archived waiting run whose timer
    was due); a live lease never; a running run with an event; a waiting run
    whose timer is due.

    Args:
        now: the parameter the lease is compared with.
        due: the parameter a waiting run's ``wake_at`` is compared with (the
            same time; SQLite numbers its parameters).
    """
    return (
        f"last_seq > 0 AND workflow <> '{LANGGRAPH_WORKFLOW}' "
        f"AND (NOT archived OR status = '{RunStatus.RUNNING}') "
        f"AND ({sql_lease_ended(now)}) "
        f"AND (status IN ('{RunStatus.RUNNING}', '{RunStatus.QUEUED}') "
        f"OR (status = '{RunStatus.WAITING}' AND wake_at <= {due}))"
    )


def _lease_live(ask: Ask) -> bool:
    return ask.row is not None and ask.now is not None and ask.row.lease_live(ask.now)


def _lease_held(ask: Ask, where: str) -> EventLogError:
    row, now = ask.row, ask.now
    assert row is not None and row.lease_expires_at is not None and now is not None
    return LeaseHeldError(ask.run_id, row.lease_owner, (row.lease_expires_at - now).total_seconds())


def _epoch_differs(epoch: int, current: int) -> bool:
    return epoch != current


def _other_epoch(ask: Ask) -> bool:
    return ask.row is not None and _epoch_differs(ask.epoch, ask.row.writer_epoch)


def _stale(ask: Ask, where: str) -> EventLogError:
    assert ask.row is not None
    return epoch_error(ask.run_id, ask.epoch, ask.row.writer_epoch)


_POLITE = Condition(
    "the claim is polite (force is false)",
    lambda ask: not ask.force,
    sql_unless="%(force)s",
    lua="not force",
)
_LEASE_LIVE = Condition(
    "the run's lease ends after now",
    _lease_live,
    sql_unless=sql_lease_ended("%(now)s", "agentlog_runs."),
    lua="row_expiry and tonumber(row_expiry) > now",
)
_NO_ROW = Condition(
    "the run has no row",
    lambda ask: ask.row is None,
    sql_unless=None,
    lua="not row_epoch",
)
# The epoch test in SQL and Lua, shared by the lease table and the append's fence.
_SQL_SAME_EPOCH = "writer_epoch = %(epoch)s"
_LUA_OTHER_EPOCH = "tonumber(row_epoch) ~= epoch"
_OTHER_EPOCH = Condition(
    "the asked epoch is not the run's",
    _other_epoch,
    sql_unless=_SQL_SAME_EPOCH,
    lua=_LUA_OTHER_EPOCH,
)

#: ``claim_writer``: a polite claim of a live lease is refused; any other
#: claim (of a run with no row too) bumps the epoch and takes the lease.
CLAIM_CASES: tuple[Case, ...] = (
    Case(
        "a polite claim of a live lease",
        (_POLITE, _LEASE_LIVE),
        error=_lease_held,
        reply="{'held', row_owner or '', row_expiry}",
    ),
    Case("any other claim", (), grant=Grant(epoch_step=1, takes_owner=True)),
)

#: ``renew_lease`` and ``release_lease``: only the writer of the run's
#: current epoch changes its lease, and the epoch stays.
LEASE_CASES: tuple[Case, ...] = (
    Case(
        "a run with no row",
        (_NO_ROW,),
        error=lambda ask, where: UnknownRunError(ask.run_id, where),
        reply="{'unknown'}",
    ),
    Case(
        "another epoch than the run's",
        (_OTHER_EPOCH,),
        error=_stale,
        reply="{'refused', tonumber(row_epoch)}",
    ),
    Case("the run's writer", (), grant=Grant(epoch_step=0, takes_owner=False)),
)


def refuse(cases: tuple[Case, ...], ask: Ask, where: str = "") -> None:
    """Raise the error of the first refusing case that applies to ``ask``, if any."""
    for case in cases:
        if all(condition.holds(ask) for condition in case.when):
            if case.error is not None:
                raise case.error(ask, where)
            return


def grant(cases: tuple[Case, ...]) -> Grant:
    """The grant that ends ``cases`` (the case that applies when none refuses)."""
    last = cases[-1].grant
    assert last is not None and not cases[-1].when, "a rule's table ends with its grant"
    return last


def _refusals(cases: tuple[Case, ...]) -> list[Case]:
    return [case for case in cases if case.error is not None]


def sql_grant(cases: tuple[Case, ...]) -> str:
    """The SQL condition under which no refusing case applies (a WHERE clause's body).

    Each refusal contributes the OR of its conditions' ``sql_unless``;
    several refusals are ANDed, each in parentheses.
    """
    parts = [
        " OR ".join(c.sql_unless for c in case.when if c.sql_unless is not None)
        for case in _refusals(cases)
    ]
    parts = [part for part in parts if part]
    return parts[0] if len(parts) == 1 else " AND ".join(f"({part})" for part in parts)


def lua_refusals(cases: tuple[Case, ...]) -> str:
    """The Lua branches that return each refusing case's reply, in the table's order."""
    return "\n".join(
        f"if {' and '.join(c.lua for c in case.when)} then return {case.reply} end"
        for case in _refusals(cases)
    )


@dataclass(frozen=True, slots=True)
class AppendCheck:
    """One refusal of an append (its fence, its seq), said once in each language.

    An append is checked on every write, and in the server too (PostgreSQL's
    one-statement append, the Redis append script), so its test takes the
    four numbers it compares, not a row to build: the run's ``last_seq`` and
    ``current`` writer epoch, the batch's ``first`` seq and ``epoch``.

    Attributes:
        name: the case, as the docs and the tests name it.
        refuses: the test in Python, ``(last_seq, first, epoch, current)``.
        sql_unless: SQL that is true exactly when the test passes, over the
            run's columns and the statement's ``%(epoch)s`` and
            ``%(expect_seq)s`` (the seq before the batch's first).
        lua: the test in Lua, over the locals ``row_last`` (a number),
            ``row_epoch`` (the hash field, ``'0'`` when absent), ``first``
            and ``epoch`` (numbers).
        error: the typed error, from ``(run_id, last_seq, first, epoch, current)``.
    """

    name: str
    refuses: Callable[[int, int, int, int], bool]
    sql_unless: str
    lua: str
    error: Callable[[str, int, int, int, int], EventLogError]


#: The fence: an append under another epoch than the run's (a writer taken
#: over, or an epoch never claimed); the lease table's "another epoch" case.
EPOCH_CHECK = AppendCheck(
    "another epoch than the run's",
    lambda last, first, epoch, current: _epoch_differs(epoch, current),
    sql_unless=_SQL_SAME_EPOCH,
    lua=_LUA_OTHER_EPOCH,
    error=lambda run_id, last, first, epoch, current: epoch_error(run_id, epoch, current),
)

#: ``append``: the fence first (a fenced writer learns that it must stop, not
#: that it read a stale seq), then the seq; an append that passes both is written.
APPEND_CHECKS: tuple[AppendCheck, ...] = (
    EPOCH_CHECK,
    AppendCheck(
        "not the run's next seq",
        lambda last, first, epoch, current: first != last + 1,
        sql_unless="last_seq = %(expect_seq)s",
        lua="first ~= row_last + 1",
        error=lambda run_id, last, first, epoch, current: ConflictError(run_id, last + 1, first),
    ),
)


def sql_append_grant() -> str:
    """The SQL condition under which no check of :data:`APPEND_CHECKS` refuses."""
    return " AND ".join(check.sql_unless for check in APPEND_CHECKS)


def lua_append_refusals(reply: str) -> str:
    """The Lua branches that return ``reply`` when a check of :data:`APPEND_CHECKS` refuses."""
    return "\n".join(f"if {check.lua} then return {reply} end" for check in APPEND_CHECKS)
