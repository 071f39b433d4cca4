"""Two writers forking to the same new run id: the loser gets RunExistsError."""

from __future__ import annotations

import asyncio

import pytest

from agentlog.errors import RunExistsError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunStatus
from agentlog.runtime import Runtime
from tests.support.fork import chain_workflow, reset
from tests.support.runtime import config, event_log, run_to_rest

__all__ = ["event_log"]


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    reset()


async def test_a_new_run_id_another_writer_claimed_first_is_a_run_exists_error(
    event_log: EventLog,
) -> None:
    wf = chain_workflow()
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="origin", input={"topic": "cats"}, durability="sync")
        assert (await run_to_rest(rt, run_id="origin")).status == RunStatus.COMPLETED
    # Another process's fork holds the new id's lease and has recorded nothing yet.
    await event_log.claim_writer("taken", owner="other-process", lease_seconds=300, force=False)
    async with Runtime(event_log, workflows=[wf], config=config(execute=False)) as rt:
        with pytest.raises(RunExistsError, match="'taken' is being created elsewhere"):
            await rt.fork("origin", 2, new_run_id="taken")
        # Two forks to one id at once in this process: one wins, one is told it exists.
        won, lost = await asyncio.gather(
            rt.fork("origin", 2, new_run_id="twin"),
            rt.fork("origin", 3, new_run_id="twin"),
            return_exceptions=True,
        )
        outcomes = sorted(type(x).__name__ for x in (won, lost))
        assert outcomes == ["RunExistsError", "RunHandle"], (won, lost)
    info = await event_log.find_run("taken")
    assert info is None or info.last_seq == 0
