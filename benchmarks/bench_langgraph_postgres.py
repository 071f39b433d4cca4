"""LangGraph on PostgreSQL: AgentlogSaver on ``postgresql://`` against LangGraph's PostgresSaver.

The loop of ``benchmarks/bench_langgraph.py`` (N steps, each appending the
next ~500-byte message of random text to a list; its graph and harness,
:func:`~benchmarks.bench_langgraph.run_loop`, are reused as they are), run by
LangGraph with two checkpointers on the SAME PostgreSQL server, in this same
process, one after the other for each N and mode:

* ``AgentlogSaver.from_url("postgresql://...")`` (events, plus a snapshot
  every 200 steps),
* ``PostgresSaver`` of ``langgraph-checkpoint-postgres`` (the peer), after
  its ``setup()``.

Each run gets a fresh database of its own on that server. A row gives the
per-step time (median and p99 of the interval between the graph's
consecutive ``updates``) and ``total_ms_per_step`` (the whole ``stream`` over
N, including the final flush of async writes). Bytes are
``pg_total_relation_size`` (heap, indexes and TOAST) summed over that side's
tables, read right after the saver closed. Targets at N = 3,000: >= 10x
faster per step and >= 50x fewer bytes than PostgresSaver (the issue measured
PostgresSaver here at 16.8 ms/step and 2.4 GB). Figures are reported, never
asserted.

Second, the first save of a new thread (issue 19, item 14: it took 13-19 ms
against PostgresSaver's 1-2 ms, and so changed the order of parallel tasks'
stream output in timing-sensitive graphs): for each of many new threads,
``get_tuple`` (as an ``invoke`` starts; timed apart) then the first ``put``,
on both savers, thread by thread in turn so that load on the machine hits
both alike. Target: ours within 2x of PostgresSaver's median.

The server is the one ``POSTGRES_URL`` names when set (this module then
creates and drops its databases there), otherwise one started with Debian's
binaries in a temporary folder, fsync on, as ``bench_postgres`` does.
"""

from __future__ import annotations

import contextlib
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver

from agentlog.langgraph import AgentlogSaver
from benchmarks.bench_langgraph import Backend, LoopResult, run_loop
from benchmarks.bench_postgres import databases
from benchmarks.harness import Row, row_from_samples

AREA = "langgraph_postgres"
PEER = "PostgresSaver"
OURS = "agentlog postgresql"

#: Each side's tables, whose sizes are summed.
AGENTLOG_TABLES = (
    "agentlog_events",
    "agentlog_runs",
    "agentlog_snapshots",
    "agentlog_schema_version",
)
PEER_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")


