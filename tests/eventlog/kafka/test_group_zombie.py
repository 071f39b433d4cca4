"""A zombie member is fenced by Kafka transactions, never by wall-clock luck.

Each trial: a member process (tests/eventlog/kafka/group_zombie.py) owns every
partition and appends to a run in a loop; it is SIGSTOPped at a random point
(between commits or inside one), the group drops it after its session
timeout and gives its partitions to a new member here, which claims the run
and appends. Then the zombie gets SIGCONT: its next append must raise a
FencedError (NotOwnerError is one), and the run must read back as one
contiguous history: the zombie's events, then the new owner's, no fork.
Trials run a few at a time, each on its own topics and group.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from pathlib import Path

import pytest

from agentlog.eventlog.events import Event, StepCompleted
from agentlog.eventlog.kafka._admin import partition_for
from tests.crash.worker import child_env
from tests.eventlog.kafka.group_support import PARTITIONS, open_log, settle

pytestmark = [pytest.mark.kafka, pytest.mark.crash]

REPO = Path(__file__).resolve().parents[3]
TRIALS = 12  # 3 waves of 4; each stop point (1-5 appends in) is hit at least twice
AT_ONCE = 4
GUARD_S = 240.0


async def _line(proc: asyncio.subprocess.Process, prefix: str) -> str:
    assert proc.stdout is not None
    async with asyncio.timeout(GUARD_S):
        while True:
            raw = await proc.stdout.readline()
            if not raw:
                raise AssertionError(f"the zombie ended before printing {prefix!r}")
            line = raw.decode().strip()
            if line.startswith(prefix):
                return line


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


async def _stopped(pid: int) -> None:
    """Until the kernel shows the process stopped (state T), bounded by GUARD_S."""
    async with asyncio.timeout(GUARD_S):
        while True:
            if _state(pid) in ("T", "t"):
                return
            await asyncio.sleep(0.01)


async def _trial(bootstrap: str, n: int, logs: Path) -> list[str]:
    name, run_id = f"z{uuid.uuid4().hex[:10]}", f"zombie-run-{n}"
    partition = partition_for(run_id, PARTITIONS)
    with (logs / f"{name}.log").open("w") as stderr:
        zombie = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.eventlog.kafka.group_zombie", bootstrap, name, run_id,
            cwd=REPO, env=child_env(), stdout=asyncio.subprocess.PIPE, stderr=stderr,
        )  # fmt: skip
    owner = None
    try:
        await _line(zombie, "READY")
        for _ in range(1 + n % 5):  # stop it a little later each trial
            await _line(zombie, "APPENDED")
        os.kill(zombie.pid, signal.SIGSTOP)
        await _stopped(zombie.pid)
        owner = await open_log(bootstrap, name, "zombies")
        await settle([owner], lambda: partition in owner.owned_partitions, "takeover")
        info = await owner.get_run(run_id)
        epoch = await owner.claim_writer(run_id, owner="new")
        taken_at = info.last_seq
        for seq in (taken_at + 1, taken_at + 2):
            await owner.append(
                [Event(run_id, seq, StepCompleted("s", seq, 0, {}), writer_epoch=epoch)]
            )
    finally:
        os.kill(zombie.pid, signal.SIGCONT)
    async with asyncio.timeout(GUARD_S):
        out, _ = await zombie.communicate()
    report = json.loads(out.decode().strip().splitlines()[-1])
    client = await open_log(bootstrap, name)
    try:
        events = [e async for e in client.read(run_id)]  # a fork raises CorruptEventError
    finally:
        await client.close()
        if owner is not None:
            await owner.close()
    violations = []
    if not report["fenced"]:
        violations.append(f"trial {n}: the zombie's next write gave {report['outcome']}")
    seqs = [e.seq for e in events]
    if seqs != list(range(1, taken_at + 3)):
        violations.append(f"trial {n}: seqs {seqs}, taken over at {taken_at}")
    if [e.writer_epoch for e in events[taken_at:]] != [epoch, epoch]:
        violations.append(f"trial {n}: the new owner's events are not the last ones")
    return violations


@pytest.mark.timeout(1500)
async def test_a_zombie_member_is_fenced_and_nothing_forks(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    gate = asyncio.Semaphore(AT_ONCE)

    async def bounded(n: int) -> list[str]:
        async with gate:
            return await _trial(kafka_bootstrap, n, tmp_path)

    results = await asyncio.gather(*(bounded(n) for n in range(TRIALS)))
    violations = [v for trial in results for v in trial]
    assert violations == [], f"{len(violations)} violations in {TRIALS} trials:\n" + "\n".join(
        violations
    )
