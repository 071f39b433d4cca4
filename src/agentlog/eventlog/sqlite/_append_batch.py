"""One group's statements: each batch's conditional append inside the open transaction.

:class:`~agentlog.eventlog.sqlite._group_commit.GroupCommit` decides when and
on which thread a group commits; this module is what the transaction runs for
each batch (:func:`apply_batches`): the run's next-seq and writer-epoch check,
the run index row's update (a delta of the remembered row for a step's events),
and the rows' INSERTs, one statement for a small batch, chunks under a
SAVEPOINT for a big one. A ConflictError or FencedError leaves nothing of its
batch and fails only its caller.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from agentlog.errors import AgentlogError, ConflictError
from agentlog.eventlog._base import RunInfo, check_next
from agentlog.eventlog._row_format import RUN_FIELDS, info_from_row, info_to_row, row_after_steps
from agentlog.eventlog.events import Event
from agentlog.eventlog.sqlite._schema import (
    INSERT_EVENT,
    SELECT_RUN,
    UPSERT_RUN,
    insert_events_sql,
    update_run_sql,
    update_written_run_sql,
)

__all__ = ["CHUNK_ROWS", "ONE_STATEMENT_ROWS", "Batch", "Known", "apply_batches"]


@dataclass(slots=True, eq=False)
class Batch:
    """One caller's batch of one run, encoded."""

    events: Sequence[Event]
    rows: list[tuple[Any, ...]]
    """The events as :data:`~agentlog.eventlog.sqlite._schema.INSERT_EVENT`
    parameters, encoded on the caller's side before the write lock is taken."""
    first_seq: int
    epoch: int
    durable: bool


#: The largest batch inserted by one statement (8 parameters a row: 256, under
#: the 999 that SQLite builds before 3.32 allow). Each statement is a trip of
#: the worker thread out of the GIL, which it must then take back from the busy
#: event loop: one INSERT, not a SAVEPOINT, an executemany stepping each row
#: and a RELEASE, for a step's few events.
ONE_STATEMENT_ROWS = 32

#: The rows of one INSERT of a batch bigger than :data:`ONE_STATEMENT_ROWS`: 992
#: parameters, under the 999 of the oldest SQLite builds.
CHUNK_ROWS = 124
_COLUMNS = 8  # an event row's columns (INSERT_EVENT's parameters)

#: What one append leaves in the run index: the run's row as stored, and as a
#: RunInfo unless a step's append wrote it as a delta of the row
#: (:func:`~agentlog.eventlog._row_format.row_after_steps`): None then, and the
#: RunInfo is built from the row when an append needs the full rules.
Known = tuple[RunInfo | None, list[Any]]

_EPOCH, _LAST_SEQ, _STEPS = (
    RUN_FIELDS.index(name) for name in ("writer_epoch", "last_seq", "steps")
)
#: The columns a step's append changes (:func:`row_after_steps`), with or without its steps.
_STEP_COLUMNS = (_LAST_SEQ, RUN_FIELDS.index("updated_at"))
_STEP_COLUMNS_STEPS = tuple(sorted((*_STEP_COLUMNS, _STEPS)))


def _append_one(conn: sqlite3.Connection, append: Batch, known: Known | None) -> Known:
    """The conditional append of one batch, inside the open transaction.

    ``known`` is the run's index row as this log last wrote it. When the
    batch follows it (same epoch, next seq), the row is not read again: the
    new row is written with ``UPDATE ... WHERE writer_epoch = ? AND last_seq
    = ?``, which is the fence and the seq check inside this transaction. If
    it changes no row (another writer claimed the run, or another log
    appended to it), nothing was written and the row is read as without
    ``known``, and the checks raise the error the append deserves.

    Every check runs, and the new run index row is built, before the first
    event is written: a failing append of one statement's rows writes
    nothing. Only a batch of more than :data:`ONE_STATEMENT_ROWS` rows can
    fail halfway (a row the index did not know of), so only such a batch
    needs a savepoint to undo its first rows.

    Returns:
        The run's index row after the append.

    Raises:
        ConflictError: the batch is not the run's next seq.
        FencedError: a newer writer claimed the run.
        EventLogError: the batch's epoch was never claimed.
        NotSerializableError: a time in the batch cannot be stored.
    """
    run_id, first_seq = append.events[0].run_id, append.first_seq
    if (
        known is not None
        and known[1][_EPOCH] == append.epoch
        and known[1][_LAST_SEQ] == first_seq - 1
    ):
        info, old = known
        # A step's events: the row's delta, its stored time the last row's ts.
        new = row_after_steps(old, append.events, append.rows[-1][3])
        after: RunInfo | None
        if new is not None:
            after = None
            changed = _STEP_COLUMNS if new[_STEPS] == old[_STEPS] else _STEP_COLUMNS_STEPS
        else:
            after = (info or info_from_row(old)).after(append.events)
            new = info_to_row(after)
            changed = _changed(old, new)  # never empty: last_seq moves
        cursor = conn.execute(
            update_written_run_sql(changed),
            [*(new[i] for i in changed), run_id, append.epoch, old[_LAST_SEQ]],
        )
        if cursor.rowcount == 1:
            try:
                _insert(conn, append)
            except ConflictError:  # the row is put back as it was: nothing is recorded
                conn.execute(update_run_sql(changed), [*(old[i] for i in changed), run_id])
                raise
            return after, new
    return _append_read(conn, append)


