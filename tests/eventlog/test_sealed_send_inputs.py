"""A ``Send`` input is content: sealed in an encrypted run, its step name left visible.

A branch started by ``Send(step, **input)`` is recorded in the step's
``StepCompleted.goto`` and the superstep's ``SuperstepCommitted.next``. In
an encrypted run the input must never reach the store in clear; replay and
resume must still hand each branch its input, and a copy (the archive)
must store the event exactly as it was sealed.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.eventlog._sealing import SEALED_KEY
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.codec import (
    decode_stored_payload,
    encode_stored_payload,
    pack,
    unpack,
)
from agentlog.eventlog.events import Event, StepCompleted, SuperstepCommitted
from agentlog.projector import load_state
from agentlog.runtime import Runtime, Send, StepContext, Workflow, end, goto
from agentlog.runtime._workflow import Next
from tests.support.shred import CANARY, ONE_SHOT, raw_bytes, sqlite_files

ITEMS = [f"{CANARY}-send-{i}" for i in range(2)]


def _fanout() -> Workflow:
    """Send one branch per item; each branch records its input; then the run parks."""
    wf = Workflow("fanout", state={"seen": "append", "answer": "replace"})

    @wf.step
    async def plan(ctx: StepContext) -> Next:
        return goto(*(Send(work, item=item) for item in ITEMS))

    @wf.step(then="ask")
    async def work(ctx: StepContext) -> Any:
        return {"seen": [len(ctx.input["item"])]}

    @wf.step
    async def ask(ctx: StepContext) -> Next:
        answer = ctx.interrupt({"question": "go on?"})
        return end(answer=answer)

    return wf


async def _park(url: str, keys: LocalKeyStore) -> None:
    wf = _fanout()
    async with await Runtime.open(url, workflows=[wf], config=ONE_SHOT, keys=keys) as rt:
        await rt.start(wf, run_id="r", durability="sync")
        assert (await rt.wait("r")).status == "waiting"


def _branch_events(events: list[Event]) -> list[Event]:
    return [e for e in events if isinstance(e.data, StepCompleted | SuperstepCommitted)]


def _branches(event: Event) -> list[Any]:
    data = event.data
    return data.goto if isinstance(data, StepCompleted) else data.next  # type: ignore[attr-defined,no-any-return]


async def test_send_inputs_never_reach_the_store_in_clear(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    await _park(f"sqlite:///{db}", LocalKeyStore(tmp_path / "keyring.json"))
    stored = raw_bytes(*sqlite_files(db))
    assert b"work" in stored  # the step name stays visible
    leaked = [item for item in ITEMS if item.encode() in stored]
    assert not leaked, f"Send inputs stored in clear: {leaked}"


async def test_replay_and_resume_hand_each_branch_its_input(tmp_path: Path) -> None:
    db, ring = tmp_path / "log.db", tmp_path / "keyring.json"
    url = f"sqlite:///{db}"
    await _park(url, LocalKeyStore(ring))
    wf = _fanout()
    async with await Runtime.open(
        url, workflows=[wf], config=ONE_SHOT, keys=LocalKeyStore(ring)
    ) as rt:  # a new process's view: nothing cached
        assert len(await rt.pending("r")) == 1
        await rt.resume("r", "yes")
        final = await rt.wait("r")
    assert final.status == "completed"
    assert final.values == {"seen": [len(item) for item in ITEMS], "answer": "yes"}
    async with await open_log(url, keys=LocalKeyStore(ring)) as log:
        assert (await load_state(log, "r", use_snapshots=False)).values == final.values
        events = _branch_events([e async for e in log.read("r")])
    sent = [b for e in events for b in _branches(e) if isinstance(b, dict)]
    assert sorted(b["input"]["item"] for b in sent) == sorted(ITEMS * 2)  # goto and next
    async with await open_log(url) as keyless:  # no key: step names, no inputs
        blind = _branch_events([e async for e in keyless.read("r")])
    assert {b["step"] for e in blind for b in _branches(e) if isinstance(b, dict)} == {"work"}
    assert not [b for e in blind for b in _branches(e) if isinstance(b, dict) and "input" in b]


async def test_a_copy_stores_each_event_exactly_as_it_was_sealed(tmp_path: Path) -> None:
    db, ring = tmp_path / "log.db", tmp_path / "keyring.json"
    await _park(f"sqlite:///{db}", LocalKeyStore(ring))
    with sqlite3.connect(db) as conn:
        raw = dict(conn.execute("SELECT seq, payload FROM events WHERE run_id = 'r'").fetchall())
    async with await open_log(f"sqlite:///{db}", keys=LocalKeyStore(ring)) as log:
        opened = [e async for e in log.read("r")]
    async with await open_log(f"sqlite:///{db}") as keyless:
        blind = [e async for e in keyless.read("r")]
    assert _branch_events(opened) and _branch_events(blind)
    for event in (*opened, *blind):
        if event.sealed is not None:  # what the archive does: the blob, no key
            assert encode_stored_payload(event, None) == raw[event.seq], event.type


def test_an_event_sealed_with_its_send_inputs_in_clear_still_reads_and_copies(
    tmp_path: Path,
) -> None:
    """Events sealed before Send inputs were sealed kept them in clear, bound as metadata."""
    cipher = PayloadCipher(LocalKeyStore(tmp_path / "keyring.json"))
    goto_ = [{"step": "work", "input": {"item": "old"}}]
    clear = {"step": "plan", "superstep": 1, "branch": 0, "goto": goto_}
    blob = cipher.seal("r", 3, "event", pack({"writes": {}}), b"StepCompleted", pack(clear))
    stored = pack({**clear, SEALED_KEY: blob})
    data, sealed, unreadable = decode_stored_payload(
        "StepCompleted", 1, stored, cipher, run_id="r", seq=3
    )
    assert unreadable is None and data == StepCompleted("plan", 1, 0, {}, goto_)
    assert encode_stored_payload(Event("r", 3, data, sealed=sealed), None) == stored
    assert unpack(stored)["goto"] == goto_


def test_the_kafka_record_of_a_send_seals_its_input(tmp_path: Path) -> None:
    from agentlog.eventlog.codec import decode_event, encode_event

    cipher = PayloadCipher(LocalKeyStore(tmp_path / "keyring.json"))
    next_ = ["ask", {"step": "work", "input": {"item": ITEMS[0]}}]
    record = encode_event(Event("r", 4, SuperstepCommitted(1, next_)), cipher)
    assert ITEMS[0].encode() not in record and b"work" in record
    assert decode_event(record, cipher=cipher).data == SuperstepCommitted(1, next_)
    blind = decode_event(record)  # no key: the step names, no input
    assert blind.unreadable is not None
    assert blind.data == SuperstepCommitted(1, ["ask", {"step": "work"}])
