"""Pytest plugin: a real PostgreSQL server for the session, on 127.0.0.1.

``postgres_server`` runs Debian's PostgreSQL (``/usr/lib/postgresql/*/bin``):
``initdb`` in a temporary folder, then ``pg_ctl start`` on a free loopback
port, with password authentication (scram-sha-256) over TCP. PostgreSQL
refuses to run as root, so under root the binaries run as the ``postgres``
user (``runuser``) in a folder it owns. It is stopped at the end of the
session. A server that cannot start fails the tests that need it, with the
reason; nothing is skipped.

``postgres_url`` is a fresh database (``CREATE DATABASE``) per test.
:class:`PostgresServer` can also stop and start the server, for the tests of
a restart in the middle of a run.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

USER = "postgres"
PASSWORD = "agentlog-test-secret"


def pg_bin() -> Path:
    """The folder of Debian's PostgreSQL binaries (the newest major installed)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=_major)
    if not found:
        raise RuntimeError(
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/pg_ctl): "
            "apt-get install -y postgresql"
        )
    return Path(found[-1]).parent


def _major(path: str) -> int:
    try:
        return int(Path(path).parts[-3])
    except ValueError:
        return 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PostgresServer:
    """One PostgreSQL cluster in a temporary folder, run as ``postgres`` under root."""

    root: Path
    port: int = field(default_factory=_free_port)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def host_port(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, database: str = "postgres", password: str = PASSWORD) -> str:
        """``postgresql://postgres:PASSWORD@127.0.0.1:PORT/DATABASE``."""
        return f"postgresql://{USER}:{password}@{self.host_port}/{database}"

    def _run(self, *args: str, timeout: float = 120.0) -> str:
        command = [str(pg_bin() / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", USER, "--", *command]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, check=False, cwd=self.root
        )
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"{' '.join(args[:2])} failed (exit {done.returncode}): "
                f"{done.stderr.strip() or done.stdout.strip()}\n{tail}"
            )
        return done.stdout

    def init(self) -> None:
        """``initdb``: the superuser ``postgres`` with :data:`PASSWORD`, scram over TCP."""
        pwfile = self.root / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        self._chown(pwfile)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            USER,
            "--pwfile",
            str(pwfile),
            "--auth-host=scram-sha-256",
            "--auth-local=trust",
            "-E",
            "UTF8",
            "--no-instructions",
        )

    def start(self) -> None:
        """``pg_ctl start`` on 127.0.0.1:``port``; returns once it accepts connections."""
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} "
            "-c max_connections=200 -c fsync=on -c synchronous_commit=on"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "120",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m MODE`` (smart, fast or immediate)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "120", "stop")

    def running(self) -> bool:
        done = subprocess.run(
            [str(pg_bin() / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
            capture_output=True,
            check=False,
        )
        return done.returncode == 0

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run ``sql`` as the superuser over the Unix socket; return its output."""
        return self._run(
            "psql", "-h", str(self.root), "-p", str(self.port), "-d", database,
            "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql,
        )  # fmt: skip

    def create_database(self) -> str:
        """A new empty database; returns its name."""
        name = f"t{uuid.uuid4().hex[:12]}"
        self.psql(f"CREATE DATABASE {name}")
        return name

    def _chown(self, path: Path) -> None:
        if os.geteuid() == 0:
            shutil.chown(path, USER, USER)

    @classmethod
    def started(cls) -> PostgresServer:
        """A new cluster in a fresh temporary folder, initialised and started."""
        root = Path(tempfile.mkdtemp(prefix="agentlog-pg-"))
        server = cls(root)
        server._chown(root)
        try:
            server.init()
            server.start()
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return server

    def destroy(self) -> None:
        """Stop the server (immediately) if it runs, and delete its folder."""
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(RuntimeError):
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def serving() -> Iterator[PostgresServer]:
    """A started cluster, destroyed afterwards; a failed start fails the test."""
    try:
        server = PostgresServer.started()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"cannot start PostgreSQL for the tests: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.destroy()


def fresh_database_url(server: PostgresServer) -> str:
    """A URL of a fresh empty database on ``server`` (started again if a test
    left it stopped, say a restart test that failed midway)."""
    if not server.running():
        server.start()
    return server.url(server.create_database())


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A running PostgreSQL cluster on 127.0.0.1 for the whole session."""
    with serving() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A ``postgresql://`` URL of a fresh empty database on the session's server."""
    return fresh_database_url(postgres_server)
