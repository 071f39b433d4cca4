"""SQLite durability settings, pinned and read back, so that both sides of a comparison
run with the same ones and the table says which.

SQLite's ``synchronous`` default is a compile-time choice of the build
(FULL in Debian's), and ``journal_mode`` is whatever the file was left in:
a peer that "gets FULL by default" gets it from the machine, not from the
benchmark. Every SQLite connection a comparison times (LangGraph's
SqliteSaver, DBOS's system database, the raw floor) goes through
:func:`pin_sqlite`, which sets both explicitly and checks that they took.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["AGENTLOG_SQLITE", "file_journal_mode", "pin_sqlite", "sqlite_settings"]

#: What agentlog's SQLite log runs a durable commit with (its connection sets
#: both; the journal mode is read back from the file after each run).
AGENTLOG_SQLITE = "journal_mode=wal, synchronous=FULL"

_SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def sqlite_settings(conn: sqlite3.Connection) -> str:
    """``journal_mode=..., synchronous=...`` as the connection reports them."""
    journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    synchronous = _SYNCHRONOUS[conn.execute("PRAGMA synchronous").fetchone()[0]]
    return f"journal_mode={journal}, synchronous={synchronous}"


def pin_sqlite(conn: sqlite3.Connection, journal_mode: str = "wal") -> str:
    """Set ``journal_mode`` and ``synchronous=FULL`` on ``conn``; return the settings read back.

    Raises:
        RuntimeError: SQLite kept another setting (a journal mode cannot change
            inside a transaction, or on a file another connection holds in WAL).
    """
    conn.execute(f"PRAGMA journal_mode={journal_mode}")
    conn.execute("PRAGMA synchronous=FULL")
    got = sqlite_settings(conn)
    wanted = f"journal_mode={journal_mode.lower()}, synchronous=FULL"
    if got != wanted:
        raise RuntimeError(f"SQLite kept {got!r} where the benchmark pinned {wanted!r}")
    return got


def file_journal_mode(path: Path) -> str:
    """The journal mode a database file was left in (WAL persists in the file)."""
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        conn.close()
