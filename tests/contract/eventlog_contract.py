"""The EventLog contract: every backend's test class subclasses EventLogContract.

A subclass provides two fixtures:

* ``log``: an async fixture yielding an open EventLog, created with
  ``keep_snapshots=EventLogContract.keep_snapshots``, empty, closed afterwards;
* ``log_url``: a URL that ``open_log`` opens onto the *same* store from
  another process, or None when the store lives in this process only (the
  memory backend); the several-writers test then races asyncio tasks on the
  one instance instead of processes.

Nothing here knows which backend it runs against.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from agentlog.errors import (
    ConfigError,
    ConflictError,
    EventLogError,
    FencedError,
    LeaseHeldError,
    NotSerializableError,
    RunArchivedError,
    UnknownRunError,
)
from agentlog.eventlog.base import EventLog, Snapshot
from agentlog.eventlog.codec import pack, unpack
from agentlog.eventlog.events import (
    Event,
    InterruptRaised,
    ResumeReceived,
    RunCompleted,
    RunFailed,
    RunStatus,
    StepCompleted,
    TaskCompleted,
)
from tests.contract.helpers import (
    _T0,
    ev,
    every_event_type,
    race_in_processes,
    read_all,
    seed,
    started,
)
from tests.contract.writer_proc import race


class EventLogContract:
    """The behaviour every EventLog backend must have."""

    keep_snapshots = 3

    # -- append and read ----------------------------------------------------------

    async def test_append_then_read_back_every_field(self, log: EventLog) -> None:
        events = every_event_type("r1")
        await log.append(events[:4])
        await log.append(events[4:], durable=False)
        got = await read_all(log, "r1")
        assert got == events
        assert [e.type for e in got] == [e.type for e in events]
        for event in got:
            assert event.ts.utcoffset() == timedelta(0)
            assert event.schema_v == events[0].schema_v

    async def test_timestamps_in_other_zones_read_back_as_the_same_utc_instant(
        self, log: EventLog
    ) -> None:
        local = datetime(2026, 5, 6, 7, 8, 9, 123456, tzinfo=timezone(timedelta(hours=-5)))
        await log.append([Event("tz", 1, RunCompleted(), ts=local)])
        (got,) = await read_all(log, "tz")
        assert got.ts == local
        assert got.ts.utcoffset() == timedelta(0)
        assert got.ts.hour == 12

    async def test_read_ranges(self, log: EventLog) -> None:
        events = await seed(log, "r", 10)
        assert await read_all(log, "r", after_seq=3, upto_seq=7) == events[3:7]
        assert await read_all(log, "r", after_seq=8) == events[8:]
        assert await read_all(log, "r", upto_seq=2) == events[:2]
        assert await read_all(log, "r", upto_seq=50) == events
        assert await read_all(log, "r", after_seq=10) == []
        assert await read_all(log, "r", after_seq=5, upto_seq=5) == []

    async def test_runs_are_kept_apart(self, log: EventLog) -> None:
        a = await seed(log, "a", 3)
        b = await seed(log, "b", 5)
        assert await read_all(log, "a") == a
        assert await read_all(log, "b") == b

    # -- conditional append -------------------------------------------------------

    @pytest.mark.parametrize("seq", [1, 2, 3])
    async def test_duplicate_seq_conflicts_and_writes_nothing(
        self, log: EventLog, seq: int
    ) -> None:
        events = await seed(log, "r", 3)
        with pytest.raises(ConflictError) as caught:
            await log.append([ev("r", seq, TaskCompleted("dup", "dup"))])
        assert caught.value.expected == 4
        assert caught.value.got == seq
        assert await read_all(log, "r") == events
        assert (await log.get_run("r")).last_seq == 3

    @pytest.mark.parametrize("seq", [5, 100])
    async def test_gap_conflicts_and_writes_nothing(self, log: EventLog, seq: int) -> None:
        events = await seed(log, "r", 3)
        with pytest.raises(ConflictError):
            await log.append([ev("r", seq)])
        assert await read_all(log, "r") == events

    async def test_first_append_must_start_at_seq_one(self, log: EventLog) -> None:
        with pytest.raises(ConflictError):
            await log.append([ev("new", 2)])
        info = await log.find_run("new")
        assert info is None or info.last_seq == 0
        with pytest.raises(UnknownRunError):
            await read_all(log, "new")

    async def test_batch_that_overlaps_midway_writes_nothing(self, log: EventLog) -> None:
        events = await seed(log, "r", 3)
        with pytest.raises(ConflictError):
            await log.append([ev("r", seq) for seq in range(2, 7)])
        with pytest.raises(ConflictError):
            await log.append([ev("r", 4), ev("r", 5), ev("r", 7)])
        assert await read_all(log, "r") == events
        more = [ev("r", seq) for seq in (4, 5, 6)]
        await log.append(more)
        assert await read_all(log, "r") == events + more

    async def test_append_rejects_empty_and_mixed_batches(self, log: EventLog) -> None:
        with pytest.raises(ValueError, match="at least one"):
            await log.append([])
        with pytest.raises(ValueError, match="one run"):
            await log.append([ev("a", 1), ev("b", 2)])
        assert await log.list_runs() == []

    # -- fencing and leases ---------------------------------------------------------

    async def test_newer_claim_fences_older_writer(self, log: EventLog) -> None:
        first = await log.claim_writer("r", owner="one")
        await log.append([ev("r", 1, epoch=first)])
        second = await log.claim_writer("r", owner="two")
        assert second > first
        with pytest.raises(FencedError) as caught:
            await log.append([ev("r", 2, epoch=first)])
        assert (caught.value.epoch, caught.value.current) == (first, second)
        assert len(await read_all(log, "r")) == 1
        await log.append([ev("r", 2, epoch=second)])
        got = await read_all(log, "r")
        assert [e.writer_epoch for e in got] == [first, second]
        info = await log.get_run("r")
        assert (info.writer_epoch, info.lease_owner) == (second, "two")

    async def test_append_with_an_unclaimed_epoch_is_refused(self, log: EventLog) -> None:
        epoch = await log.claim_writer("r")
        with pytest.raises(EventLogError):
            await log.append([ev("r", 1, epoch=epoch + 1)])
        info = await log.find_run("r")
        assert info is not None and (info.last_seq, info.writer_epoch) == (0, epoch)

    async def test_stale_epoch_cannot_renew_or_release(self, log: EventLog) -> None:
        old = await log.claim_writer("r", lease_seconds=60)
        new = await log.claim_writer("r", lease_seconds=60)
        with pytest.raises(FencedError):
            await log.renew_lease("r", old, 60)
        with pytest.raises(FencedError):
            await log.release_lease("r", old)
        await log.renew_lease("r", new, 60)
        await log.release_lease("r", new)

    async def test_live_lease_blocks_a_polite_claim(self, log: EventLog) -> None:
        epoch = await log.claim_writer("r", owner="alive", lease_seconds=60)
        with pytest.raises(LeaseHeldError) as caught:
            await log.claim_writer("r", owner="other", force=False)
        assert caught.value.owner == "alive"
        assert caught.value.retryable
        info = await log.find_run("r")
        assert info is not None and info.writer_epoch == epoch
        forced = await log.claim_writer("r", owner="other")
        assert forced == epoch + 1

    async def test_expired_lease_can_be_taken_over(self, log: EventLog) -> None:
        epoch = await log.claim_writer("r", owner="crashed", lease_seconds=0.01)
        await asyncio.sleep(0.05)
        taken = await log.claim_writer("r", owner="next", force=False, lease_seconds=60)
        assert taken == epoch + 1

    async def test_released_lease_can_be_taken_over(self, log: EventLog) -> None:
        epoch = await log.claim_writer("r", owner="done", lease_seconds=60)
        await log.renew_lease("r", epoch, 120)
        await log.release_lease("r", epoch)
        assert await log.claim_writer("r", force=False) == epoch + 1

    # -- unknown runs ------------------------------------------------------------------

    async def test_unknown_run(self, log: EventLog) -> None:
        await seed(log, "known", 1)
        with pytest.raises(UnknownRunError) as caught:
            await read_all(log, "nope")
        assert caught.value.run_id == "nope"
        with pytest.raises(UnknownRunError):
            await log.get_run("nope")
        assert await log.find_run("nope") is None
        with pytest.raises(UnknownRunError):
            await log.renew_lease("nope", 1, 10)
        with pytest.raises(UnknownRunError):
            await log.release_lease("nope", 1)
        assert await log.load_snapshot("nope") is None

    # -- the run index -------------------------------------------------------------------

    async def test_run_index_follows_the_events(self, log: EventLog) -> None:
        await log.append([ev("r", 1, started("flow"))])
        info = await log.get_run("r")
        assert (info.workflow, info.version, info.status) == ("flow", "1.0", RunStatus.RUNNING)
        assert info.started_at == _T0 + timedelta(seconds=1)
        await log.append([ev("r", 2, StepCompleted("a", 1, 0, {"x": 1}))])
        await log.append([ev("r", 3, StepCompleted("b", 1, 1, {"y": 2}))])
        await log.append([ev("r", 4, InterruptRaised("b", 1, 1, 0, "ok?"))])
        info = await log.get_run("r")
        assert (info.status, info.steps, info.last_seq) == (RunStatus.WAITING, 2, 4)
        assert info.updated_at == _T0 + timedelta(seconds=4)
        await log.append([ev("r", 5, ResumeReceived("yes"))])
        assert (await log.get_run("r")).status == RunStatus.RUNNING
        await log.append([ev("r", 6, StepCompleted("c", 2, 0, {})), ev("r", 7, RunCompleted(1))])
        info = await log.get_run("r")
        assert (info.status, info.steps, info.last_seq) == (RunStatus.COMPLETED, 3, 7)

    async def test_list_runs_filters_by_status(self, log: EventLog) -> None:
        await log.append([ev("done", 1, started()), ev("done", 2, RunCompleted())])
        await log.append(
            [ev("parked", 1, started()), ev("parked", 2, InterruptRaised("a", 1, 0, 0, None))]
        )
        await log.append([ev("broken", 1, started()), ev("broken", 2, RunFailed("x"))])
        await log.append([ev("busy", 1, started())])
        await log.claim_writer("claimed-only")
        assert {r.run_id for r in await log.list_runs()} == {"done", "parked", "broken", "busy"}
        for status, run_id in [
            (RunStatus.COMPLETED, "done"),
            (RunStatus.WAITING, "parked"),
            (RunStatus.FAILED, "broken"),
            (RunStatus.RUNNING, "busy"),
        ]:
            assert [r.run_id for r in await log.list_runs(status=status)] == [run_id]
        assert await log.list_runs(status=RunStatus.CANCELLED) == []

    async def test_list_runs_newest_first(self, log: EventLog) -> None:
        for run_id, second in [("old", 1), ("newest", 30), ("middle", 10)]:
            await log.append([Event(run_id, 1, started(), ts=_T0 + timedelta(seconds=second))])
        assert [r.run_id for r in await log.list_runs()] == ["newest", "middle", "old"]

    # -- snapshots ---------------------------------------------------------------------

    async def test_snapshots_keep_the_newest_k(self, log: EventLog) -> None:
        await seed(log, "r", 10)
        total = self.keep_snapshots + 2
        for seq in range(1, total + 1):
            await log.save_snapshot(Snapshot("r", seq, f"state{seq}".encode(), _T0))
        latest = await log.load_snapshot("r")
        assert latest == Snapshot("r", total, f"state{total}".encode(), _T0)
        oldest_kept = total - self.keep_snapshots + 1
        assert (await log.load_snapshot("r", at_or_before=oldest_kept)).seq == oldest_kept  # type: ignore[union-attr]
        assert await log.load_snapshot("r", at_or_before=oldest_kept - 1) is None
        assert await log.load_snapshot("other") is None

    async def test_snapshots_keep_the_base_their_deltas_build_on(self, log: EventLog) -> None:
        await seed(log, "r", 40)
        chain = [Snapshot("r", 2, b"base", _T0)]
        chain += [Snapshot("r", seq, b"delta", _T0, base_seq=2) for seq in range(4, 16, 2)]
        for snapshot in chain:
            await log.save_snapshot(snapshot)
        for snapshot in chain:  # more than keep_snapshots, all needed by the newest
            assert await log.load_snapshot("r", at_or_before=snapshot.seq) == snapshot
        bases = [Snapshot("r", seq, b"base", _T0) for seq in range(20, 20 + self.keep_snapshots)]
        for snapshot in bases:
            await log.save_snapshot(snapshot)
        assert await log.load_snapshot("r", at_or_before=19) is None  # nothing needs the chain
        assert await log.load_snapshot("r") == bases[-1]
        await log.save_snapshot(Snapshot("r", 30, b"delta", _T0, base_seq=bases[0].seq))
        await log.prune("r", keep_latest_snapshot=True)
        assert await log.load_snapshot("r", at_or_before=29) == bases[-1]  # its base stays
        assert await log.load_snapshot("r", at_or_before=bases[0].seq) == bases[0]

    async def test_snapshot_at_or_before(self, log: EventLog) -> None:
        await seed(log, "r", 10)
        for seq in (2, 5, 8):
            await log.save_snapshot(Snapshot("r", seq, bytes([seq]), _T0))
        assert (await log.load_snapshot("r", at_or_before=7)).state == bytes([5])  # type: ignore[union-attr]
        assert (await log.load_snapshot("r", at_or_before=8)).state == bytes([8])  # type: ignore[union-attr]
        assert await log.load_snapshot("r", at_or_before=1) is None

    async def test_saving_a_snapshot_again_replaces_it(self, log: EventLog) -> None:
        await seed(log, "r", 3)
        await log.save_snapshot(Snapshot("r", 3, b"first", _T0))
        await log.save_snapshot(Snapshot("r", 3, b"second", _T0))
        assert (await log.load_snapshot("r")).state == b"second"  # type: ignore[union-attr]

    async def test_snapshot_plus_tail_equals_full_read(self, log: EventLog) -> None:
        def fold(state: list[Any], events: Sequence[Event]) -> list[Any]:
            return state + [[e.seq, e.type, e.data.to_dict()] for e in events]

        events = every_event_type("r")
        await log.append(events)
        cut = 6
        prefix = await read_all(log, "r", upto_seq=cut)
        await log.save_snapshot(Snapshot("r", cut, pack(fold([], prefix)), _T0))
        snapshot = await log.load_snapshot("r")
        assert snapshot is not None
        rest = await read_all(log, "r", after_seq=snapshot.seq)
        assert fold(unpack(snapshot.state), rest) == fold([], await read_all(log, "r"))
        assert fold([], events) == fold([], await read_all(log, "r"))

    # -- large payloads, bad payloads ----------------------------------------------------

    async def test_ten_megabyte_payload_round_trips(self, log: EventLog) -> None:
        blob = os.urandom(10 * 1024 * 1024)
        event = ev("big", 1, TaskCompleted("k", {"blob": blob, "text": "x" * 1000}))
        await log.append([event])
        assert await read_all(log, "big") == [event]

    async def test_unserializable_payload_writes_nothing(self, log: EventLog) -> None:
        with pytest.raises(NotSerializableError) as caught:
            await log.append([ev("r", 1, TaskCompleted("k", {"bad": object()}))])
        assert "bad" in caught.value.path
        with pytest.raises(UnknownRunError):
            await read_all(log, "r")
        events = await seed(log, "s", 2)
        with pytest.raises(NotSerializableError):
            await log.append([ev("s", 3), ev("s", 4, TaskCompleted("k", {1, 2}))])
        assert await read_all(log, "s") == events
        assert (await log.get_run("s")).last_seq == 2

    async def test_naive_timestamp_is_refused_and_writes_nothing(self, log: EventLog) -> None:
        events = await seed(log, "r", 1)
        with pytest.raises(NotSerializableError):
            await log.append([Event("r", 2, RunCompleted(), ts=datetime(2026, 1, 1))])
        assert await read_all(log, "r") == events

    # -- pruning ------------------------------------------------------------------------

    async def test_prune_keeps_a_tombstone_and_the_run_id_stays_taken(self, log: EventLog) -> None:
        epoch = await log.claim_writer("gone", owner="w")
        await log.append(
            [ev("gone", 1, started("flow"), epoch)]
            + [ev("gone", seq, epoch=epoch) for seq in (2, 3)]
            + [ev("gone", 4, RunCompleted("ok"), epoch)]
        )
        kept = await seed(log, "kept", 3)
        await log.save_snapshot(Snapshot("gone", 4, b"g", _T0))
        await log.save_snapshot(Snapshot("kept", 3, b"k", _T0))
        before = await log.get_run("gone")
        await log.prune("gone")
        after = await log.get_run("gone")
        assert after.archived and not before.archived
        assert dataclasses.replace(after, archived=False) == before  # nothing else changed
        assert await log.find_run("gone") == after
        assert {r.run_id for r in await log.list_runs()} == {"gone", "kept"}
        assert [r.run_id for r in await log.list_runs(status=RunStatus.COMPLETED)] == ["gone"]
        with pytest.raises(RunArchivedError) as caught:
            await read_all(log, "gone")
        assert caught.value.run_id == "gone" and isinstance(caught.value, UnknownRunError)
        with pytest.raises(RunArchivedError):
            await read_all(log, "gone", after_seq=2, upto_seq=3)
        assert await read_all(log, "gone", after_seq=4) == []  # nothing asked was pruned
        assert await log.load_snapshot("gone") is None
        with pytest.raises(ConflictError):  # the id stays taken: no second history
            await log.append([ev("gone", 1, started("flow"), epoch)])
        assert await log.get_run("gone") == after
        assert await read_all(log, "kept") == kept
        assert (await log.load_snapshot("kept")).state == b"k"  # type: ignore[union-attr]

    async def test_prune_can_keep_the_latest_snapshot(self, log: EventLog) -> None:
        await seed(log, "r", 5)
        for seq in (2, 4):
            await log.save_snapshot(Snapshot("r", seq, bytes([seq]), _T0))
        await log.prune("r", keep_latest_snapshot=True)
        assert (await log.load_snapshot("r")).seq == 4  # type: ignore[union-attr]
        assert await log.load_snapshot("r", at_or_before=3) is None
        info = await log.find_run("r")
        assert info is not None and info.last_seq == 5 and info.archived

    async def test_pruned_unfinished_run_continues_after_its_last_seq(self, log: EventLog) -> None:
        first = await log.claim_writer("r", owner="one")
        await log.append([ev("r", 1, started(), first)] + [ev("r", s, epoch=first) for s in (2, 3)])
        await log.save_snapshot(Snapshot("r", 3, b"s3", _T0))
        await log.prune("r", keep_latest_snapshot=True)
        second = await log.claim_writer("r", owner="two")
        assert second > first  # the epoch survives the prune: old writers stay fenced
        with pytest.raises(FencedError):
            await log.append([ev("r", 4, epoch=first)])
        more = [ev("r", 4, epoch=second), ev("r", 5, RunCompleted(), second)]
        await log.append(more)
        assert await read_all(log, "r", after_seq=3) == more
        with pytest.raises(RunArchivedError):
            await read_all(log, "r")
        info = await log.get_run("r")
        assert (info.last_seq, info.status, info.archived) == (5, RunStatus.COMPLETED, True)

    async def test_prune_is_idempotent_and_ignores_unknown_runs(self, log: EventLog) -> None:
        await seed(log, "r", 2)
        await log.prune("r")
        info = await log.get_run("r")
        await log.prune("r")
        await log.prune("r", keep_latest_snapshot=True)
        assert await log.get_run("r") == info
        await log.prune("nope")
        assert await log.find_run("nope") is None
        with pytest.raises(UnknownRunError) as caught:
            await read_all(log, "nope")
        assert not isinstance(caught.value, RunArchivedError)

    # -- bad run ids and seqs -------------------------------------------------------------

    async def test_run_id_that_is_not_utf8_text_is_a_config_error(self, log: EventLog) -> None:
        bad = "run-\ud800"  # a lone surrogate: a Python str, but not text any store can keep
        with pytest.raises(ConfigError, match="not valid text"):
            await log.append([ev(bad, 1, started())])
        with pytest.raises(ConfigError):
            await log.find_run(bad)
        with pytest.raises(ConfigError):
            await read_all(log, bad)
        with pytest.raises(ConfigError):
            await log.claim_writer(bad)
        with pytest.raises(ConfigError):
            await log.load_snapshot(bad)
        assert await log.list_runs() == []

    async def test_seq_bounds_beyond_64_bits_are_empty_not_overflow(self, log: EventLog) -> None:
        events = await seed(log, "r", 3)
        await log.save_snapshot(Snapshot("r", 2, b"s2", _T0))
        assert await read_all(log, "r", after_seq=2**70) == []
        assert await read_all(log, "r", upto_seq=2**70) == events
        assert await read_all(log, "r", after_seq=-(2**70)) == events
        assert (await log.load_snapshot("r", at_or_before=2**70)).seq == 2  # type: ignore[union-attr]
        assert await log.load_snapshot("r", at_or_before=-(2**70)) is None

    # -- tail -----------------------------------------------------------------------------

    async def test_tail_follows_until_the_terminal_event(self, log: EventLog) -> None:
        await log.append([ev("r", 1, started())])
        seen: list[int] = []

        async def follow() -> None:
            async for event in log.tail("r", poll_seconds=0.01):
                seen.append(event.seq)

        follower = asyncio.create_task(follow())
        await asyncio.sleep(0.02)
        await log.append([ev("r", 2), ev("r", 3)])
        await asyncio.sleep(0.02)
        await log.append([ev("r", 4, RunCompleted({"ok": True}))])
        await asyncio.wait_for(follower, timeout=10)
        assert seen == [1, 2, 3, 4]

    async def test_tail_from_a_seq(self, log: EventLog) -> None:
        await log.append([ev("r", 1), ev("r", 2), ev("r", 3, RunFailed("x"))])
        got = [e.seq async for e in log.tail("r", after_seq=1, poll_seconds=0.01)]
        assert got == [2, 3]

    # -- several writers ------------------------------------------------------------------

    async def test_racing_writers_leave_one_gapless_history(
        self, log: EventLog, log_url: str | None
    ) -> None:
        writers, claims, appends = 4, 3, 15
        if log_url is None:
            results = await asyncio.gather(
                *(race(log, "race", f"w{i}", claims, appends) for i in range(writers))
            )
        else:
            results = await asyncio.to_thread(race_in_processes, log_url, writers, claims, appends)
        written = {seq: (f"w{i}", epoch) for i, pairs in enumerate(results) for seq, epoch in pairs}
        events = await read_all(log, "race")
        seqs = [e.seq for e in events]
        assert seqs == list(range(1, len(events) + 1))
        # Every append that reported success is there, under the epoch it claimed,
        # and nothing else is.
        assert sum(len(pairs) for pairs in results) == len(events) == len(written)
        for event in events:
            assert isinstance(event.data, TaskCompleted)
            assert written[event.seq] == (event.data.key, event.writer_epoch)
            assert event.data.result == {"epoch": event.writer_epoch, "seq": event.seq}
        # An epoch once fenced never writes again: epochs only go up along the log.
        epochs = [e.writer_epoch for e in events]
        assert epochs == sorted(epochs)
        info = await log.get_run("race")
        assert info.writer_epoch == writers * claims
        assert info.last_seq == len(events) >= appends
