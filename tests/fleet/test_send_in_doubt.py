"""A keyed send whose outcome did not come in time, retried, on a Kafka
worker fleet: the retry reports the message (True), once.

On Kafka a client's ``send`` is a command the run's owner applies. With no
worker alive, the send raises BackendUnavailableError after the log's
``command_timeout``, its command still queued; a worker started later
applies it. The retry of the key was refused as a duplicate and returned
False, although no call had reported the message (docs/messages.md listed it
as a case not met). Now the sending process keeps the in-doubt command and
the retry, refused, asks for its outcome: applied, so the retry returns True;
the send after it returns False, also when the message ended the run.
Bounded by count: one run, one key.
"""

from __future__ import annotations

import time

import pytest

from agentlog.errors import BackendUnavailableError
from agentlog.eventlog.events import MessageSent, RunStatus
from agentlog.runtime import Runtime, RuntimeConfig
from tests.fleet import app
from tests.support.fleet import Fleet, history, until

pytestmark = [pytest.mark.fleet, pytest.mark.kafka, pytest.mark.usefixtures("backend")]

KAFKA_PARTITIONS = 1
_TAKE_OVER_S = 120.0  # a new worker's join and take-over, on a loaded machine


@pytest.fixture
def backend() -> str:
    return "kafka"  # the client's outcome is a reply from the run's owner


async def _send_until_answered(rt: Runtime, value: int) -> bool:
    """``send`` of the key "job-0", again while no worker answers in time."""
    deadline = time.monotonic() + _TAKE_OVER_S
    while True:
        try:
            return await rt.send("retry", "jobs", value, idempotency_key="job-0")
        except BackendUnavailableError:
            if time.monotonic() > deadline:
                raise


@pytest.mark.timeout(300)
@pytest.mark.parametrize("want", [2, 1], ids=["run-goes-on", "message-ends-the-run"])
async def test_a_send_retried_after_no_worker_answered_reports_it_once(
    fleet: Fleet, client: Runtime, log_url: str, want: int
) -> None:
    """With ``want`` 1 the message ends the run: the retry finds it ended,
    and a key the run recorded is a duplicate still (True once, then False)."""
    first = fleet.start()
    await client.submit("inbox", run_id="retry", input={"want": want})
    await client.get_state("retry")  # the worker applied the start
    first.kill()  # no worker answers now
    config = RuntimeConfig(owner="sender", execute=False, worker=False)
    url = f"{log_url}&command_timeout=2"
    async with await Runtime.open(url, workflows=app.workflows, config=config) as sender:
        with pytest.raises(BackendUnavailableError, match="stays queued"):
            await sender.send("retry", "jobs", 0, idempotency_key="job-0")
        fleet.start()  # applies the queued send once it owns the partition

        async def recorded() -> bool:  # as the sender reads it: the retry is refused, or
            state = await sender.get_state("retry")  # finds the run ended
            return "job-0" in state.message_keys and (want == 2 or state.is_terminal)

        await until(recorded, "a new worker applies the queued send", _TAKE_OVER_S)
        assert await _send_until_answered(sender, 0) is True, "no call reported the message"
        assert await _send_until_answered(sender, 0) is False
    events = await history(client.log, "retry")
    sent = [e.data for e in events if isinstance(e.data, MessageSent)]
    assert [(m.key, m.value) for m in sent] == [("job-0", 0)]
    info = await client.log.find_run("retry")
    assert info is not None
    assert info.status == (RunStatus.COMPLETED if want == 1 else RunStatus.WAITING), info
