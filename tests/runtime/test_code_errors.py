"""A step whose code breaks the workflow's contract fails its run, on record.

Issue 19, item 4: a step returning a tuple, writing an undeclared key or
asking an interrupt with a bad ``expects`` failed the starter's ``wait()``
when the starter drove the run, but left nothing on record; driven by a
worker, the run stayed ``running`` for ever and a client's ``wait()`` ended
in a bare TimeoutError. Now the run is recorded failed (StepFailed, not
retryable, and RunFailed naming the step and the error) in every durability
mode, whoever drives it, and every waiter gets the same RunFailedError. The
fleet suite checks the same with an ``agentlog worker`` process
(``tests/fleet/test_code_errors.py``).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentlog.cli._runs import driver
from agentlog.errors import RunFailedError
from agentlog.eventlog.events import RunFailed, RunStatus, StepFailed
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, StepContext, Workflow, end
from tests.support.code_error_flows import MISTAKES, broken
from tests.support.runtime import config, events_of, run_to_rest

MODES = ("sync", "async", "exit")


@pytest.fixture
async def sqlite_log(tmp_path: Path) -> AsyncIterator[SqliteEventLog]:
    log = SqliteEventLog(tmp_path / "agentlog.db")
    try:
        yield log
    finally:
        await log.close()


async def _assert_failed_on_record(log: SqliteEventLog, run_id: str, mistake: str) -> None:
    """The run's history ends in StepFailed (not retryable) and RunFailed, both
    naming the step and the error, and the run index says it failed."""
    events = [e.data for e in await events_of(log, run_id)]
    step_failed, run_failed = events[-2:]
    assert isinstance(step_failed, StepFailed) and isinstance(run_failed, RunFailed), events
    assert step_failed.step == "only" and not step_failed.retryable
    assert MISTAKES[mistake] in step_failed.error
    assert "step 'only'" in run_failed.error and MISTAKES[mistake] in run_failed.error
    info = await log.get_run(run_id)
    assert info.status == RunStatus.FAILED
    assert driver(info) == ""  # `agentlog runs`: nobody needs to move it on


def _says(mistake: str) -> str:
    return rf"step 'only'.*{re.escape(MISTAKES[mistake])}"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("mistake", sorted(MISTAKES))
async def test_a_code_error_fails_a_run_its_starter_drives(
    sqlite_log: SqliteEventLog, mistake: str, mode: str
) -> None:
    async with Runtime(sqlite_log, workflows=[broken], config=config("starter")) as rt:
        await rt.start(broken, run_id="r", input={"mistake": mistake}, durability=mode)  # type: ignore[arg-type]
        with pytest.raises(RunFailedError, match=_says(mistake)):
            await run_to_rest(rt, "r")
    await _assert_failed_on_record(sqlite_log, "r", mistake)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("mistake", sorted(MISTAKES))
async def test_a_code_error_fails_a_submitted_run_a_worker_drives(
    sqlite_log: SqliteEventLog, mistake: str, mode: str
) -> None:
    client_config = config("client", execute=False)
    async with Runtime(sqlite_log, workflows=[broken], config=client_config) as client:
        await client.submit(broken, run_id="r", input={"mistake": mistake}, durability=mode)  # type: ignore[arg-type]
        async with Runtime(sqlite_log, workflows=[broken], config=config("w", worker=True)):
            with pytest.raises(RunFailedError, match=_says(mistake)):
                await run_to_rest(client, "r")  # the worker's failure, read from the log
        with pytest.raises(RunFailedError, match=_says(mistake)):
            await client.result("r")
    await _assert_failed_on_record(sqlite_log, "r", mistake)


async def test_after_a_code_error_retry_with_fixed_code_finishes_the_run(
    sqlite_log: SqliteEventLog,
) -> None:
    async with Runtime(sqlite_log, workflows=[broken], config=config("a")) as rt:
        await rt.start(broken, run_id="r", input={"mistake": "key"}, durability="sync")
        with pytest.raises(RunFailedError, match=r"agentlog retry r"):
            await run_to_rest(rt, "r")
    fixed = Workflow("broken", state={"mistake": "replace", "done": "replace"})

    @fixed.step
    async def only(ctx: StepContext) -> Any:
        return end(done=True)

    async with Runtime(sqlite_log, workflows=[fixed], config=config("b")) as rt:
        await rt.retry("r")
        final = await run_to_rest(rt, "r")
    assert final.status == RunStatus.COMPLETED and final.values["done"] is True
