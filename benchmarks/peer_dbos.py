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
every step in its own ``BEGIN IMMEDIATE`` transaction in SQLite's default
rollback-journal mode with ``synchronous=FULL``: every step is durable before
the next one starts, so DBOS compares with agentlog's ``sync`` mode (it has no
mode that defers checkpoints).

``dbos`` is imported only when the loop runs, so ``python -m benchmarks``
without the ``bench`` extra fails on this peer alone, as it does for LangGraph.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["dbos_loop"]

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


def dbos_loop(messages: list[dict[str, Any]], database: Path) -> float:
    """Run the loop once as a DBOS workflow on a new SQLite system database.

    Args:
        messages: The conversation; the loop takes one step per message.
        database: The SQLite file to create, in a folder that exists.

    Returns:
        Seconds per step, from the workflow's start to its result: DBOS's
        launch (migrations) and shutdown are outside the timing, as the
        Runtime's opening is for agentlog.
    """
    from dbos import DBOS, SetWorkflowID

    loop = _loop_workflow()
    _messages[:] = messages
    before = set(threading.enumerate())
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
    return elapsed / len(messages)
