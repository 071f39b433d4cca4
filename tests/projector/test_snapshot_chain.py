"""Delta snapshots: an append-only list is stored about once, resume stays
bounded, and a broken chain falls back instead of loading a wrong state.

The runs are the runtime benchmark's loop (``benchmarks/bench_runtime.py``):
one step that appends a ~500-byte message of random text per step, on the
real SQLite log. Bounds are counted (events read, snapshots loaded), never
timed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from benchmarks.bench_runtime import conversation, loop_workflow
from structlog.testing import capture_logs

from agentlog.errors import BackendUnavailableError, ConfigError
from agentlog.eventlog._base import Snapshot
from agentlog.eventlog._indexed import ColdRead
from agentlog.eventlog.codec import checksum, pack
from agentlog.eventlog.events import Event
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.projector import decode_state, fold, load_state
from agentlog.projector._snapshots import SnapshotPolicy, save_state
from agentlog.runtime import Runtime, RuntimeConfig

RUN = "bench"
EVERY = 20  # events between snapshots (a step is two events: StepCompleted, SuperstepCommitted)


class CountingLog(SqliteEventLog):
    """The SQLite log, counting what a load reads: events, and snapshots."""

    def __init__(self, path: Path, **kwargs: int) -> None:
        super().__init__(path, **kwargs)
        self.events_read = 0
        self.snapshots_loaded = 0
        self.fail_saves_at: set[int] = set()

    def reset(self) -> None:
        self.events_read = self.snapshots_loaded = 0

    async def read(
        self, run_id: str, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> AsyncIterator[Event]:
        async for event in super().read(run_id, after_seq=after_seq, upto_seq=upto_seq):
            self.events_read += 1
            yield event

    async def read_rows(
        self, run_id: str, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> AsyncIterator[list[tuple[Any, ...]]]:
        # load_state folds a SQL log's stored rows (projector/_row_fold.py)
        async for rows in super().read_rows(run_id, after_seq=after_seq, upto_seq=upto_seq):
            self.events_read += len(rows)
            yield rows

    def cold_read(
        self, run_id: str, *, upto_seq: int | None = None, snapshots: bool = True
    ) -> ColdRead | None:
        # load_state's first read: the newest snapshot's chain and the rows after it
        found = super().cold_read(run_id, upto_seq=upto_seq, snapshots=snapshots)
        if found is not None:
            self.events_read += len(found.rows)
            self.snapshots_loaded += len(found.snapshots)
        return found

    async def load_snapshot(
        self, run_id: str, *, at_or_before: int | None = None
    ) -> Snapshot | None:
        self.snapshots_loaded += 1
        return await super().load_snapshot(run_id, at_or_before=at_or_before)

    async def save_snapshot(self, snapshot: Snapshot) -> None:
        if snapshot.seq in self.fail_saves_at:
            raise BackendUnavailableError(f"injected: snapshot {snapshot.seq} not saved")
        await super().save_snapshot(snapshot)


async def run_loop(
    log: SqliteEventLog, steps: int, *, durability: str = "sync", **policy: int | bool
) -> list[Event]:
    """Run the benchmark loop to its end; return its events."""
    wf = loop_workflow(steps)
    snapshots = SnapshotPolicy(**{"every": EVERY, "on_park": False, **policy})  # type: ignore[arg-type]
    cfg = RuntimeConfig(snapshots=snapshots, worker=False)
    async with Runtime(log, workflows=[wf], config=cfg) as runtime:
        await runtime.start(wf, run_id=RUN, durability=durability)  # type: ignore[arg-type]
        state = await runtime.wait(RUN)
    assert state.status == "completed" and state.steps == steps
    return [event async for event in log.read(RUN)]


def stored(path: Path) -> list[tuple[int, int, int]]:
    """``(seq, base_seq, bytes)`` of each stored snapshot of the run, oldest first."""
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(
            "SELECT seq, base_seq, length(state) FROM snapshots WHERE run_id = ? ORDER BY seq",
            (RUN,),
        ).fetchall()


@pytest.fixture
async def log(log_path: Path) -> AsyncIterator[CountingLog]:
    async with CountingLog(log_path) as log:
        yield log


# -- bytes ---------------------------------------------------------------------------------


async def test_a_runs_snapshots_hold_its_message_list_about_once(
    log: CountingLog, log_path: Path
) -> None:
    steps = 300
    await run_loop(log, steps)
    messages = len(pack(conversation(steps)))
    with closing(sqlite3.connect(log_path)) as conn:
        (snapshot_bytes,) = conn.execute("SELECT sum(length(state)) FROM snapshots").fetchone()
    # Whole-state snapshots kept three copies of the list (~3x); the chain
    # keeps its base and the deltas since, each message once (compressed).
    assert snapshot_bytes < messages
    assert any(base for _, base, _ in stored(log_path))  # deltas, on their base


async def test_the_final_output_is_not_stored_twice(log: CountingLog, log_path: Path) -> None:
    events = await run_loop(log, 50, every=10_000, on_park=True)  # one: the final one
    ((seq, base, size),) = stored(log_path)
    assert seq == len(events) and base == 0
    assert size < len(pack(conversation(50)))  # values and their copy as output: > 2x
    loaded = await load_state(log, RUN)
    assert loaded.output == loaded.values and loaded.output is not loaded.values
    assert loaded.to_dict() == fold(events).to_dict()


# -- bounded resume ----------------------------------------------------------------------------


@pytest.mark.parametrize("steps", [100, 400])
async def test_resume_reads_less_than_one_interval_of_events_and_one_chain(
    log: CountingLog, steps: int
) -> None:
    base_every = 4
    events = await run_loop(log, steps, base_every=base_every)
    log.reset()
    with capture_logs() as logs:
        state = await load_state(log, RUN)
    assert state.to_dict() == fold(events).to_dict()
    assert logs == []  # every link was there and good
    # The same bounds for 100 and 400 steps: the interval and the chain, not the run.
    assert log.events_read < EVERY
    assert log.snapshots_loaded <= base_every


async def test_time_travel_through_delta_snapshots_is_the_fold(log: CountingLog) -> None:
    events = await run_loop(log, 120, base_every=3, every=15)
    for seq in range(1, len(events) + 1, 7):
        at = await load_state(log, RUN, at_seq=seq)
        assert at.to_dict() == fold(events[:seq]).to_dict(), seq


# -- broken chains ---------------------------------------------------------------------------


async def test_a_missing_link_falls_back_to_an_older_good_snapshot(
    log: CountingLog, log_path: Path
) -> None:
    events = await run_loop(log, 200, base_every=8)
    kept = stored(log_path)
    latest, parent = kept[-1][0], kept[-2][0]
    assert kept[-1][1] > 0  # the newest is a delta, on its parent
    with closing(sqlite3.connect(log_path)) as conn, conn:
        conn.execute("DELETE FROM snapshots WHERE run_id = ? AND seq = ?", (RUN, parent))
    log.reset()
    with capture_logs() as logs:
        state = await load_state(log, RUN)
    assert state.to_dict() == fold(events).to_dict()
    assert [entry["seq"] for entry in logs] == [latest]
    assert "missing" in logs[0]["reason"]
    assert log.events_read < 3 * EVERY  # from the snapshot below the missing one


async def test_a_corrupt_base_falls_back_to_the_events(log: CountingLog, log_path: Path) -> None:
    events = await run_loop(log, 100, base_every=100)  # one chain: every kept one needs its base
    kept = stored(log_path)
    base = kept[0][0]
    assert all(b == base for _, b, _ in kept[1:])
    with closing(sqlite3.connect(log_path)) as conn, conn:
        (blob,) = conn.execute(
            "SELECT state FROM snapshots WHERE run_id = ? AND seq = ?", (RUN, base)
        ).fetchone()
        middle = len(blob) // 2  # inside the compressed messages: the checksum stays as it was
        rotted = blob[:middle] + bytes([blob[middle] ^ 0xFF]) + blob[middle + 1 :]
        conn.execute(
            "UPDATE snapshots SET state = ? WHERE run_id = ? AND seq = ?", (rotted, RUN, base)
        )
    with capture_logs() as logs:
        state = await load_state(log, RUN)
    assert state.to_dict() == fold(events).to_dict()
    assert {entry["seq"] for entry in logs} == {seq for seq, _, _ in kept}
    assert all("checksum" in entry["reason"] for entry in logs)


async def test_a_link_replaced_by_another_snapshot_is_not_trusted(
    log: CountingLog, log_path: Path
) -> None:
    events = await run_loop(log, 200, base_every=8)
    kept = stored(log_path)
    latest, parent = kept[-1][0], kept[-2][0]
    # Another writer saved a good, standalone snapshot at the parent's seq.
    await save_state(log, fold(events[:parent]))
    with capture_logs() as logs:
        state = await load_state(log, RUN)
    assert state.to_dict() == fold(events).to_dict()
    assert [entry["seq"] for entry in logs] == [latest]
    assert "does not extend" in logs[0]["reason"]


# -- the writer keeps its chain whole ------------------------------------------------------------


async def test_a_failed_save_makes_the_next_snapshot_stand_alone(
    log: CountingLog, log_path: Path
) -> None:
    log.fail_saves_at = {60}
    events = await run_loop(log, 60, base_every=100, every=20)
    kept = {seq: base for seq, base, _ in stored(log_path)}
    assert 60 not in kept and kept[80] == 0 and kept[100] == 80
    with capture_logs() as logs:
        assert (await load_state(log, RUN)).to_dict() == fold(events).to_dict()
    assert logs == []


async def test_exit_mode_saves_a_snapshot_that_stands_alone(
    log: CountingLog, log_path: Path
) -> None:
    events = await run_loop(log, 60, durability="exit")
    kept = stored(log_path)
    assert [base for _, base, _ in kept] == [0]  # the dropped ones are not its parents
    with capture_logs() as logs:
        assert (await load_state(log, RUN)).to_dict() == fold(events).to_dict()
    assert logs == []


# -- formats and settings -------------------------------------------------------------------------


async def test_a_format_2_snapshot_still_loads(log: CountingLog) -> None:
    events = await run_loop(log, 30, every=10_000)
    head = fold(events[:40])
    body = pack(head.to_dict(), path="snapshot")  # as format 2 wrote it
    frame = pack({"format": 2, "state": body, "checksum": checksum(body)})
    await log.save_snapshot(Snapshot(RUN, 40, frame, events[0].ts))
    log.reset()
    with capture_logs() as logs:
        assert (await load_state(log, RUN, at_seq=45)).to_dict() == fold(events[:45]).to_dict()
    assert logs == [] and log.events_read == 5


def test_base_every_must_be_a_whole_number_from_1() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="base_every"):
            SnapshotPolicy(base_every=bad)  # type: ignore[arg-type]
    assert SnapshotPolicy(base_every=1).base_every == 1


async def test_decode_state_reads_a_base_and_leaves_a_delta_to_load_state(
    log: CountingLog,
) -> None:
    events = await run_loop(log, 100, base_every=100)
    newest = await log.load_snapshot(RUN)
    assert newest is not None and newest.base_seq > 0
    base = await log.load_snapshot(RUN, at_or_before=newest.base_seq)
    assert base is not None and base.base_seq == 0
    with capture_logs() as logs:
        assert decode_state(newest) is None  # a delta alone is not a state
        decoded = decode_state(base)
    assert decoded is not None and decoded.to_dict() == fold(events[: base.seq]).to_dict()
    assert [(e["event"], e["log_level"]) for e in logs] == [("snapshot needs its chain", "info")]