def table_bytes(url: str, tables: tuple[str, ...]) -> int:
    """``pg_total_relation_size`` summed over those of ``tables`` that exist."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind = 'r' AND n.nspname = 'public' AND c.relname = ANY(%s)",
            (list(tables),),
        ).fetchone()
    return int(row[0]) if row else 0


def _measure(url: str, tables: tuple[str, ...]) -> Callable[[], tuple[int, str]]:
    return lambda: (table_bytes(url, tables), "pg_total_relation_size")


#: The durability both sides commit with: agentlog's log sets it on its
#: connections, and :func:`postgres_saver` pins it on PostgresSaver's.
SYNCHRONOUS_COMMIT = "synchronous_commit=on"


def agentlog_postgres(url: str) -> Backend:
    """AgentlogSaver on the (empty) database at ``url``."""
    return Backend(
        OURS,
        lambda: AgentlogSaver.from_url(url),
        _measure(url, AGENTLOG_TABLES),
        lambda: None,
        SYNCHRONOUS_COMMIT,
    )


def postgres_saver(url: str) -> Backend:
    """LangGraph's PostgresSaver on the (empty) database at ``url``, set up first, its
    connection pinned to ``synchronous_commit = on`` (not left to the server's default)."""

    @contextlib.contextmanager
    def opener() -> Iterator[BaseCheckpointSaver[Any]]:
        with PostgresSaver.from_conn_string(url) as saver:
            conn = saver.conn
            assert isinstance(conn, psycopg.Connection)  # from_conn_string: one connection
            conn.execute("SET synchronous_commit = on")
            row = conn.execute("SHOW synchronous_commit").fetchone()  # a dict: dict_row
            if row is None or list(row.values()) != ["on"]:
                raise RuntimeError(f"PostgresSaver's connection kept synchronous_commit={row}")
            saver.setup()
            yield saver

    return Backend(PEER, opener, _measure(url, PEER_TABLES), lambda: None, SYNCHRONOUS_COMMIT)


def _rows(results: dict[tuple[str, str, int], LoopResult]) -> list[Row]:
    """One row per (backend, mode, N); ours carries its ratios against the peer's run."""
    rows: list[Row] = []
    for (backend, mode, n), res in results.items():
        extra: dict[str, Any] = {
            "total_ms_per_step": round(res.total_ms_per_step, 3),
            "MB": round(res.nbytes / 1e6, 3),
        }
        peer = results.get((PEER, mode, n))
        if backend != PEER and peer is not None:
            extra["x_faster"] = round(peer.total_ms_per_step / res.total_ms_per_step, 1)
            extra["x_fewer_bytes"] = round(peer.nbytes / max(res.nbytes, 1), 1)
            extra["target"] = ">=10x faster, >=50x fewer bytes"
        rows.append(row_from_samples(AREA, f"loop N={n} {mode}: {backend}", res.step_s, **extra))
    return rows


def run(new_database: Callable[[], str], sizes: list[int], modes: list[str]) -> list[Row]:
    """The loop at each size and mode on both savers, each run on a fresh database."""
    makers: list[Callable[[str], Backend]] = [postgres_saver, agentlog_postgres]
    results: dict[tuple[str, str, int], LoopResult] = {}
    for mode in modes:
        for n in sizes:
            for make in makers:
                backend = make(new_database())
                results[(backend.name, mode, n)] = run_loop(backend, n, mode)
    return _rows(results)


def _first_save(saver: BaseCheckpointSaver[Any]) -> tuple[float, float]:
    """Seconds of ``get_tuple`` and of the first ``put`` of one new thread."""
    config: Any = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex}", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": ["write a note on durable agents"]}
    checkpoint["channel_versions"] = {"messages": saver.get_next_version(None, None)}
    versions = dict(checkpoint["channel_versions"])
    start = time.perf_counter()
    saver.get_tuple(config)
    read = time.perf_counter()
    saver.put(config, checkpoint, {"source": "input", "step": -1}, versions)
    return read - start, time.perf_counter() - read


def first_save_rows(new_database: Callable[[], str], threads: int) -> list[Row]:
    """The first save of ``threads`` new threads on each saver, in turn (module docstring)."""
    ours_url, peer_url = new_database(), new_database()
    samples: dict[str, list[tuple[float, float]]] = {OURS: [], PEER: []}
    with (
        AgentlogSaver.from_url(ours_url) as ours,
        PostgresSaver.from_conn_string(peer_url) as peer,
    ):
        peer.setup()
        savers: dict[str, BaseCheckpointSaver[Any]] = {OURS: ours, PEER: peer}
        for saver in savers.values():
            _first_save(saver)  # warm: connections, prepared statements
        for _ in range(threads):
            for name, saver in savers.items():
                samples[name].append(_first_save(saver))
    median_put = {name: statistics.median(put for _, put in got) for name, got in samples.items()}
    rows = []
    for name, got in samples.items():
        extra: dict[str, Any] = {
            "get_tuple_median_ms": round(statistics.median(read for read, _ in got) * 1e3, 3)
        }
        if name == OURS:
            extra["x_peer"] = round(median_put[OURS] / median_put[PEER], 2)
            extra["target"] = "x_peer <= 2"
        rows.append(
            row_from_samples(
                AREA, f"first put of a new thread: {name}", [put for _, put in got], **extra
            )
        )
    return rows


def collect(quick: bool) -> list[Row]:
    """Run the loop, then the first saves, on both savers (see the module docstring)."""
    sizes = [200] if quick else [1000, 3000]
    with databases(f"lgpg{uuid.uuid4().hex[:6]}") as new_database:
        rows = run(new_database, sizes, ["sync", "async"])
        return rows + first_save_rows(new_database, 50 if quick else 500)


def _main() -> None:  # pragma: no cover - a manual run
    import sys

    for row in collect("--quick" in sys.argv):
        print(f"{row.name}: median {row.median:.3f} {row.unit}, p99 {row.p99:.3f} {row.extra}")


if __name__ == "__main__":
    _main()
