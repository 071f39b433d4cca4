"""A crafted snapshot part that inflates without bound (a "zip bomb") is a
CorruptEventError, never a process that runs out of memory; a LangGraph
thread or a run whose snapshot holds one is read from its events instead."""

from __future__ import annotations

import sqlite3
import zlib
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from agentlog.errors import CorruptEventError
from agentlog.eventlog._packing import MAX_INFLATED, inflate
from agentlog.eventlog.codec import checksum, pack, unpack
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.langgraph import AgentlogSaver
from tests.langgraph.test_snapshots import INTERVAL, cfg, grow


def _bomb(inflated: int) -> bytes:
    """zlib bytes that inflate to ``inflated`` zero bytes, built a MiB at a time."""
    deflater, chunk, parts = zlib.compressobj(9), bytes(1 << 20), []
    for _ in range(inflated // len(chunk)):
        parts.append(deflater.compress(chunk))
    parts.append(deflater.compress(bytes(inflated % len(chunk))))
    parts.append(deflater.flush())
    return b"".join(parts)


def test_inflate_stops_at_its_bound_and_names_the_run_and_seq() -> None:
    small = zlib.compress(b"x" * 1000)
    assert inflate(small, "r", 3) == b"x" * 1000
    with pytest.raises(CorruptEventError) as past:
        inflate(_bomb(2_000_000), "r", 3, limit=1_000_000)
    assert past.value.run_id == "r" and past.value.seq == 3
    assert "past the limit of 1,000,000 bytes" in str(past.value)
    with pytest.raises(CorruptEventError, match="does not inflate"):
        inflate(b"not zlib at all", "r", 4)
    with pytest.raises(CorruptEventError, match="cut short"):
        inflate(small[: len(small) // 2], "r", 5)


def test_a_thread_snapshot_holding_a_bomb_is_ignored_and_the_thread_reads_its_events(
    tmp_path: Path,
) -> None:
    db = tmp_path / "agentlog.db"
    with AgentlogSaver(SqliteEventLog(db), snapshot_every=INTERVAL) as saver:
        grow(saver, "t", 2 * INTERVAL + 3, messages=False)
    conn = sqlite3.connect(db)
    seq, state = conn.execute(
        "SELECT seq, state FROM snapshots WHERE run_id = 't' ORDER BY seq DESC LIMIT 1"
    ).fetchone()
    frame = unpack(state)
    content = unpack(frame["body"])
    content["blobs"] = _bomb(MAX_INFLATED + (1 << 20))
    frame["body"] = pack(content)
    frame["checksum"] = checksum(frame["body"])  # the checksum is no defence: it is unkeyed
    conn.execute(
        "UPDATE snapshots SET state = ? WHERE run_id = 't' AND seq = ?", (pack(frame), seq)
    )
    conn.commit()
    conn.close()
    with capture_logs() as logs, AgentlogSaver(SqliteEventLog(db)) as saver:
        latest = saver.get_tuple(cfg("t"))
    assert latest is not None
    last = 2 * INTERVAL + 2
    assert latest.checkpoint["channel_values"] == {"count": last, "note": f"step {last}"}
    ignored = [e for e in logs if e["event"] == "thread snapshot ignored"]
    assert ignored and "CorruptEventError" in ignored[0]["reason"], logs
    assert "past the limit" in ignored[0]["reason"]
