"""The contract's events, writers and run index: append and read, conditional
append, fencing and leases, unknown runs, the run index, bad run ids, tail,
and racing writers."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from agentlog.errors import (
    ConfigError,
    ConflictError,
    EventLogError,
    FencedError,
    LeaseHeldError,
    UnknownRunError,
)
from agentlog.eventlog._base import EventLog
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
from agentlog.testing._contract_base import ContractBase
from agentlog.testing._events import T0, ev, every_event_type, read_all, seed, started
from agentlog.testing._race import race, race_in_processes

__all__ = ["RunsContract"]


class RunsContract(ContractBase):
    """Events, writers and the run index (part of :class:`EventLogContract`)."""

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
        assert info.started_at == T0 + timedelta(seconds=1)
        await log.append([ev("r", 2, StepCompleted("a", 1, 0, {"x": 1}))])
        await log.append([ev("r", 3, StepCompleted("b", 1, 1, {"y": 2}))])
        await log.append([ev("r", 4, InterruptRaised("b", 1, 1, 0, "ok?"))])
        info = await log.get_run("r")
        assert (info.status, info.steps, info.last_seq) == (RunStatus.WAITING, 2, 4)
        assert info.updated_at == T0 + timedelta(seconds=4)
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
            await log.append([Event(run_id, 1, started(), ts=T0 + timedelta(seconds=second))])
        assert [r.run_id for r in await log.list_runs()] == ["newest", "middle", "old"]

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
