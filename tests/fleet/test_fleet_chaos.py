"""Fleet chaos: three ``agentlog worker`` processes on one log, one SIGKILLed
every few seconds and replaced (and after every third kill one more
SIGTERMed, which must exit 0), while a client in this process submits runs
(in each durability mode in turn) and answers their interrupts.

Two backends: SQLite (the workers share one file and own runs by lease) and
a real Kafka broker, where the workers are one consumer group: each owns the
runs of the partitions the group assigns it, fenced by one transactional
producer per partition, and the client sends commands that the owner applies.

Each run fans out to three parallel branches (an effect, a durable sleep,
another effect), parks on an approval with a timeout, and sends (an effect).
The test answers most approvals with ``resume`` from its own runtime (which
only records the answer; a worker drives the run on); a fifth of the runs
are never answered (their timeout fires on a worker), and a fifth are
answered just as their short timeout is due (the answer and the clock race).
At the end every run completed, and its history and the dedup service's
records (a separate process) show that:

* the history is one contiguous seq from 1, with one RunStarted, and the
  writer epochs never go down along it (no fork, no zombie write);
* every effect was delivered at least once and its TaskCompleted recorded
  exactly once; every branch timer fired once; each approval was settled
  exactly once, by the answer or by its timeout, never both;
* no task whose result was recorded ran again, checked without clocks: no
  key's TaskStarted follows its TaskCompleted, and each delivery came from a
  process that recorded that task's intent (TaskStarted) at an epoch it held
  (in ``exit`` mode, which records no intent before an effect, from a process
  that held the run at or before the epoch that recorded the result). A
  delivery may still *arrive* after the result is recorded: an effect started
  by a writer that was then superseded is in flight (the at-least-once window
  the key makes harmless); the test counts those. That a woken zombie starts
  no effect is pinned without timing in tests/runtime/test_effect_fence_at_call.py.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from agentlog.errors import InvalidResumeValueError, LeaseHeldError, RunNotWaitingError
from agentlog.eventlog.events import (
    Event,
    InterruptRaised,
    ResumeReceived,
    RunStarted,
    RunStatus,
    TaskCompleted,
    TaskStarted,
    TimerFired,
    WriterClaimed,
    utcnow,
)
from agentlog.projector._state import interrupt_key
from agentlog.runtime import Runtime
from tests.fleet import app
from tests.support.fleet import Dedup, Fleet, WorkerProc, history

pytestmark = [pytest.mark.fleet, pytest.mark.slow]  # 52 s on SQLite, 110-126 s on Kafka

WORKERS = 3
BATCH = 15  # runs per batch
#: Batches per backend: 150 runs on each. The work is bounded by count (runs
#: and kills), never by wall time, so a slow or loaded machine only takes longer.
BATCHES = {"sqlite": 10, "kafka": 10}
#: Seconds between kills: on Kafka a dead member's partitions move after its
#: session timeout (6 s here), so kills come a little slower there.
KILL_EVERY = {"sqlite": (1.0, 3.0), "kafka": (2.0, 4.0)}
KAFKA_PARTITIONS = 6
RESEND_S = 15.0
MIN_KILLS = 10
#: After every this many kills, a SIGTERM too (a graceful hand-over under load).
TERM_EVERY = 3
#: Durability modes, by run (each mode must survive the same chaos).
DURABILITY = ("async", "sync", "exit")
SEED = 1010
#: A stall guard, not a deadline: the test fails only when no run completed
#: for this long after the chaos stopped (every worker alive by then), and
#: then names each unfinished run and what it waits on.
STALL_S = 240.0
#: Approval patience (seconds) per group: answered runs wait long, ignored
#: ones time out, racing ones are answered while their timeout falls due.
PATIENCE = {"answered": 600.0, "ignored": 1.0, "racing": 1.0}
#: How close to its due time a racing approval is answered.
RACE_WINDOW = timedelta(seconds=0.3)


def group(index: int) -> str:
    """Which approval group the index-th run is in."""
    return {0: "ignored", 1: "racing"}.get(index % 5, "answered")


@dataclass
class Chaos:
    """What the chaos did, for the checks and the report."""

    backend: str = "sqlite"
    kills: int = 0
    terms: int = 0
    #: Leases held by each killed worker when it died (runs it orphaned).
    orphaned: list[int] = field(default_factory=list)
    submitted: list[str] = field(default_factory=list)
    groups: dict[str, str] = field(default_factory=dict)
    answered: int = 0
    #: When each run's answer last went as a command (Kafka). A client sends
    #: again only after RESEND_S: a command applied twice changes nothing.
    sent: dict[str, float] = field(default_factory=dict)
    #: Racing answers that found the approval already settled by its timeout.
    too_late: int = 0


async def _answer_interrupts(client: Runtime, done: asyncio.Event, chaos: Chaos) -> None:
    """Answer every approval as it appears; a worker drives the run on."""
    while not done.is_set():
        for info in await client.log.list_runs(status=RunStatus.WAITING):
            which = chaos.groups[info.run_id]
            if which == "ignored" or not await client.pending(info.run_id):
                continue  # asleep on its branch timers (or ignored): a worker fires them
            if which == "racing":
                # Answer about when the timeout falls due: whichever is recorded
                # first wins (either outcome is right; both never are).
                wake = (await client.log.get_run(info.run_id)).wake_at
                if wake is not None and wake > utcnow() + RACE_WINDOW:
                    continue
            if time.monotonic() - chaos.sent.get(info.run_id, -RESEND_S) < RESEND_S:
                continue  # sent as a command; its owner applies it (or refuses it, late)
            try:
                await client.resume(info.run_id, True)
                chaos.answered += 1
                if not client.log.direct_writes:
                    chaos.sent[info.run_id] = time.monotonic()
            except (LeaseHeldError, RunNotWaitingError):
                pass  # its worker has not let go yet (or died holding it): next pass
            except InvalidResumeValueError:
                # Only a racing answer may find its approval settled by the clock.
                assert which == "racing", f"{info.run_id}: an answer was refused"
                chaos.too_late += 1
        await asyncio.sleep(0.2)


def _owner(worker: WorkerProc) -> str:
    # "worker HOST:PID drives ..." names the owner its leases carry
    return worker.ready_line.split()[1]


async def _stop_one(fleet: Fleet, rng: random.Random, chaos: Chaos) -> None:
    """SIGTERM a random worker: it hands its runs over and exits 0; start a new one."""
    victim = rng.choice(fleet.alive)
    code = await asyncio.to_thread(victim.terminate)
    assert code == 0, f"a worker stopped by SIGTERM exited {code}:\n{victim.log_tail()}"
    chaos.terms += 1
    await asyncio.to_thread(fleet.start)


async def _kill_one(fleet: Fleet, client: Runtime, rng: random.Random, chaos: Chaos) -> None:
    victim = rng.choice(fleet.alive)
    victim.kill()
    chaos.kills += 1
    owner = _owner(victim)
    held = [i for i in await client.log.list_runs() if i.lease_owner == owner]
    chaos.orphaned.append(
        sum(1 for i in held if i.lease_expires_at and i.status == RunStatus.RUNNING)
    )
    await asyncio.to_thread(fleet.start)


async def _submit_batch(client: Runtime, chaos: Chaos) -> None:
    for _ in range(BATCH):
        index = len(chaos.submitted)
        run_id = f"fleet-{index:03d}"
        chaos.groups[run_id] = group(index)
        await client.submit(
            app.fleet,
            run_id=run_id,
            input={"patience": PATIENCE[group(index)]},
            durability=DURABILITY[index % len(DURABILITY)],
        )
        chaos.submitted.append(run_id)


async def _completed(client: Runtime) -> int:
    return len(await client.log.list_runs(status=RunStatus.COMPLETED))


async def _chaos(fleet: Fleet, client: Runtime, chaos: Chaos) -> None:
    """Kill a random worker every 1-3 s and start a new one; after each kill
    submit the next batch, so every kill lands on runs in flight. Bounded by
    count: it ends once every batch is in and at least MIN_KILLS kills were made."""
    rng = random.Random(SEED)
    await _submit_batch(client, chaos)
    total = BATCHES[chaos.backend] * BATCH
    while len(chaos.submitted) < total or chaos.kills < MIN_KILLS:
        await asyncio.sleep(rng.uniform(*KILL_EVERY[chaos.backend]))
        await _kill_one(fleet, client, rng, chaos)
        if chaos.kills % TERM_EVERY == 0:
            await _stop_one(fleet, rng, chaos)
        if len(chaos.submitted) < total:
            await _submit_batch(client, chaos)


async def _until_all_completed(client: Runtime, fleet: Fleet, chaos: Chaos) -> None:
    """Wait while runs keep completing; fail only on a stall, naming what is stuck."""
    done, progress_at = await _completed(client), time.monotonic()
    while done < len(chaos.submitted):
        await asyncio.sleep(0.5)
        now = await _completed(client)
        if now > done:
            done, progress_at = now, time.monotonic()
        elif time.monotonic() - progress_at > STALL_S:
            pytest.fail(
                f"stalled: {done} of {len(chaos.submitted)} runs completed and none more "
                f"in {STALL_S:g}s\n" + await _stuck_report(client, fleet, chaos)
            )


async def _stuck_report(client: Runtime, fleet: Fleet, chaos: Chaos) -> str:
    """Each unfinished run: its index row, open interrupts and last events; the workers' logs."""
    lines = []
    for info in await client.log.list_runs():
        if info.status == RunStatus.COMPLETED:
            continue
        events = [e async for e in client.log.read(info.run_id)]
        lines.append(
            f"{info.run_id} ({chaos.groups.get(info.run_id)}): status={info.status} "
            f"epoch={info.writer_epoch} lease={info.lease_owner or '-'} until "
            f"{info.lease_expires_at} wake_at={info.wake_at} "
            f"pending={await client.pending(info.run_id) if info.status == 'waiting' else '-'}"
        )
        lines.append(_story(info.run_id, events[-6:]))
    lines.append(f"workers alive: {[w.pid for w in fleet.alive]}")
    for worker in fleet.alive:
        lines.append(f"--- worker {worker.pid}:\n{worker.log_tail(1500)}")
    return "\n".join(lines)


