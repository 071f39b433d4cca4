"""An attacker who can write the store, but not the key store: what they send.

A sealed run (content in its input, a task result, writes, output) and the
payload bytes an attacker puts in place of one stored event: plain content
(a downgrade), or the sealed blob with its clear metadata edited. Each
backend's test writes them into its own storage, with the checksum
recomputed, so that only the encryption layer can tell.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agentlog.eventlog._sealing import SEALED_KEY
from agentlog.eventlog.codec import pack, unpack
from agentlog.eventlog.events import (
    Event,
    EventData,
    RunCompleted,
    RunStarted,
    StepCompleted,
    SuperstepCommitted,
    TaskCompleted,
    TaskStarted,
)

ATTACKER = "attacker-text-7c1f"
SECRET = "secret-payload-33a9"
T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
#: The seq of the TaskCompleted the attacks replace.
TASK_SEQ = 3


def sealed_run(run_id: str, epoch: int) -> list[Event]:
    """A finished run: input, a task result, a step's writes and an output."""
    data: list[EventData] = [
        RunStarted("wf", "1", {"question": SECRET}, "sync", "fp", {}, ["plan"]),
        TaskStarted("k-search", "search", "plan", 0, 0, 0),
        TaskCompleted("k-search", {"hits": [SECRET]}, 12.5),
        StepCompleted("plan", 0, 0, {"notes": SECRET}, []),
        SuperstepCommitted(0, []),
        RunCompleted({"answer": SECRET}),
    ]
    return [
        Event(run_id, seq, item, T0 + timedelta(seconds=seq), epoch)
        for seq, item in enumerate(data, start=1)
    ]


def downgraded() -> bytes:
    """The TaskCompleted's payload as plain content: the attacker's result, in clear."""
    return pack({"key": "k-search", "result": {"hits": [ATTACKER]}, "duration_ms": 12.5})


def metadata_edited(stored: bytes) -> bytes:
    """The stored TaskCompleted payload, its sealed blob kept, its clear task key changed."""
    fields = unpack(stored)
    assert isinstance(fields[SEALED_KEY], bytes), "the test run must be stored sealed"
    return pack({**fields, "key": "k-other"})


ATTACKS = {"downgrade": lambda stored: downgraded(), "metadata": metadata_edited}