def _append_read(conn: sqlite3.Connection, append: Batch) -> Known:
    """:func:`_append_one` for a run whose index row this log does not know."""
    run_id, first_seq = append.events[0].run_id, append.first_seq
    row = conn.execute(SELECT_RUN, (run_id,)).fetchone()
    info = RunInfo(run_id) if row is None else info_from_row(row)
    check_next(run_id, info.last_seq, first_seq, append.epoch, info.writer_epoch)
    after = info.after(append.events)
    new = info_to_row(after)
    _insert(conn, append, info.last_seq)
    if row is None:
        conn.execute(UPSERT_RUN, new)
        return after, new
    # Only the columns that changed: an index on an unchanged column (the
    # status, the wake-up time) is then not rewritten at every step.
    old = list(row)
    changed = _changed(old, new)
    if changed:
        conn.execute(update_run_sql(changed), [*(new[i] for i in changed), run_id])
    return after, new


def _changed(old: Sequence[Any], new: Sequence[Any]) -> tuple[int, ...]:
    return tuple(i for i, (was, now) in enumerate(zip(old, new, strict=True)) if was != now)


def _insert(conn: sqlite3.Connection, append: Batch, last_seq: int | None = None) -> None:
    """The batch's rows; ConflictError if the table already holds one of its seqs."""
    try:
        rows = append.rows
        if len(rows) == 1:
            conn.execute(INSERT_EVENT, rows[0])
        elif len(rows) <= ONE_STATEMENT_ROWS:
            conn.execute(insert_events_sql(len(rows)), [value for row in rows for value in row])
        else:  # under the append's savepoint (see _apply)
            _insert_chunks(conn, rows)
    except sqlite3.IntegrityError as exc:
        # The index said the seq was free; the table disagrees.
        expected = append.first_seq - 1 if last_seq is None else last_seq
        raise ConflictError(append.events[0].run_id, expected + 1, append.first_seq) from exc


def _insert_chunks(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    """A big batch's rows, :data:`CHUNK_ROWS` to a multi-row INSERT: about 0.25 µs
    of CPU an event less than ``executemany`` stepping each row (a statement
    binds and steps its rows inside SQLite; measured in docs/benchmarks.md,
    session 33)."""
    flat = list(chain.from_iterable(rows))
    whole = len(rows) - len(rows) % CHUNK_ROWS
    if whole:
        sql, width = insert_events_sql(CHUNK_ROWS), CHUNK_ROWS * _COLUMNS
        for start in range(0, whole * _COLUMNS, width):
            conn.execute(sql, flat[start : start + width])
    if whole < len(rows):
        conn.execute(insert_events_sql(len(rows) - whole), flat[whole * _COLUMNS :])


def apply_batches(
    group: Sequence[Batch], known: dict[str, Known], conn: sqlite3.Connection
) -> tuple[list[AgentlogError | None], dict[str, Known]]:
    """Each append of the group in turn: its own error, or None; and the run
    index rows the group leaves (kept by the caller only once it committed)."""
    errors: list[AgentlogError | None] = []
    written: dict[str, Known] = {}
    for append in group:
        run_id = append.events[0].run_id
        guarded = len(append.rows) > ONE_STATEMENT_ROWS
        if guarded:
            conn.execute("SAVEPOINT agentlog_append")
        try:
            written[run_id] = _append_one(conn, append, written.get(run_id, known.get(run_id)))
        except AgentlogError as exc:  # this append's own: the others go on
            if guarded:
                conn.execute("ROLLBACK TO agentlog_append")
            errors.append(exc)
        else:
            errors.append(None)
        if guarded:
            conn.execute("RELEASE agentlog_append")
    return errors, written
