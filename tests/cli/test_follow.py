"""``agentlog show RUN --follow``: a real ``agentlog`` process follows a run another process drives.

The run waits for the follower: its step publishes progress and goes on only
once the follower printed that progress, so the output is live, not the
history printed after the end.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest

from agentlog.eventlog.sqlite import SqliteEventLog
from tests.crash.worker import child_env
from tests.support.stream_driver import BOUND_SECONDS


async def _spawn(*args: str, cwd: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=child_env(),
        cwd=cwd,  # no archive folder there: the follower reads the hot log only
    )


async def _stop(*procs: asyncio.subprocess.Process) -> None:
    for proc in procs:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def _lines(proc: asyncio.subprocess.Process) -> list[str]:
    """Every stdout line until the process closes it (bounded)."""
    assert proc.stdout is not None
    lines = []
    async with asyncio.timeout(BOUND_SECONDS):
        while line := await proc.stdout.readline():
            lines.append(line.decode())
    return lines


@pytest.mark.process
async def test_follow_prints_each_event_live_until_the_run_ends(tmp_path: Path) -> None:
    db, release = tmp_path / "follow.db", tmp_path / "release"
    log_url = f"sqlite:///{db}"
    drive = ["-m", "tests.support.stream_driver", str(db), "f1", str(release)]
    driver = await _spawn(*drive, cwd=tmp_path)
    followers: list[asyncio.subprocess.Process] = []
    try:
        assert driver.stdout is not None
        async with asyncio.timeout(BOUND_SECONDS):
            assert (await driver.stdout.readline()).strip() == b"STARTED"
        show = ["-m", "agentlog", "show", "f1", "--follow", "--json", "--log", log_url]
        followers.append(await _spawn(*show, cwd=tmp_path))
        followers.append(await _spawn(*show, "--mode", "progress", cwd=tmp_path))
        events, progress = followers
        assert progress.stdout is not None
        async with asyncio.timeout(BOUND_SECONDS):
            first = json.loads(await progress.stdout.readline())
        assert first["type"] == "ProgressReported" and first["data"] == {"pct": 50}
        release.touch()  # only now can the run go on
        rows = [json.loads(line) for line in await _lines(events)]
        more = [json.loads(line) for line in await _lines(progress)]
        async with asyncio.timeout(BOUND_SECONDS):
            codes = [await proc.wait() for proc in (events, progress, driver)]
        assert codes == [0, 0, 0]
    finally:
        await _stop(*followers, driver)
    async with SqliteEventLog(db) as log:
        history = [event async for event in log.read("f1")]
    assert [(r["seq"], r["type"]) for r in rows] == [(e.seq, e.type) for e in history]
    assert rows[-1]["type"] == "RunCompleted"
    assert [(r["step"], r["data"]) for r in [first, *more]] == [
        ("plan", {"pct": 50}),
        ("plan", {"pct": 100}),
        ("left", {"side": "left"}),
    ]


@pytest.mark.process
async def test_ctrl_c_stops_following_a_parked_run_with_exit_code_130(
    log_url: str, tmp_path: Path
) -> None:
    show = ["-m", "agentlog", "show", "r1", "--follow", "--log", log_url]
    follower = await _spawn(*show, cwd=tmp_path)
    try:
        assert follower.stdout is not None
        seen: list[str] = []
        async with asyncio.timeout(BOUND_SECONDS):
            while not any("InterruptRaised" in line for line in seen):
                line = (await follower.stdout.readline()).decode()
                assert line, f"the follower stopped early: {seen}"
                seen.append(line)
        assert follower.returncode is None  # a parked run is followed, not left
        follower.send_signal(signal.SIGINT)
        async with asyncio.timeout(BOUND_SECONDS):
            _, err = await follower.communicate()
    finally:
        await _stop(follower)
    assert follower.returncode == 130
    assert b"Traceback" not in err, err.decode()
    assert [line.split()[2] for line in seen] == [
        "RunStarted",
        "StepCompleted",
        "SuperstepCommitted",
        "InterruptRaised",
    ]
    assert '"question":"ok?"' in seen[-1]  # the payload, as show prints it
