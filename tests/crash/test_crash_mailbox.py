"""SIGKILL the process that holds a run while another process sends to it
(issue 24, item 1: the run's mailbox).

The receiver (tests/crash/mailbox_receiver.py) holds its run through a slow
task in every superstep, so most sends find the run held by another
process's writer and are stored in the run's mailbox (the send returns at
once); the receiver moves them into the history before it parks. The test
process sends ``COUNT`` messages on each of two topics, interleaved, each
with an idempotency key (sent again after an error), plus an earlier key
again now and then, while the receiver is killed at seeded random moments
and started again. Whatever the kills hit (a step, a move between its
append and its mark, a close, a park, a claim), every message is in the
history exactly once, in order per topic, and received once, in order; a
key sent again after its send returned True returns False.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from agentlog.errors import BackendUnavailableError, LeaseHeldError
from agentlog.eventlog.events import MessageReceived, MessageSent, RunStatus, WriterClaimed
from agentlog.runtime import Runtime, RuntimeConfig
from tests.crash.mailbox_receiver import busy_receiver
from tests.crash.worker import kill, spawn_ready
from tests.support.fleet import until

pytestmark = pytest.mark.crash

COUNT = 14
KILLS = 6
LEASE_S = 1.0


def spawn(url: str, logs: Path, n: int) -> subprocess.Popen[str]:
    args = ["-m", "tests.crash.mailbox_receiver", url, str(COUNT), str(LEASE_S)]
    return spawn_ready(args, logs / f"receiver-{n}.log")


async def send(client: Runtime, topic: str, n: int) -> bool:
    """Send message ``n`` of ``topic`` until it is stored; whether this call stored it."""
    while True:
        try:
            return await client.send("busy", topic, n, idempotency_key=f"{topic}-{n}")
        except (LeaseHeldError, BackendUnavailableError):  # a claim raced ours: again
            await asyncio.sleep(0.05)


async def send_all(client: Runtime, numbers: range, rng: random.Random) -> None:
    for n in numbers:
        for topic in ("a", "b"):
            first = await send(client, topic, n)
            if first and rng.random() < 0.3:  # the same key again: stored once
                assert await send(client, topic, n) is False


async def received(client: Runtime) -> int:
    return sum([isinstance(e.data, MessageReceived) async for e in client.log.read("busy")])


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", [1, 2])
async def test_messages_stored_while_the_holder_is_killed_are_delivered_once_in_order(
    seed: int, tmp_path: Path
) -> None:
    rng = random.Random(f"mailbox-{seed}")
    url = f"sqlite:///{tmp_path / 'agentlog.db'}"
    config = RuntimeConfig(owner="sender", execute=False, worker=False, lease_seconds=LEASE_S)
    async with await Runtime.open(url, workflows=[busy_receiver(COUNT)], config=config) as client:
        await client.submit("busy", run_id="busy", durability=rng.choice(["sync", "async"]))
        size = COUNT // (KILLS + 1)
        for n, first in enumerate(range(0, COUNT, size)):
            proc = await asyncio.to_thread(spawn, url, tmp_path, n)
            try:
                sending = asyncio.create_task(send_all(client, range(first, first + size), rng))
                if first + size < COUNT:

                    async def working(first: int = first) -> bool:
                        return await received(client) > 2 * first

                    await until(working, f"receiver {n} takes message {first}", 120, every=0.01)
                    await asyncio.sleep(rng.uniform(0.0, 0.15))
                    await asyncio.to_thread(kill, proc)
                async with asyncio.timeout(120):
                    await sending

                async def completed() -> bool:
                    return (await client.log.get_run("busy")).status == RunStatus.COMPLETED

                if first + size >= COUNT:
                    await until(completed, "the run received every message", 120)
            finally:
                await asyncio.to_thread(kill, proc)
        state = await client.get_state("busy")
        events = [e async for e in client.log.read("busy")]
    sent = [(e.seq, e.data) for e in events if isinstance(e.data, MessageSent)]
    for topic in ("a", "b"):
        values = [data.value for _, data in sent if data.topic == topic]
        assert values == list(range(COUNT)), topic  # each once, in order per topic
    assert max(Counter(data.key for _, data in sent).values()) == 1
    deliveries = sorted(e.data.seq for e in events if isinstance(e.data, MessageReceived))
    assert deliveries == [seq for seq, _ in sent]  # each received once
    assert state.values["a"] == list(range(COUNT)) and state.values["b"] == list(range(COUNT))
    assert state.inbox == {}
    drivers = {e.data.owner for e in events if isinstance(e.data, WriterClaimed)}
    assert len({o for o in drivers if o.startswith("receiver-")}) >= 2  # the run changed hands
    owners = {e.writer_epoch: e.data.owner for e in events if isinstance(e.data, WriterClaimed)}
    moved = [e for e in events if isinstance(e.data, MessageSent) and e.writer_epoch in owners]
    # Sends found the run held: the holders moved them from the mailbox.
    assert any(owners[e.writer_epoch].startswith("receiver-") for e in moved)
