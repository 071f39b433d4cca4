"""The replay check on the committed fixture histories (tests/fixtures/verify)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import agentlog
import agentlog.replay
from agentlog.errors import ConfigError
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.replay._verify import select_runs, verify_history, verify_runs
from tests.fixtures.verify import flows
from tests.fixtures.verify.history import (
    FAN_DONE,
    ORDER_DONE,
    ORDER_OPEN,
    committed_events,
    load_into,
)


@pytest.fixture
async def fixture_log() -> AsyncIterator[MemoryEventLog]:
    """A fresh log holding the committed histories."""
    log = MemoryEventLog()
    await load_into(log)
    yield log
    await log.close()


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file every fixture task body appends to when it runs."""
    path = tmp_path / "effects.txt"
    monkeypatch.setenv(flows.EFFECTS_ENV, str(path))
    return path


def _ran(effects: Path) -> list[str]:
    """The task bodies that ran (a sync helper: file access outside the event loop's code)."""
    return effects.read_text().splitlines() if effects.exists() else []


def _verdicts(report: agentlog.replay.VerifyReport) -> dict[str, tuple[Any, ...]]:
    return {r.run_id: (r.status, *((d.seq, d.kind) for d in r.divergences)) for r in report.runs}


async def test_unchanged_code_matches_every_run(fixture_log: MemoryEventLog, effects: Path) -> None:
    report = await verify_runs(fixture_log, flows.workflows, runs="all")
    assert _verdicts(report) == {
        ORDER_DONE: ("matched",),
        ORDER_OPEN: ("matched",),
        FAN_DONE: ("matched",),
    }
    assert report.ok and (report.matched, report.diverged, report.skipped) == (3, 0, 0)
    assert _ran(effects) == []  # no task body ran, though every run has tasks


#: variant -> the verdict on each order run (the fan-out always matches).
DIVERGENCES = {
    "step_changed": {ORDER_DONE: ("diverged", (4, "step")), ORDER_OPEN: ("diverged", (4, "step"))},
    "task_renamed": {ORDER_DONE: ("diverged", (2, "task")), ORDER_OPEN: ("diverged", (2, "task"))},
    # pay never ran in the open run: it matches up to where a resume would go on
    "task_reordered": {ORDER_DONE: ("diverged", (11, "task")), ORDER_OPEN: ("matched",)},
    "task_dropped": {ORDER_DONE: ("diverged", (13, "task")), ORDER_OPEN: ("matched",)},
    "write_changed": {
        ORDER_DONE: ("diverged", (4, "write")),
        ORDER_OPEN: ("diverged", (4, "write")),
    },
    "version_bumped": {
        ORDER_DONE: ("diverged", (1, "version")),
        ORDER_OPEN: ("diverged", (1, "version")),
    },
    "order_unknown": {
        ORDER_DONE: ("diverged", (1, "version")),
        ORDER_OPEN: ("diverged", (1, "version")),
    },
}


@pytest.mark.parametrize("variant", sorted(DIVERGENCES))
async def test_each_kind_of_change_diverges_at_its_run_and_seq(
    fixture_log: MemoryEventLog, effects: Path, variant: str
) -> None:
    report = await verify_runs(fixture_log, getattr(flows, variant), runs="all")
    assert _verdicts(report) == {**DIVERGENCES[variant], FAN_DONE: ("matched",)}
    assert not report.ok
    assert _ran(effects) == []


async def test_a_divergence_says_what_was_expected_and_what_came() -> None:
    events = [e for e in committed_events() if e.run_id == ORDER_DONE]
    [renamed] = await verify_history(flows.order("task_renamed"), events)
    assert (renamed.run_id, renamed.seq, renamed.kind) == (ORDER_DONE, 2, "task")
    assert renamed.expected == "task 'price' (call 0)"
    assert renamed.got == "task 'estimate' (call 0)"
    assert "'estimate'" in renamed.message and "'price'" in renamed.message
    [written] = await verify_history(flows.order("write"), events)
    assert written.expected == {"quote": 400, "log": ["planned"]}
    assert written.got == {"quote": 400, "log": ["planned!"]}
    [bumped] = await verify_history(flows.order("version"), events)
    assert "v1" in bumped.expected and "v2" in bumped.got and "migration" in bumped.message


async def test_a_registered_migration_is_skipped_not_diverged(
    fixture_log: MemoryEventLog,
) -> None:
    bumped = flows.order("version")
    bumped.migration("1")(lambda values: values)
    report = await verify_runs(fixture_log, [bumped, flows.fanout()], runs="all")
    order_runs = [r for r in report.runs if r.workflow == "order"]
    assert {r.status for r in order_runs} == {"skipped"} and report.ok
    assert all("migrates" in r.note for r in order_runs)


async def test_runs_selects_open_all_or_the_most_recent(fixture_log: MemoryEventLog) -> None:
    assert [i.run_id for i in await select_runs(fixture_log, "open")] == [ORDER_OPEN]
    assert len(await select_runs(fixture_log, "all")) == 3
    newest = (await fixture_log.list_runs())[0].run_id
    assert [i.run_id for i in await select_runs(fixture_log, 1)] == [newest]
    report = await verify_runs(fixture_log, flows.task_reordered)  # default: open runs
    assert _verdicts(report) == {ORDER_OPEN: ("matched",)}
    for bad in (0, -1, "some", True):
        with pytest.raises(ConfigError):
            await select_runs(fixture_log, bad)  # type: ignore[arg-type]


async def test_verify_appends_nothing_to_the_log(tmp_path: Path, effects: Path) -> None:
    path = tmp_path / "log.db"
    log = SqliteEventLog(str(path))
    await load_into(log)

    async def everything() -> tuple[Any, ...]:
        infos = await log.list_runs()
        events = {i.run_id: [e async for e in log.read(i.run_id)] for i in infos}
        snapshots = {i.run_id: await log.load_snapshot(i.run_id) for i in infos}
        return infos, events, snapshots

    before = await everything()
    for variant in ("workflows", *DIVERGENCES):
        await verify_runs(log, getattr(flows, variant), runs="all")
    assert await everything() == before
    await log.close()
    assert _ran(effects) == []


def test_the_replay_package_exports_the_check() -> None:
    for name in ("Divergence", "RunCheck", "VerifyReport", "verify_history", "verify_runs"):
        assert name in agentlog.replay.__all__
        assert hasattr(agentlog.replay, name)


async def test_the_effects_file_does_record_a_real_run(effects: Path) -> None:
    """The witness works: a real run of the fixture app writes its task bodies' lines."""
    from agentlog.runtime import Runtime

    async with Runtime(MemoryEventLog(), workflows=flows.workflows) as rt:
        await rt.start("fanout", run_id="real", input={})
        await rt.wait("real")
    assert sorted(_ran(effects)) == ["compute 1", "compute 2", "compute 3"]
