"""LangGraph's reads alone: the bounded-state rows of ``bench_langgraph``, SQLite only.

The part of :mod:`benchmarks.bench_langgraph` that measures a saver's reads
(bytes stored, ``get_tuple`` cold and warm, opening a thread) on a bounded
state, for ``AgentlogSaver`` on SQLite and LangGraph's ``SqliteSaver`` only,
one after the other in this same process, so that each row's ratio to the
peer (``vs_SqliteSaver``: ours over theirs) compares like with like under the
same load. No broker and no server: a quick run takes seconds, so it can be
repeated, before and after a change, alternately.

Usage: ``python -m benchmarks --only langgraph_reads [--quick]`` (500
checkpoints with ``--quick``, else 10,000).
"""

from __future__ import annotations

from benchmarks.bench_langgraph import Bounded, _bounded_rows, bounded_thread
from benchmarks.harness import Row
from benchmarks.langgraph_savers import agentlog_sqlite, sqlite_saver

__all__ = ["collect"]


def collect(quick: bool) -> list[Row]:
    """The bounded-state rows of SqliteSaver and AgentlogSaver on SQLite."""
    checkpoints = 500 if quick else 10_000
    results: dict[str, Bounded] = {}
    for make in (sqlite_saver, agentlog_sqlite):
        backend = make()
        results[backend.name] = bounded_thread(
            backend, checkpoints, fresh=10 if quick else 20, warm=500
        )
    return _bounded_rows(results, checkpoints)