# A hang guard only: the chaos is bounded by count, the finish by STALL_S without progress.
@pytest.mark.timeout(1500)
async def test_a_fleet_under_sigkill_completes_every_run_once(
    backend: str, fleet: Fleet, client: Runtime, dedup: Dedup
) -> None:
    await asyncio.gather(*(asyncio.to_thread(fleet.start) for _ in range(WORKERS)))
    chaos = Chaos(backend)
    done = asyncio.Event()
    answering = asyncio.create_task(_answer_interrupts(client, done, chaos))
    started = time.monotonic()
    try:
        await _chaos(fleet, client, chaos)
        chaos_s = time.monotonic() - started
        await _until_all_completed(client, fleet, chaos)
    finally:
        done.set()
        await answering
    print(
        f"FLEET {backend} runs={len(chaos.submitted)} kills={chaos.kills} sigterms={chaos.terms} "
        f"orphaned-per-kill={chaos.orphaned} answered={chaos.answered} "
        f"racing-answers-too-late={chaos.too_late} "
        f"chaos={chaos_s:.0f}s total={time.monotonic() - started:.0f}s "
        f"workers-started={len(fleet.started)}"
    )
    assert chaos.kills >= MIN_KILLS
    assert sum(chaos.orphaned) > 0, "no kill left a run to take over"
    redelivered = 0
    settled: Counter[tuple[str, bool]] = Counter()
    for run_id in chaos.submitted:
        redelivered += await _check_run(client, dedup, run_id)
        approved = (await client.get_state(run_id)).values["approved"]
        settled[chaos.groups[run_id], approved] += 1
    print(f"FLEET approvals (group, approved): {dict(settled)}")
    assert settled["ignored", True] == 0 and settled["answered", False] == 0
    print(
        f"FLEET effects that arrived after their result was recorded (started by a "
        f"writer then superseded): {redelivered}"
    )


