"""Which command an owner's commit finishes, and how (no broker needed).

Each recorded event is the effect of one command: the oldest outstanding one
of its run that asks for that event type. A second answer to the same
interrupt is not finished by the first answer's event: it stays outstanding
until the runtime acks it, and its reply then says refused.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

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

    ack = Change("", answers={11: None})  # the runtime found the interrupt answered: refused
    started = Event("other", 1, RunStarted("wf", "1", {}, "sync", "fp"), writer_epoch=1)
    assert offsets.matched([ack, _change("other", started)]) == {11: False, 12: True}
    assert offsets.matched([_change("other", started)]) == {12: True}  # no ack, no refusal


async def _commit_lines(backlog: int) -> int:
    """The Python lines one commit of one run's start runs in CommandOffsets
    (``matched``, ``position``, ``metadata``, ``commit``) while ``backlog``
    other commands are outstanding (taken from the partition, not yet applied)."""
    offsets = CommandOffsets()
    offsets.seed(100, "")
    offsets.taken(100, "mine", "RunStarted")
    for n in range(backlog):
        offsets.taken(101 + n, f"other-{n}", "RunStarted")
    started = Event("mine", 1, RunStarted("wf", "1", {}, "sync", "fp"), writer_epoch=1)
    count = 0

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if frame.f_code.co_filename.endswith("_offsets.py") and event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        finished = offsets.matched([_change("mine", started)])
        done = set(finished)
        position = offsets.position(done)
        assert position is not None and offsets.due(position, done)
        offsets.metadata(position, done)
        offsets.commit(position, done)
    finally:
        sys.settrace(None)
    assert finished == {100: True} and position == 101
    assert len(offsets.outstanding) == backlog
    return count


async def test_a_commit_costs_the_same_with_10_or_2000_commands_outstanding() -> None:
    """A worker whose partitions hold a backlog of commands (a client that submits
    faster than the worker starts runs) commits as cheaply as one with none: the
    work of a commit is the commands it finishes, not the ones still waiting."""
    small, large = await _commit_lines(10), await _commit_lines(2000)
    assert large < small * 1.5, f"a commit ran {small} lines with 10 outstanding, {large} with 2000"


async def test_a_reopen_after_a_landed_commit_skips_its_answers_past_the_metadata_cap() -> None:
    """400 commands done above a pinned one, each between two still outstanding
    (400 ranges: past the metadata's cap), then a transaction answering an ask
    lands but its owner sees it in doubt: the commit lists the ask (its own
    first), and the owner, reopened from the group's commit, decides nothing again."""
    offsets = CommandOffsets()
    offsets.seed(1_000_000, "")
    offsets.taken(1_000_000, "stuck", "RunStarted")  # its effect not committed yet
    pending = {1_000_000}
    for n in range(400):
        waiting, finished = 1_000_001 + 2 * n, 1_000_002 + 2 * n
        offsets.taken(waiting, f"w{n}", "RunStarted")
        offsets.taken(finished, f"r{n}", "RunStarted")
        offsets.commit(offsets.position({finished}), {finished})
        pending.add(waiting)
    ask = 1_000_801
    offsets.taken(ask, "x")  # a queue's ask, answered in the transaction below
    done = set(offsets.matched([Change("", answers={ask: b"grant"})]))
    assert done == {ask}
    position = offsets.position(done)
    meta = offsets.metadata(position, done)
    assert len(meta) <= 3000 and str(ask) in meta
    assert str(1_000_002) not in meta  # capped: the lowest left out
    reopened = CommandOffsets()
    reopened.seed(position, meta)  # the landed transaction's commit, read back
    reopened.reopened(offsets)
    assert reopened.skip(ask) and set(reopened.outstanding) == pending
    assert all(reopened.skip(1_000_002 + 2 * n) for n in range(400))


def _new_owner(meta: str, position: int) -> CommandOffsets:
    """The partition's next owner (after a rebalance or a crash), seeded from the commit."""
    fresh = CommandOffsets()
    fresh.seed(position, meta)
    return fresh


async def test_a_new_owner_skips_every_command_done_above_a_stuck_one() -> None:
    """One command stays outstanding while 2,000 above it are finished, each
    transaction writing its reply to the partition after it (the offsets in
    between): the partition's next owner, from the last commit alone, hands out
    the stuck one again and none of the 2,000 (no second reply, no ask decided twice)."""
    offsets = CommandOffsets()
    offsets.seed(5_000_000, "")
    offsets.taken(5_000_000, "stuck", "RunStarted")
    finished: list[int] = []
    meta, position = "", 5_000_000
    for n in range(2_000):
        command = 5_000_001 + 2 * n
        offsets.taken(command, f"r{n}", "RunStarted")
        position = offsets.position({command})
        assert position == 5_000_000
        meta = offsets.metadata(position, {command})
        offsets.commit(position, {command})
        offsets.taken(command + 1)  # this transaction's reply, read back
        finished.append(command)
    assert len(meta) <= 3000
    fresh = _new_owner(meta, position)
    assert not fresh.skip(5_000_000)
    assert [o for o in finished if not fresh.skip(o)] == []
    assert not fresh.skip(finished[-1] + 2)  # the next command, never read: handed out


async def test_ranges_never_span_a_command_outstanding_or_not_read() -> None:
    """A range joins two done commands only over offsets read and not outstanding."""
    offsets = CommandOffsets()
    offsets.seed(100, "")
    for o in range(100, 110):
        offsets.taken(o, f"r{o}", "RunStarted")
    offsets.commit(offsets.position({101, 102}), {101, 102})
    offsets.taken(110)  # a reply
    meta = offsets.metadata(100, {104, 105, 109})
    assert meta == "done:101-102,104-105,109"  # 103 and 106..108 still outstanding
    offsets.commit(100, {104, 105, 109})
    fresh = _new_owner(meta, 100)
    assert [o for o in range(100, 115) if fresh.skip(o)] == [101, 102, 104, 105, 109]
    fresh.taken(100, "r100", "RunStarted")
    fresh.taken(103, "r103", "RunStarted")
    # Carried on by the next owner: its seeded ranges stay listed, joined over read offsets.
    assert fresh.metadata(100, {103}) == "done:101-105,109"
