"""A client's requests to a worker fleet on the real broker: each learns its outcome.

The client sends commands that the run's owning worker applies. Its call
returns once the owner applied the command (its reads then show it), and of
two answers to one interrupt, concurrent or one after the other, exactly one
is applied: the other caller gets RunNotWaitingError or
InvalidResumeValueError, as on a log written directly.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from agentlog.errors import InvalidResumeValueError, RunNotWaitingError
from agentlog.eventlog.events import RunStatus
from agentlog.runtime import Runtime, RuntimeConfig
from tests.eventlog.kafka.group_support import asks

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

LOSER = (RunNotWaitingError, InvalidResumeValueError)
WAIT_S = 120.0


@pytest.fixture
async def fleet(kafka_bootstrap: str, kafka_name: str) -> AsyncIterator[list[Runtime]]:
    """One worker (a group member in this process) and two clients."""
    base = f"kafka://{kafka_bootstrap}/{kafka_name}"
    wf = asks()
    async with contextlib.AsyncExitStack() as stack:
        worker_url = f"{base}?group=workers&partitions=2&session_timeout=6"
        worker = await Runtime.open(worker_url, workflows=[wf], config=RuntimeConfig("worker"))
        await stack.enter_async_context(worker)  # runs its worker loop
        clients = []
        for n in range(2):
            config = RuntimeConfig(owner=f"client{n}", execute=False, worker=False)
            client_url = f"{base}?layout=partitioned&partitions=2"
            client = await Runtime.open(client_url, workflows=[wf], config=config)
            clients.append(await stack.enter_async_context(client))
        yield clients


async def _parked(client: Runtime, run_id: str) -> None:
    await client.submit("asks", run_id=run_id)
    state = await client.wait(run_id, timeout=WAIT_S)
    assert state.status == RunStatus.WAITING, state.status


async def test_a_client_reads_its_own_submit_and_answer(fleet: list[Runtime]) -> None:
    client = fleet[0]
    await client.submit("asks", run_id="mine")
    # Read at once, no wait: the submit returned once the worker recorded it.
    state = await client.get_state("mine")
    assert state.workflow == "asks"
    assert (await client.wait("mine", timeout=WAIT_S)).status == RunStatus.WAITING
    assert len(await client.pending("mine")) == 1
    await client.resume("mine", True)
    state = await client.get_state("mine")
    assert not (state.status == RunStatus.WAITING and state.interrupts), state.status
    assert await client.pending("mine") == []
    # The same answer again, after the first returned: refused, as on SQLite.
    with pytest.raises(LOSER):
        await client.resume("mine", False)
    assert (await client.wait("mine", timeout=WAIT_S)).values == {"answer": True}


async def test_of_two_concurrent_answers_one_is_applied_and_the_other_refused(
    fleet: list[Runtime],
) -> None:
    first, second = fleet
    await _parked(first, "race")
    outcomes = await asyncio.gather(
        first.resume("race", True), second.resume("race", False), return_exceptions=True
    )
    won = [n for n, outcome in enumerate(outcomes) if not isinstance(outcome, BaseException)]
    lost = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    assert isinstance(lost[0], LOSER), repr(lost[0])
    state = await first.wait("race", timeout=WAIT_S)
    assert state.values == {"answer": [True, False][won[0]]}
    resumes = [e async for e in first.log.read("race") if e.type == "ResumeReceived"]
    assert len(resumes) == 1
