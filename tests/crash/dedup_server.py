"""A tiny external service that records every call per idempotency key.

Run as ``python -m tests.crash.dedup_server DB_PATH``; it listens on
127.0.0.1 (a free port, printed as the first stdout line) and keeps its
records in its own SQLite file, so what it saw survives any worker crash.

Endpoints (JSON bodies):

* ``POST /effect {run, gen, key, kind, arg[, began]}``: one delivery of a side
  effect, stored with the time it arrived (``ts``, seconds since the epoch)
  and, if the caller sent it, the time its effect function began
  (``began``). The first delivery of a key is applied; later ones are
  duplicates that get the same result back (what a real idempotent API does).
* ``POST /step {run, gen, step, superstep, branch, attempt}``: a step began.
* ``GET /dump?run=ID``: every recorded delivery and step execution of a run.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

REPO = Path(__file__).resolve().parents[2]

SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    n INTEGER PRIMARY KEY AUTOINCREMENT, run TEXT, gen INTEGER, key TEXT, kind TEXT,
    arg TEXT, duplicate INTEGER, result TEXT, ts REAL, began REAL);
CREATE TABLE IF NOT EXISTS steps (
    n INTEGER PRIMARY KEY AUTOINCREMENT, run TEXT, gen INTEGER, step TEXT,
    superstep INTEGER, branch INTEGER, attempt INTEGER);
"""


def effect_result(kind: str, arg: str) -> str:
    """What the service answers: a pure function of the request, never of timing."""
    return f"{kind}({arg})"


class Handler(BaseHTTPRequestHandler):
    db: sqlite3.Connection
    #: A client stopped (SIGSTOP) mid-request must not hold this one-thread
    #: server, and every other client, until it is continued.
    timeout = 10

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _reply(self, body: Any) -> None:
        raw = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        db = self.db
        with db:  # one transaction per call, committed before the answer
            if self.path == "/effect":
                seen = db.execute(
                    "SELECT result FROM deliveries WHERE key = ? AND duplicate = 0",
                    (body["key"],),
                ).fetchone()
                result = seen[0] if seen else effect_result(body["kind"], body["arg"])
                db.execute(
                    "INSERT INTO deliveries "
                    "(run, gen, key, kind, arg, duplicate, result, ts, began) "
                    "VALUES (?,?,?,?,?,?,?,?,?)",
                    (
                        body["run"],
                        body["gen"],
                        body["key"],
                        body["kind"],
                        body["arg"],
                        int(seen is not None),
                        result,
                        time.time(),  # when it arrived, by this machine's clock
                        body.get("began"),
                    ),
                )
                self._reply({"result": result, "duplicate": seen is not None})
            elif self.path == "/step":
                db.execute(
                    "INSERT INTO steps (run, gen, step, superstep, branch, attempt) "
                    "VALUES (?,?,?,?,?,?)",
                    (
                        body["run"],
                        body["gen"],
                        body["step"],
                        body["superstep"],
                        body["branch"],
                        body["attempt"],
                    ),
                )
                self._reply({"ok": True})
            else:
                self.send_error(404)

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        run = parse_qs(parts.query).get("run", [""])[0]
        deliveries = self.db.execute(
            "SELECT gen, key, kind, arg, duplicate, result FROM deliveries WHERE run = ? "
            "ORDER BY n",
            (run,),
        ).fetchall()
        steps = self.db.execute(
            "SELECT gen, step, superstep, branch, attempt FROM steps WHERE run = ? ORDER BY n",
            (run,),
        ).fetchall()
        self._reply({"deliveries": deliveries, "steps": steps})


class Server(HTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A worker SIGKILLed mid-request is expected here: stay quiet."""


@contextlib.contextmanager
def running(db: Path) -> Iterator[str]:
    """Run the service in its own process while the block runs; yield its URL."""
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.crash.dedup_server", str(db)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = server.stdout.readline().strip()
        assert port.isdigit(), f"dedup server did not start (exit code {server.poll()})"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.communicate(timeout=10)


def main() -> None:
    db = sqlite3.connect(sys.argv[1], isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.executescript(SCHEMA)
    Handler.db = db
    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
