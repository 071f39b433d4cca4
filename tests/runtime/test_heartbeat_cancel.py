"""The lease heartbeat stops when its run ends, even if a client library
swallows the cancel that stops it.

A cancel that lands while a renewal waits inside a client library can come
out as that library's timeout or connection error instead of CancelledError
(``asyncio.timeout`` and ``async_timeout`` can do this on Python 3.11). The
old heartbeat took that for a storage hiccup, logged it and renewed again,
forever: the run's driver waited for it, so the run never finished. Seen in
the SIGKILL crash suite on Redis under load (a worker hung 180 s while its
lease kept being renewed).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentlog.errors import BackendUnavailableError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, StepContext, Workflow, end
from tests.support.runtime import config, run_to_rest


def _swallowing(base: type[EventLog]) -> type[EventLog]:
    class Swallowing(base):  # type: ignore[misc, valid-type]
        """A real log whose lease renewal hangs, and turns a cancel into an error."""

        renewing: asyncio.Event

        async def renew_lease(self, run_id: str, epoch: int, lease_seconds: float) -> None:
            self.renewing.set()
            try:
                await asyncio.Event().wait()  # a server that does not answer
            except asyncio.CancelledError:
                raise BackendUnavailableError("the client timed out") from None

    return Swallowing


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_a_run_ends_when_its_heartbeat_cancel_is_swallowed(
    backend: str, tmp_path: Any
) -> None:
    if backend == "memory":
        log: Any = _swallowing(MemoryEventLog)()
    else:
        log = _swallowing(SqliteEventLog)(str(tmp_path / "log.db"))
    log.renewing = asyncio.Event()
    wf = Workflow("hb", state={"done": "replace"})

    @wf.step
    async def only(ctx: StepContext) -> Any:
        await log.renewing.wait()  # end the run while a renewal is in flight
        return end(done=True)

    async with log, Runtime(log, workflows=[wf], config=config(lease_seconds=0.3)) as rt:
        await rt.start(wf, run_id="r", durability="sync")
        state = await run_to_rest(rt, "r", seconds=60)  # the old heartbeat never let it end
    assert state.values["done"] is True
