"""SIGKILL a process that receives messages while another process sends them.

The receiver (tests/crash/message_receiver.py) drives one run that takes a
message per superstep (``ctx.recv``); the test process sends ``COUNT``
messages one after another (``Runtime.send``, each with an idempotency key,
sent again after an error) while the receiver is killed at seeded random
moments and started again. Whatever the kills hit (a step with a delivery
not yet written, a park, a claim), every message is in the run's history
exactly once and in order, each is received exactly once, in order, and the
run's result is every message in order.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
from pathlib import Path

import pytest

from agentlog.errors import BackendUnavailableError, LeaseHeldError
from agentlog.eventlog.events import MessageReceived, MessageSent, RunStatus, WriterClaimed
from agentlog.runtime import Runtime, RuntimeConfig
from tests.crash.message_receiver import receiver
from tests.crash.worker import kill, spawn_ready
from tests.support.fleet import until

pytestmark = pytest.mark.crash

REPO = Path(__file__).resolve().parents[2]
COUNT = 21
KILLS = 6
LEASE_S = 1.0


def spawn(url: str, logs: Path, n: int) -> subprocess.Popen[str]:
    args = ["-m", "tests.crash.message_receiver", url, str(COUNT), str(LEASE_S)]
    return spawn_ready(args, logs / f"receiver-{n}.log")


async def send_all(client: Runtime, numbers: range) -> None:
    for n in numbers:
        while True:
            try:
                await client.send("inbox", "jobs", n, idempotency_key=f"job-{n}")
                break
            except (LeaseHeldError, BackendUnavailableError):  # a claim raced ours: again
                await asyncio.sleep(0.05)


async def received(client: Runtime) -> int:
    return sum([isinstance(e.data, MessageReceived) async for e in client.log.read("inbox")])


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", [1, 2])
async def test_messages_are_received_exactly_once_in_order_across_sigkills(
    seed: int, tmp_path: Path
) -> None:
    rng = random.Random(f"messages-{seed}")
    url = f"sqlite:///{tmp_path / 'agentlog.db'}"
    config = RuntimeConfig(owner="sender", execute=False, worker=False, lease_seconds=LEASE_S)
    async with await Runtime.open(url, workflows=[receiver(COUNT)], config=config) as client:
        await client.submit("receiver", run_id="inbox", durability="async")
        size = COUNT // (KILLS + 1)  # KILLS + 1 batches
        for n, first in enumerate(range(0, COUNT, size)):
            # A receiver per batch of messages; all but the last are killed at a
            # random point once they have received one of the batch.
            proc = await asyncio.to_thread(spawn, url, tmp_path, n)
            try:
                sending = asyncio.create_task(send_all(client, range(first, first + size)))
                if first + size < COUNT:

                    async def working(first: int = first) -> bool:
                        return await received(client) > first

                    await until(working, f"receiver {n} takes message {first}", 120, every=0.01)
                    await asyncio.sleep(rng.uniform(0.0, 0.1))
                    await asyncio.to_thread(kill, proc)
                async with asyncio.timeout(120):
                    await sending

                async def completed() -> bool:
                    return (await client.log.get_run("inbox")).status == RunStatus.COMPLETED

                if first + size >= COUNT:
                    await until(completed, "the run received every message", 120)
            finally:
                await asyncio.to_thread(kill, proc)
        state = await client.get_state("inbox")
        events = [e async for e in client.log.read("inbox")]
    sent = [(e.seq, e.data.value) for e in events if isinstance(e.data, MessageSent)]
    assert [value for _, value in sent] == list(range(COUNT))  # each once, in order
    deliveries = [e.data.seq for e in events if isinstance(e.data, MessageReceived)]
    assert deliveries == [seq for seq, _ in sent]  # each received once, in order
    assert state.values["got"] == list(range(COUNT)) and state.inbox == {}
    drivers = {e.data.owner for e in events if isinstance(e.data, WriterClaimed)}
    assert len({o for o in drivers if o.startswith("receiver-")}) >= 2  # the run changed hands