def _story(run_id: str, events: list[Event]) -> str:
    """The run's history, one line an event, for a failure message."""
    lines = [f"{run_id}:"]
    for e in events:
        data = {k: v for k, v in e.data.to_dict().items() if k not in ("input", "limits")}
        lines.append(f"  {e.seq} epoch={e.writer_epoch} {e.type} {str(data)[:160]}")
    return "\n".join(lines)


async def _check_run(client: Runtime, dedup: Dedup, run_id: str) -> int:
    """Check one run's history against what the dedup service saw; return how
    many deliveries were repeats (a key sent again before its result was recorded)."""
    events = await history(client.log, run_id)
    state = await client.get_state(run_id)
    assert state.status == RunStatus.COMPLETED, run_id
    approved = state.values["approved"]
    assert state.values["sent"] == f"email({approved})", _story(run_id, events)
    assert len(state.values["notes"]) == 2 * len(app.BRANCHES)
    assert sum(isinstance(e.data, RunStarted) for e in events) == 1, f"{run_id}: forked start"
    epochs = [e.writer_epoch for e in events]
    assert epochs == sorted(epochs), f"{run_id}: a write from an older writer after a newer one"
    raised = {
        e.data.step: interrupt_key(e.data.superstep, e.data.branch, e.data.index)
        for e in events
        if isinstance(e.data, InterruptRaised)
    }
    approval = raised.pop("approve")
    fired = [timer for e in events if isinstance(e.data, TimerFired) for timer in e.data.ids]
    assert len(fired) == len(set(fired)), f"{run_id}: a timer fired twice: {fired}"
    assert set(raised.values()) == set(fired) - {approval}, f"{run_id}: branch timers {fired}"
    answers = [
        key for e in events if isinstance(e.data, ResumeReceived) for key in e.data.answers or {}
    ]
    # The approval is settled once: by the answer (approved) or by its timeout (not).
    assert answers.count(approval) + fired.count(approval) == 1, (run_id, answers, fired)
    assert approved is (approval in answers), run_id
    completed_at = _completed_at(run_id, events)
    starters = _starters(run_id, events)
    assert set(starters) == set(completed_at), f"{run_id}: a task started but never completed"
    deliveries = dedup.rows("SELECT key, gen, ts FROM deliveries WHERE run = ?", run_id)
    assert {key for key, _, _ in deliveries} == set(completed_at), f"{run_id}: not delivered"
    for key, gen, _ in deliveries:
        assert gen in starters[key] or None in starters[key], (
            f"{run_id}: task {key} delivered by process {gen}, which recorded no TaskStarted "
            f"for it, nor held the run then (may deliver: {starters[key]})\n"
            + _story(run_id, events)
        )
    # Arrivals after the record are in-flight effects of superseded writers:
    # allowed (at least once), counted for the report.
    return sum(ts >= completed_at[key] for key, _, ts in deliveries)


