"""The checkpointers ``bench_langgraph`` swaps under one LangGraph graph: how each opens, and
how its bytes are counted.

Each maker returns a :class:`Backend` on a new store: LangGraph's SqliteSaver
(its connection pinned to WAL and ``synchronous=FULL``), AgentlogSaver on
SQLite, and AgentlogSaver on Kafka (bytes from the broker's segment files, or
the records read back). The PostgreSQL pair lives in
``bench_langgraph_postgres``.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from agentlog.langgraph import AgentlogSaver
from benchmarks.durability import AGENTLOG_SQLITE, pin_sqlite
from benchmarks.harness import kafka_broker

__all__ = [
    "PEER",
    "Backend",
    "Kafka",
    "Opener",
    "agentlog_kafka",
    "agentlog_sqlite",
    "broker",
    "kafka_bytes",
    "sqlite_saver",
]

ROOT = Path(__file__).resolve().parent.parent / ".cache" / "bench"
#: LangGraph's SQLite saver: the peer every loop row is set against.
PEER = "SqliteSaver"

#: Opens a saver, yields it and closes it: a fresh object on every call.
Opener = Callable[[], contextlib.AbstractContextManager[BaseCheckpointSaver[Any]]]


@dataclass(frozen=True)
class Kafka:
    """A broker to run the Kafka side on."""

    bootstrap: str
    """``host:port`` for clients."""
    data_dir: Path | None
    """The broker's log dir when this module started it (bytes are then read
    from its segment files), None for a broker given by the environment."""


@dataclass(frozen=True)
class Backend:
    """One checkpointer under test: how to open it and how to count its bytes."""

    name: str
    opener: Opener
    measure: Callable[[], tuple[int, str]]
    """Bytes stored so far, and what was counted."""
    cleanup: Callable[[], None]
    durability: str = ""
    """The durability settings the saver runs with, for the table."""
    file: Path | None = None
    """The SQLite file the saver stores in (None: not SQLite), for floors
    measured on the same file."""


def _workdir() -> Path:
    ROOT.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=ROOT))


def _folder_bytes(folder: Path) -> tuple[int, str]:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()), "files after close"


def sqlite_saver() -> Backend:
    """LangGraph's SqliteSaver on a new file, its connection pinned to WAL and FULL."""
    folder = _workdir()
    pinned: list[str] = []

    @contextlib.contextmanager
    def opener() -> Iterator[BaseCheckpointSaver[Any]]:
        conn = sqlite3.connect(folder / "langgraph.db", check_same_thread=False)
        try:
            pinned[:] = [pin_sqlite(conn, "wal")]
            yield SqliteSaver(conn)
        finally:
            conn.close()

    with opener():  # pins once, so the settings are known before the first row
        pass
    return Backend(
        PEER,
        opener,
        lambda: _folder_bytes(folder),
        lambda: shutil.rmtree(folder, True),
        pinned[0],
        folder / "langgraph.db",
    )


def agentlog_sqlite() -> Backend:
    """AgentlogSaver on a new SQLite event log."""
    folder = _workdir()
    url = f"sqlite:///{folder / 'agentlog.db'}"
    return Backend(
        "agentlog sqlite",
        lambda: AgentlogSaver.from_url(url),
        lambda: _folder_bytes(folder),
        lambda: shutil.rmtree(folder, True),
        AGENTLOG_SQLITE,
        folder / "agentlog.db",
    )


def agentlog_kafka(kafka: Kafka) -> Backend:
    """AgentlogSaver on new topics of the broker."""
    name = f"lgbench{uuid.uuid4().hex[:8]}"
    url = f"kafka://{kafka.bootstrap}/{name}"
    return Backend(
        "agentlog kafka",
        lambda: AgentlogSaver.from_url(url),
        lambda: kafka_bytes(kafka, name),
        lambda: None,
        "acks=all, transactional",
    )


def kafka_bytes(kafka: Kafka, name: str) -> tuple[int, str]:
    """Bytes the log ``name`` holds on the broker, and what was counted."""
    if kafka.data_dir is not None:
        segments = [
            p for folder in kafka.data_dir.glob(f"{name}.*-*") for p in folder.glob("*.log")
        ]
        return sum(p.stat().st_size for p in segments), "log segments on broker disk"
    return asyncio.run(_record_bytes(kafka.bootstrap, name)), "sum of record key+value"


async def _record_bytes(bootstrap: str, name: str) -> int:
    """The key and value bytes of every record in the topics ``name.*``, read back."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        topics = [t for t in await admin.list_topics() if t.startswith(f"{name}.")]
        parts = [
            TopicPartition(t["topic"], p["partition"])
            for t in await admin.describe_topics(topics)
            for p in t["partitions"]
        ]
    finally:
        await admin.close()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        ends = await consumer.end_offsets(parts)
        total = 0
        while [tp for tp in parts if await consumer.position(tp) < ends[tp]]:
            batches = await consumer.getmany(timeout_ms=1000)
            for records in batches.values():
                total += sum(len(r.key or b"") + len(r.value or b"") for r in records)
        return total
    finally:
        await consumer.stop()


@contextlib.contextmanager
def broker() -> Iterator[Kafka]:
    """The broker named by KAFKA_BOOTSTRAP_SERVERS, or one started here and stopped after."""
    with kafka_broker("agentlog-lg-bench-") as (bootstrap, data):
        yield Kafka(bootstrap, data)
