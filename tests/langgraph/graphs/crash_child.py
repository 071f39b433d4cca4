"""One process of the crash test: runs (or resumes) a thread of the test graph.

Usage::

    python -m tests.langgraph.graphs.crash_child \
        LOG_URL THREAD_ID DURABILITY EXECUTIONS_DB GEN [SAVER]

It opens agentlog's saver (or SAVER, a kind of :func:`open_saver`) on
LOG_URL and moves the thread on from whatever the log holds (the input,
``Command(resume=...)`` for an interrupt, or ``invoke(None)``) until it
ends, then prints the final state as JSON. Every node records its execution
in EXECUTIONS_DB before it returns, so the parent can SIGKILL this process
after a chosen number of node executions.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.langgraph.graphs.graphs import (
    Executions,
    SaverKind,
    build_graph,
    config_for,
    drive_once,
    open_saver,
    plain,
)

#: Seconds each node takes: long enough that a kill often lands inside a node.
NODE_PAUSE = 0.01
MAX_CALLS = 10


def main() -> None:
    url, thread_id, durability, executions_db, gen = sys.argv[1:6]
    kind: SaverKind = sys.argv[6] if len(sys.argv) > 6 else "agentlog"  # type: ignore[assignment]
    executions = Executions(Path(executions_db))
    with open_saver(kind, url) as saver:
        graph = build_graph(saver, executions, int(gen), pause=NODE_PAUSE)
        for _ in range(MAX_CALLS):
            if drive_once(graph, thread_id, durability):
                break
        else:
            raise SystemExit(f"thread {thread_id} did not end in {MAX_CALLS} calls")
        print(json.dumps(plain(graph.get_state(config_for(thread_id)).values)), flush=True)


if __name__ == "__main__":
    main()
