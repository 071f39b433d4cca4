"""Which command an owner's commit finishes, and how (no broker needed).

Each recorded event is the effect of one command: the oldest outstanding one
of its run that asks for that event type. A second answer to the same
interrupt is not finished by the first answer's event: it stays outstanding
until the runtime acks it, and its reply then says refused.
"""

from __future__ import annotations

from agentlog.eventlog.codec import encode_event
from agentlog.eventlog.events import Event, ResumeReceived, RunStarted
from agentlog.eventlog.kafka._offsets import CommandOffsets
from agentlog.eventlog.kafka._ownership import Change


def _change(run_id: str, *events: Event) -> Change:
    return Change(run_id, events=[(e, encode_event(e)) for e in events])


async def test_one_event_finishes_one_command_and_an_ack_refuses_the_other() -> None:
    offsets = CommandOffsets()
    offsets.taken(10, "r", "ResumeReceived")
    offsets.taken(11, "r", "ResumeReceived")
    offsets.taken(12, "other", "RunStarted")
    answer = Event("r", 3, ResumeReceived(answers={"1:0:0": True}), writer_epoch=1)

    finished = offsets.matched([_change("r", answer)])
    assert finished == {10: True}  # the first answer applied; not the second
    offsets.commit(offsets.position(set(finished)), set(finished))
    assert set(offsets.outstanding) == {11, 12}

    offsets.acked.add(11)  # the runtime found the interrupt answered: refused
    started = Event("other", 1, RunStarted("wf", "1", {}, "sync", "fp"), writer_epoch=1)
    assert offsets.matched([_change("other", started)]) == {11: False, 12: True}
