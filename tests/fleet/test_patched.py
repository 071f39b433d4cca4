"""``ctx.patched`` across a deploy on ``agentlog worker`` processes, with a
SIGKILL mid-task (issue 24, item 5), on SQLite and on a Kafka worker fleet.

A worker runs ``patchy``'s step under the old code (no patch) or the patched
code, and is SIGKILLed inside the step's task (a gate file holds the task
after its delivery). A worker with the patched code (``app.patched``) takes
the run over. The run keeps the path its history committed to: the old
path (no marker: the history went past the patch point without it) or the
new one (its marker recorded once); the effects are that path's only, each
with one key, and the history verifies under the patched code. Bounded by
count: two workers per test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentlog.eventlog.events import RunStatus, TaskStarted
from agentlog.replay import verify_history
from agentlog.runtime import Runtime
from tests.fleet.app import patchy_v2
from tests.support.fleet import Dedup, Fleet, history, until

pytestmark = [pytest.mark.fleet, pytest.mark.usefixtures("backend")]  # on SQLite and Kafka

#: The app each first worker loads, and the path the run must keep.
FIRST = {"old": "tests.fleet.app:workflows", "new": "tests.fleet.app:patched"}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", ["old", "new"])
async def test_a_run_killed_mid_task_keeps_its_path_under_the_patched_code(
    fleet: Fleet,
    client: Runtime,
    dedup: Dedup,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
) -> None:
    gate = tmp_path / "patchy-gate"
    monkeypatch.setenv("PATCHY_GATE", str(gate))  # the workers inherit it
    first = fleet.start(apps=FIRST[path])
    await client.submit("patchy", run_id="patchy")

    def delivered() -> list[tuple[str, str]]:
        return dedup.rows("SELECT arg, key FROM deliveries WHERE kind = 'patchy'")

    async def in_task() -> bool:
        return bool(delivered())

    await until(in_task, "the step's task runs", 120)
    first.kill()  # inside the task: its start is recorded, its result is not
    gate.touch()
    fleet.start(apps="tests.fleet.app:patched")

    async def completed() -> bool:
        info = await client.log.find_run("patchy")
        return info is not None and info.status == RunStatus.COMPLETED

    await until(completed, "the run completed under the patched code", 180)
    assert (await client.get_state("patchy")).values["path"] == path
    events = await history(client.log, "patchy")
    names = [e.data.name for e in events if isinstance(e.data, TaskStarted)]
    markers = [n for n in names if n.startswith("agentlog.patched:")]
    assert markers == (["agentlog.patched:v2"] if path == "new" else [])
    assert {n for n in names if n not in markers} == {path}
    rows = delivered()
    assert {arg for arg, _ in rows} == {path}  # no effect of the other path
    assert len({key for _, key in rows}) == 1  # run again after the kill, same key
    assert len(rows) >= 2
    assert await verify_history(patchy_v2, events) == []