def _completed_at(run_id: str, events: list[Event]) -> dict[str, float]:
    """Each task key's TaskCompleted time; exactly one TaskCompleted per key."""
    counts = Counter(e.data.key for e in events if isinstance(e.data, TaskCompleted))
    twice = {key: n for key, n in counts.items() if n != 1}
    assert not twice, f"{run_id}: tasks recorded more than once: {twice}"
    return {e.data.key: e.ts.timestamp() for e in events if isinstance(e.data, TaskCompleted)}


def _starters(run_id: str, events: list[Event]) -> dict[str, set[int | None]]:
    """The processes (pids) that may have delivered each task key's effect
    (``None`` for an epoch whose owner no WriterClaimed names): those that
    recorded its TaskStarted or, in ``exit`` mode, every owner up to the epoch
    that recorded its result. Asserts that no TaskStarted of a key comes after
    that key's TaskCompleted: no writer started a recorded task."""
    owners = {
        e.data.epoch: int(e.data.owner.rpartition(":")[2])
        for e in events
        if isinstance(e.data, WriterClaimed) and e.data.owner.rpartition(":")[2].isdigit()
    }
    exit_mode = any(isinstance(e.data, RunStarted) and e.data.durability == "exit" for e in events)
    starters: dict[str, set[int | None]] = {}
    done: set[str] = set()
    for e in events:
        if isinstance(e.data, TaskStarted):
            assert e.data.key not in done, (
                f"{run_id}: task {e.data.key} started again at seq {e.seq} after its result "
                f"was recorded: a recorded task ran again\n" + _story(run_id, events)
            )
            starters.setdefault(e.data.key, set()).add(owners.get(e.writer_epoch))
        elif isinstance(e.data, TaskCompleted):
            done.add(e.data.key)
            if exit_mode:  # an owner that died before its first flush left no WriterClaimed
                held = {owners.get(epoch) for epoch in range(2, e.writer_epoch + 1)}
                starters.setdefault(e.data.key, set()).update(held)
    return starters
