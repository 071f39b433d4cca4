"""Pytest plugin: real ``redis-server`` processes on 127.0.0.1 for the session.

``redis_server`` is the durable one every Redis test writes to: AOF on with
``appendfsync always`` (so a ``durable=True`` append is fsynced before its
reply), no RDB snapshots, ``maxmemory-policy noeviction``. ``REDIS_URL``
names a server run elsewhere instead (it must be configured the same way).

``redis_volatile`` is a second server, started only for the tests that ask
for it: no persistence at all (no AOF, ``save ""``) and a password, so that
the refusals (no persistence, eviction, no per-write fsync, wrong password)
are tested against a real server. Tests may ``CONFIG SET`` it; each sets what
it needs first.

Each server runs in its own temporary folder on a free port and is stopped at
the end of the session. A server that cannot be started fails the tests that
need it, with the reason; nothing is skipped (under CI=true or not).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

#: The durable configuration: every write fsynced to the AOF before its reply.
DURABLE_CONFIG = {
    "appendonly": "yes",
    "appendfsync": "always",
    "save": '""',
    "maxmemory-policy": "noeviction",
}
#: A server that keeps nothing on disk: what the backend must refuse.
VOLATILE_CONFIG = {"appendonly": "no", "save": '""', "maxmemory-policy": "noeviction"}
VOLATILE_PASSWORD = "s3cret-volatile"


@dataclass(frozen=True)
class RedisServer:
    """A running ``redis-server``: where it listens and where it keeps its files."""

    host: str
    port: int
    folder: Path
    password: str = ""
    process: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0, **query: str) -> str:
        auth = f":{self.password}@" if self.password else ""
        params = "&".join(f"{k}={v}" for k, v in query.items())
        return f"redis://{auth}{self.host}:{self.port}/{db}" + (f"?{params}" if params else "")


def _fail(why: str) -> None:
    where = " (CI=true: a missing server fails the run)" if IN_CI else ""
    pytest.fail(
        f"redis-server could not be started{where}: {why}\n"
        "Install it (apt-get install -y redis-server; .ci/run does) or set REDIS_URL to a "
        "server with appendonly yes and appendfsync always.",
        pytrace=False,
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ping(port: int, password: str) -> bool:
    """True once the server answers PING (after AUTH, if it has a password)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            if password:
                sock.sendall(f"AUTH {password}\r\n".encode())
                sock.recv(64)
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def start_server(
    folder: Path, config: dict[str, str], password: str = "", port: int | None = None
) -> RedisServer:
    """Start ``redis-server`` with ``config`` in ``folder`` on ``port`` (a free one by
    default); wait until it answers."""
    binary = shutil.which("redis-server")
    if binary is None:
        _fail("no redis-server on PATH")
        raise AssertionError  # unreachable: pytest.fail raises
    port = port or _free_port()
    lines = {
        "bind": "127.0.0.1",
        "port": str(port),
        "dir": str(folder),
        "daemonize": "no",
        "logfile": '""',
        "appendfilename": '"appendonly.aof"',
        **config,
    }
    if password:
        lines["requirepass"] = password
    conf = folder / "redis.conf"
    conf.write_text("".join(f"{k} {v}\n" for k, v in lines.items()))
    with (folder / "server.log").open("wb") as log:  # the child keeps its own handle
        process = subprocess.Popen([binary, str(conf)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60.0
    while not _ping(port, password):
        if process.poll() is not None:
            _fail(f"it exited with {process.returncode}: {(folder / 'server.log').read_text()}")
        if time.monotonic() > deadline:
            process.kill()
            _fail(f"no answer on 127.0.0.1:{port} within 60 s")
        time.sleep(0.05)
    return RedisServer("127.0.0.1", port, folder, password, process)


def stop_server(server: RedisServer) -> None:
    """Stop the server (SIGTERM: it flushes its AOF and exits) and wait for it."""
    if server.process is None or server.process.poll() is not None:
        return
    server.process.terminate()
    try:
        server.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(timeout=30)


def _from_env(url: str) -> RedisServer:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return RedisServer(
        parts.hostname or "127.0.0.1", parts.port or 6379, Path("."), parts.password or ""
    )


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """The durable Redis server (AOF, ``appendfsync always``, ``noeviction``)."""
    given = os.environ.get("REDIS_URL", "").strip()
    if given:
        yield _from_env(given)
        return
    server = start_server(tmp_path_factory.mktemp("redis-durable"), DURABLE_CONFIG)
    try:
        yield server
    finally:
        stop_server(server)


@pytest.fixture(scope="session")
def redis_volatile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A Redis server with no persistence and a password (for the refusal tests)."""
    server = start_server(
        tmp_path_factory.mktemp("redis-volatile"), VOLATILE_CONFIG, VOLATILE_PASSWORD
    )
    try:
        yield server
    finally:
        stop_server(server)


@pytest.fixture
def redis_prefix() -> str:
    """A key prefix no other test uses, so each test starts from an empty log."""
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def redis_url(redis_server: RedisServer, redis_prefix: str) -> str:
    """A ``redis://`` log URL of its own on the durable server."""
    return redis_server.url(prefix=redis_prefix)
