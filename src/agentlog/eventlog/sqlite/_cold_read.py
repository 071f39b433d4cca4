"""A run's latest snapshot and the events after it, in one statement.

A resume (the projector's ``load_state``) and a LangGraph saver's first read
of a thread want the same thing: the newest snapshot, the snapshots its
chain builds on, and the events after it, bounded by the run index's last
seq. Read hook by hook that is three to five statements (the snapshot, its
parents, the run row, the rows); here it is one, a ``UNION ALL`` of the run
row, the snapshot chain and the first batch of rows, run on the calling
thread from its read connection (:mod:`agentlog.eventlog.sqlite._reader`),
with no event loop. The rows are checked as every read checks them (seq
continuity from the snapshot, each checksum); anything out of the ordinary
(no index row, a pruned run, a gap, a bad row) returns None, and the caller
takes the usual path, which raises the usual typed error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentlog.errors import BackendUnavailableError
from agentlog.eventlog._base import Snapshot, check_run_id
from agentlog.eventlog._indexed import ColdRead, _verified
from agentlog.eventlog._row_format import MAX_SEQ, from_us, seq_param
from agentlog.eventlog._worker_thread import WorkerThread
from agentlog.eventlog.sqlite._connection import SqliteConnection
from agentlog.eventlog.sqlite._group_commit import GroupCommit
from agentlog.eventlog.sqlite._reader import ReadConnections

__all__ = ["COLD_READ", "SqliteColdRead", "cold_read_params"]

_RUN = "SELECT 0, last_seq, archived, NULL, NULL, NULL, NULL, NULL FROM runs WHERE run_id = :run"
#: The newest snapshot's seq at or below the bound.
_TOP = "(SELECT max(seq) FROM snapshots WHERE run_id = :run AND seq <= :upto)"
#: The rows after a seq, up to the bound. How many is the statement's LIMIT,
#: which counts its rows in the order of its parts (the run row, the
#: snapshots, then these): one bound, where a range of ``:batch`` seqs named
#: the newest snapshot's seq twice (a subquery more to compile on each new
#: connection: 10 to 15 µs). Rows past the run's last seq are dropped by the
#: caller, which reads it from the run's row.
_EVENTS = (
    "SELECT 2, seq, type, ts, schema_v, writer_epoch, payload, checksum FROM events "
    "WHERE run_id = :run AND seq > {after} AND seq <= :upto"
)

#: The run row, the newest snapshot's chain (every snapshot from its base to
#: it) and the rows after it: tagged 0, 1 and 2 in the first column. Written
#: to compile fast: on a connection's first read, compiling it is most of its
#: cost (no CTE, no subquery in FROM, each table named as few times as it can be).
COLD_READ = (
    f"{_RUN} UNION ALL "
    "SELECT 1, seq, state, created_at, base_seq, NULL, NULL, NULL FROM snapshots "
    "WHERE run_id = :run AND seq <= :upto AND seq >= (SELECT CASE WHEN base_seq > 0 "
    "AND base_seq < seq THEN base_seq ELSE seq END FROM snapshots "
    "WHERE run_id = :run AND seq <= :upto ORDER BY seq DESC LIMIT 1) "
    "UNION ALL " + _EVENTS.format(after=f"coalesce({_TOP}, 0)") + " LIMIT :limit"
)
#: The run row and the first rows of the run, with no snapshot.
COLD_READ_EVENTS = f"{_RUN} UNION ALL " + _EVENTS.format(after="0") + " LIMIT :limit"
#: Rows the LIMIT allows beyond a batch of events: the run row and a chain of
#: snapshots. A longer chain leaves fewer events than a batch, which reads
#: as a gap, and the caller takes the usual path.
CHAIN_ROWS = 64


def cold_read_params(run_id: str, upto: int, batch: int) -> dict[str, Any]:
    """The parameters of :data:`COLD_READ` (and :data:`COLD_READ_EVENTS`)."""
    return {"run": run_id, "upto": upto, "limit": batch + 1 + CHAIN_ROWS}


class SqliteColdRead:
    """:meth:`~agentlog.eventlog._indexed.IndexedEventLog.cold_read` for SQLite."""

    _reads: ReadConnections
    _closed: bool
    _worker: WorkerThread
    _group: GroupCommit
    _db: SqliteConnection
    read_batch: int
    url: str

    if TYPE_CHECKING:

        def _opened_snapshot(self, snapshot: Snapshot | None) -> Snapshot | None: ...

    def close_unused(self) -> bool:
        """Close the log now, on this thread, with no event loop, if its
        worker thread never started (lone appends commit on their loop's
        thread without it) and no group of appends is open (closing would
        queue it on the thread); False, and nothing done, otherwise.

        Whether a group is open is decided under the group's lock, which
        refuses every later append (another loop's, racing this). A call
        that another thread queued on the worker thread since, or another
        loop's commit still holding the connection, finishes first: this
        then waits for the thread (it never needs an event loop)."""
        if self._closed:
            return True
        if self._worker.started or not self._group.close_if_empty():
            return False
        self._closed = True
        self._reads.close()
        if self._worker.hold_if_idle():
            try:
                self._db.close()
            finally:
                self._worker.release()
        else:  # after what holds the connection or is queued: stop() waits for it
            self._worker.post(self._db.close)
        self._worker.stop()
        return True

    def cold_read(
        self, run_id: str, *, upto_seq: int | None = None, snapshots: bool = True
    ) -> ColdRead | None:
        check_run_id(run_id)
        if self._closed:
            raise BackendUnavailableError(
                f"sqlite log {self.url!r} is closed; open it again with open_log()."
            )
        upto = MAX_SEQ if upto_seq is None else seq_param(upto_seq)
        params = cold_read_params(run_id, upto, self.read_batch)
        found = self._reads.query_here(COLD_READ if snapshots else COLD_READ_EVENTS, params)
        run: Any = None
        stored: list[Snapshot] = []
        rows: list[tuple[Any, ...]] = []
        for row in found:
            tag = row[0]
            if tag == 2:
                rows.append(row[1:])
            elif tag == 1:
                stored.append(Snapshot(run_id, row[1], row[2], from_us(row[3]), row[4]))
            else:
                run = row
        if run is None or run[2]:
            return None  # no index row (unknown, or a damaged index), or pruned
        stored.sort(key=lambda s: s.seq, reverse=True)
        after, bound = (stored[0].seq if stored else 0), min(upto, run[1])
        if len(rows) > self.read_batch:
            del rows[self.read_batch :]
        if rows and rows[-1][0] > bound:  # not seen: one transaction writes both
            rows = [row for row in rows if row[0] <= bound]
        good, problem = _verified(run_id, rows, after, self.url)
        if problem is not None:
            return None  # the usual path names it
        end = after + len(good)
        if end < bound and len(good) < self.read_batch:
            return None  # a gap at the end
        opened = [self._opened_snapshot(s) for s in stored]
        return ColdRead([s for s in opened if s is not None], good, after, end >= bound)
