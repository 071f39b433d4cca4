"""DBOS as a peer in the runtime benchmark's loop.

The loop is the one ``bench_runtime`` gives agentlog and LangGraph: N steps,
each appending the next message of the same conversation. In DBOS it is a
durable workflow whose step is a ``@DBOS.step()`` function returning the
message; the workflow appends it to its list. That is DBOS's own idiom for
state: each step's output is checkpointed in the system database before the
workflow goes on, and a recovered workflow rebuilds its list by replaying
those outputs, as an agentlog run rebuilds its state from the step events.
The workflow returns the count, not the list, so that the bytes on disk are
the steps' checkpoints and not a second copy of the conversation.

DBOS keeps one process-wide instance and a process-wide registry of
decorated functions, so the functions are decorated once per process
(:func:`_loop_workflow`) and each run launches a fresh instance on its own
SQLite file and destroys it afterwards. Its system database on SQLite runs
every step in its own ``BEGIN IMMEDIATE`` transaction: every step is durable
before the next one starts, so DBOS compares with agentlog's ``sync`` mode (it
has no mode that defers checkpoints).

DBOS sets neither the journal mode nor ``synchronous``: it gets SQLite's
rollback journal (``delete``: two fsyncs a commit, the journal's and the
database's) and this build's default ``synchronous``. The benchmark pins both
on every connection DBOS's engine opens (an SQLAlchemy ``connect`` listener,
:func:`benchmarks.durability.pin_sqlite`), and runs the loop twice: in DBOS's
own ``delete`` mode and in ``wal`` mode (one fsync a commit, as agentlog's
SQLite), both with ``synchronous=FULL``. The settings read back are returned
with the timing, for the table.

``dbos`` is imported only when the loop runs, so ``python -m benchmarks``
without the ``bench`` extra fails on this peer alone, as it does for LangGraph.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.durability import pin_sqlite

__all__ = ["JOURNAL_MODES", "dbos_loop"]

#: DBOS's own journal mode (SQLite's default), then the one agentlog runs.
JOURNAL_MODES = ("delete", "wal")

# The conversation of the run in progress. The step reads its message from
# here by index rather than taking it as an argument so that the loop's data
# enters DBOS only as the steps' outputs, as it enters agentlog's log only as
# the steps' writes (DBOS records a workflow's inputs too).
_messages: list[dict[str, Any]] = []

# DBOS's background threads (notification listener, queue, scheduler and job
# threads, the executor) must all be gone after DBOS.destroy(); otherwise they
# would poll the disk during the next measurements or keep the process alive.
_THREAD_EXIT_TIMEOUT_S = 15.0


@functools.cache
def _loop_workflow() -> Callable[[int], int]:
    """The loop as a DBOS workflow, decorated (and so registered) once per process."""
    from dbos import DBOS

    @DBOS.step()
    def next_message(index: int) -> dict[str, Any]:
        return _messages[index]

    @DBOS.workflow()
    def loop(steps: int) -> int:
        messages: list[dict[str, Any]] = []
        for index in range(steps):
            messages.append(next_message(index))
        return len(messages)

    return loop


def _join_new_threads(before: set[threading.Thread]) -> None:
    deadline = time.monotonic() + _THREAD_EXIT_TIMEOUT_S
    for thread in set(threading.enumerate()) - before:
        thread.join(max(0.0, deadline - time.monotonic()))
    left = [t.name for t in set(threading.enumerate()) - before if t.is_alive()]
    if left:
        raise RuntimeError(
            f"DBOS left threads running after DBOS.destroy(): {', '.join(sorted(left))}; "
            "the DBOS version installed shuts down differently: check its DBOS.destroy()"
        )


@contextlib.contextmanager
def _pinned(journal_mode: str) -> Iterator[set[str]]:
    """Pin every SQLite connection SQLAlchemy opens meanwhile; yield the settings seen."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    seen: set[str] = set()

    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        if isinstance(dbapi_conn, sqlite3.Connection):
            seen.add(pin_sqlite(dbapi_conn, journal_mode))

    event.listen(Engine, "connect", on_connect)
    try:
        yield seen
    finally:
        event.remove(Engine, "connect", on_connect)


def dbos_loop(
    messages: list[dict[str, Any]], database: Path, journal_mode: str = "delete"
) -> tuple[float, str]:
    """Run the loop once as a DBOS workflow on a new SQLite system database.

    Args:
        messages: The conversation; the loop takes one step per message.
        database: The SQLite file to create, in a folder that exists.
        journal_mode: One of :data:`JOURNAL_MODES`, pinned with
            ``synchronous=FULL`` on each of DBOS's connections.

    Returns:
        Seconds per step, from the workflow's start to its result (DBOS's
        launch, its migrations, and its shutdown are outside the timing, as
        the Runtime's opening is for agentlog), and the SQLite settings
        DBOS's connections ran with.

    Raises:
        RuntimeError: DBOS opened no SQLite connection the benchmark could
            pin (another driver), so its settings are unknown.
    """
    loop = _loop_workflow()
    _messages[:] = messages
    before = set(threading.enumerate())
    with _pinned(journal_mode) as seen:
        elapsed = _launch_and_run(loop, messages, database, before)
    if not seen:
        raise RuntimeError("DBOS opened no sqlite3 connection to pin: its settings are unknown")
    return elapsed / len(messages), "; ".join(sorted(seen))


def _launch_and_run(
    loop: Callable[[int], int],
    messages: list[dict[str, Any]],
    database: Path,
    before: set[threading.Thread],
) -> float:
    """Launch DBOS on ``database``, run the loop, destroy DBOS; the loop's seconds."""
    from dbos import DBOS, SetWorkflowID

    DBOS(
        config={
            "name": "bench-loop",
            "system_database_url": f"sqlite:///{database}",
            # DBOS logs to the console at INFO by default (launch, recovery,
            # the Conductor link); the benchmark's table is the only output
            "log_level": "WARNING",
        }
    )
    try:
        DBOS.launch()
        started = time.perf_counter()
        with SetWorkflowID("bench"):
            done = loop(len(messages))
        elapsed = time.perf_counter() - started
    finally:
        DBOS.destroy()
        _messages.clear()
        _join_new_threads(before)
    assert done == len(messages), done
    return elapsed
