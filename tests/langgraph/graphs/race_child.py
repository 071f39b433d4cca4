"""One of the two racing processes of the race test.

Usage::

    python -m tests.langgraph.graphs.race_child LOG_URL BARRIER_DIR NAME PEER THREADS [SAVER]

For each thread ``race-0`` .. ``race-{THREADS-1}`` (each parked by the test on
its first interrupt), both processes answer the interrupt at once with
``Command(resume=...)`` on their own saver object. Two barriers, through
files in BARRIER_DIR, make the race real: both start the call together, and
inside the resumed node each waits for the other to have read the same
checkpoint (or to have ended its call), so both then write a successor of
the same checkpoint. Prints one JSON line: per thread, ``"won"`` or the
qualified name of the exception the call raised, and its message.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from langgraph.types import Command

from tests.langgraph.graphs.graphs import SaverKind, answer_for, build_graph, config_for, open_saver

#: A hang guard: how long one process waits for the other at a barrier.
BARRIER_TIMEOUT = 120.0


class Barrier:
    """Files ``{trial}.{name}.{mark}`` in a folder shared by the two processes."""

    def __init__(self, folder: Path, name: str, peer: str) -> None:
        self.folder, self.name, self.peer = folder, name, peer

    def mark(self, trial: int, mark: str) -> None:
        (self.folder / f"{trial}.{self.name}.{mark}").touch()

    def wait(self, trial: int, *marks: str) -> None:
        """Wait until the peer has set any of ``marks`` for ``trial``."""
        deadline = time.monotonic() + BARRIER_TIMEOUT
        while not any((self.folder / f"{trial}.{self.peer}.{m}").exists() for m in marks):
            if time.monotonic() > deadline:
                raise SystemExit(f"{self.name}: {self.peer} never reached {marks} in {trial}")
            time.sleep(0.001)


def main() -> None:
    url, folder, name, peer, threads = sys.argv[1:6]
    kind: SaverKind = sys.argv[6] if len(sys.argv) > 6 else "agentlog"  # type: ignore[assignment]
    barrier = Barrier(Path(folder), name, peer)
    trial = 0

    def in_review(answer: Any) -> None:
        # Both processes have now loaded the parked checkpoint and run the node:
        # neither may write its successor before the other got this far.
        barrier.mark(trial, "ready")
        barrier.wait(trial, "ready", "done")

    outcomes: list[list[str]] = []
    with open_saver(kind, url) as saver:
        graph = build_graph(saver, on_review=in_review)
        for trial in range(int(threads)):
            barrier.mark(trial, "start")
            barrier.wait(trial, "start")
            answer = answer_for({"round": 0}, by=name)
            try:
                graph.invoke(Command(resume=answer), config_for(f"race-{trial}"), durability="sync")
                outcomes.append(["won", ""])
            except Exception as exc:  # the test judges every kind of failure
                outcomes.append([f"{type(exc).__module__}.{type(exc).__qualname__}", str(exc)])
            barrier.mark(trial, "done")
    print(json.dumps(outcomes), flush=True)


if __name__ == "__main__":
    main()
