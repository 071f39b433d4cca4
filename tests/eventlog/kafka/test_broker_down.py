"""Kafka errors while the broker is down are typed, bounded and lose nothing.

These tests run their own broker (killed and restarted by each test), so
the outage disturbs no other test. Every wait has a hang guard far above
``request_timeout_s``; the assertions are on what is raised and recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agentlog.errors import BackendUnavailableError
from agentlog.eventlog.events import Event, TaskCompleted
from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog
from tests.services.kafka_broker import broker

pytestmark = [pytest.mark.kafka, pytest.mark.crash]

#: Hang guard for one call during the outage (request_timeout_s is 3 s).
GUARD_S = 60


def _events(run_id: str, first: int, count: int, epoch: int) -> list[Event]:
    return [
        Event(run_id, seq, TaskCompleted(f"k{seq}", seq), writer_epoch=epoch)
        for seq in range(first, first + count)
    ]


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A broker of this module only: its state folder (restartable on the same port)."""
    state = tmp_path_factory.mktemp("own-broker")
    broker("start", state)
    try:
        yield state
    finally:
        broker("stop", state)


@pytest.fixture
async def config(own_broker: Path) -> AsyncIterator[KafkaConfig]:
    """A fresh log on the module's broker; the broker is up again after the test."""
    bootstrap = await asyncio.to_thread(broker, "start", own_broker)
    yield KafkaConfig(
        bootstrap_servers=bootstrap,
        name=f"down{uuid.uuid4().hex[:8]}",
        partitions=1,
        request_timeout_s=3,
        connect_timeout_s=60,
    )
    await asyncio.to_thread(broker, "start", own_broker)


def _port(config: KafkaConfig) -> int:
    return int(config.bootstrap_servers.rsplit(":", 1)[1])


def _sockets_to(port: int) -> set[str]:
    """This process's open TCP sockets to ``port`` (their inodes, from /proc)."""
    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                mine.add(target[len("socket:[") : -1])
    held = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote, inode = fields[2], fields[9]
        if int(remote.rsplit(":", 1)[1], 16) == port and inode in mine:
            held.add(inode)
    return held


async def _until_closed(port: int, before: set[str]) -> set[str]:
    """Wait (bounded) until every socket opened since ``before`` is closed; the rest."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GUARD_S
    while True:
        left = _sockets_to(port) - before
        if not left or loop.time() > deadline:
            return left
        await asyncio.sleep(0.05)  # a socket's close completes in a later loop turn


async def test_durable_append_while_the_broker_is_down_honours_its_timeout(
    own_broker: Path, config: KafkaConfig
) -> None:
    """The append raises in time; nothing is lost; and the closed log leaves no
    socket open (the producer whose stop() timed out during the outage used to
    reconnect once the broker was back, until the garbage collector found it)."""
    port = _port(config)
    before = _sockets_to(port)
    log = await KafkaEventLog.connect(config)
    try:
        epoch = await log.claim_writer("r", owner="test")
        await log.append(_events("r", 1, 3, epoch))
        await asyncio.to_thread(broker, "kill", own_broker)
        with pytest.raises(BackendUnavailableError) as caught:
            await asyncio.wait_for(log.append(_events("r", 4, 1, epoch)), GUARD_S)
        assert caught.value.retryable
        assert "'r'" in str(caught.value) and "seq 4" in str(caught.value)
    finally:
        await asyncio.to_thread(broker, "start", own_broker)
        await asyncio.wait_for(log.close(), GUARD_S)
    assert await _until_closed(port, before) == set()
    async with await KafkaEventLog.connect(config) as fresh:
        seqs = [e.seq async for e in fresh.read("r")]
        assert seqs[:3] == [1, 2, 3] and seqs in ([1, 2, 3], [1, 2, 3, 4])  # nothing lost
        epoch = await fresh.claim_writer("r", owner="after")
        await fresh.append(_events("r", len(seqs) + 1, 1, epoch))
        assert [e.seq async for e in fresh.read("r")] == list(range(1, len(seqs) + 2))


#: Logs closed during one outage: aiokafka's stray CancelledError came from a
#: fetch in flight at close, about one close in two.
LOGS = 6


async def _use_through_outage(log: KafkaEventLog) -> str:
    """``async with`` the log while the broker is down; the name of what escaped."""
    try:
        async with log:
            await asyncio.wait_for(log.find_run("elsewhere"), GUARD_S)
    except BaseException as exc:  # CancelledError included: that is the defect
        return type(exc).__name__
    return "nothing"


async def test_open_log_surfaces_the_outage_not_a_cancelled_close(
    own_broker: Path, config: KafkaConfig
) -> None:
    """Closed during the outage, every log raises the outage and leaves no socket
    open (a client whose stop() was cut short used to keep its connections until
    the garbage collector found them: a ResourceWarning in some later test)."""
    port = _port(config)
    before = _sockets_to(port)
    logs = [await KafkaEventLog.connect(config) for _ in range(LOGS)]
    for n, log in enumerate(logs):
        epoch = await log.claim_writer(f"r{n}", owner="test")
        await log.append(_events(f"r{n}", 1, 2, epoch))
    # A hung broker (SIGSTOP): connections open, requests get no answer, so
    # fetches are in flight when the logs close.
    pid = int((own_broker / "broker.pid").read_text())
    os.kill(pid, signal.SIGSTOP)
    try:
        escaped = await asyncio.gather(*(_use_through_outage(log) for log in logs))
    finally:
        os.kill(pid, signal.SIGCONT)
    assert escaped == ["BackendUnavailableError"] * LOGS
    assert await _until_closed(port, before) == set()  # the logs are still referenced here
