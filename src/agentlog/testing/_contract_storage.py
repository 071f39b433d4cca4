"""The contract's storage: snapshots, large and bad payloads, pruning, seq bounds."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pytest

from agentlog.errors import (
    ConflictError,
    FencedError,
    NotSerializableError,
    RunArchivedError,
    UnknownRunError,
)
from agentlog.eventlog._base import EventLog, Snapshot
from agentlog.eventlog.codec import pack, unpack
from agentlog.eventlog.events import Event, RunCompleted, RunStatus, TaskCompleted
from agentlog.testing._contract_base import ContractBase
from agentlog.testing._events import T0, ev, every_event_type, read_all, seed, started

__all__ = ["StorageContract"]


class StorageContract(ContractBase):
    """Snapshots, payloads and pruning (part of :class:`EventLogContract`)."""

    # -- snapshots ---------------------------------------------------------------------

    async def test_snapshots_keep_the_newest_k(self, log: EventLog) -> None:
        await seed(log, "r", 10)
        total = self.keep_snapshots + 2
        for seq in range(1, total + 1):
            await log.save_snapshot(Snapshot("r", seq, f"state{seq}".encode(), T0))
        latest = await log.load_snapshot("r")
        assert latest == Snapshot("r", total, f"state{total}".encode(), T0)
        oldest_kept = total - self.keep_snapshots + 1
        assert (await log.load_snapshot("r", at_or_before=oldest_kept)).seq == oldest_kept  # type: ignore[union-attr]
        assert await log.load_snapshot("r", at_or_before=oldest_kept - 1) is None
        assert await log.load_snapshot("other") is None

    async def test_snapshots_keep_the_base_their_deltas_build_on(self, log: EventLog) -> None:
        await seed(log, "r", 40)
        chain = [Snapshot("r", 2, b"base", T0)]
        chain += [Snapshot("r", seq, b"delta", T0, base_seq=2) for seq in range(4, 16, 2)]
        for snapshot in chain:
            await log.save_snapshot(snapshot)
        for snapshot in chain:  # more than keep_snapshots, all needed by the newest
            assert await log.load_snapshot("r", at_or_before=snapshot.seq) == snapshot
        bases = [Snapshot("r", seq, b"base", T0) for seq in range(20, 20 + self.keep_snapshots)]
        for snapshot in bases:
            await log.save_snapshot(snapshot)
        assert await log.load_snapshot("r", at_or_before=19) is None  # nothing needs the chain
        assert await log.load_snapshot("r") == bases[-1]
        await log.save_snapshot(Snapshot("r", 30, b"delta", T0, base_seq=bases[0].seq))
        if not log.capabilities.prune:
            return
        await log.prune("r", keep_latest_snapshot=True)
        assert await log.load_snapshot("r", at_or_before=29) == bases[-1]  # its base stays
        assert await log.load_snapshot("r", at_or_before=bases[0].seq) == bases[0]

    async def test_snapshot_at_or_before(self, log: EventLog) -> None:
        await seed(log, "r", 10)
        for seq in (2, 5, 8):
            await log.save_snapshot(Snapshot("r", seq, bytes([seq]), T0))
        assert (await log.load_snapshot("r", at_or_before=7)).state == bytes([5])  # type: ignore[union-attr]
        assert (await log.load_snapshot("r", at_or_before=8)).state == bytes([8])  # type: ignore[union-attr]
        assert await log.load_snapshot("r", at_or_before=1) is None

    async def test_saving_a_snapshot_again_replaces_it(self, log: EventLog) -> None:
        await seed(log, "r", 3)
        await log.save_snapshot(Snapshot("r", 3, b"first", T0))
        await log.save_snapshot(Snapshot("r", 3, b"second", T0))
        assert (await log.load_snapshot("r")).state == b"second"  # type: ignore[union-attr]

    async def test_snapshot_plus_tail_equals_full_read(self, log: EventLog) -> None:
        def fold(state: list[Any], events: Sequence[Event]) -> list[Any]:
            return state + [[e.seq, e.type, e.data.to_dict()] for e in events]

        events = every_event_type("r")
        await log.append(events)
        cut = 6
        prefix = await read_all(log, "r", upto_seq=cut)
        await log.save_snapshot(Snapshot("r", cut, pack(fold([], prefix)), T0))
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
        self.require(log, "prune")
        epoch = await log.claim_writer("gone", owner="w")
        await log.append(
            [ev("gone", 1, started("flow"), epoch)]
            + [ev("gone", seq, epoch=epoch) for seq in (2, 3)]
            + [ev("gone", 4, RunCompleted("ok"), epoch)]
        )
        kept = await seed(log, "kept", 3)
        await log.save_snapshot(Snapshot("gone", 4, b"g", T0))
        await log.save_snapshot(Snapshot("kept", 3, b"k", T0))
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
        self.require(log, "prune")
        await seed(log, "r", 5)
        for seq in (2, 4):
            await log.save_snapshot(Snapshot("r", seq, bytes([seq]), T0))
        await log.prune("r", keep_latest_snapshot=True)
        assert (await log.load_snapshot("r")).seq == 4  # type: ignore[union-attr]
        assert await log.load_snapshot("r", at_or_before=3) is None
        info = await log.find_run("r")
        assert info is not None and info.last_seq == 5 and info.archived

    async def test_pruned_unfinished_run_continues_after_its_last_seq(self, log: EventLog) -> None:
        self.require(log, "prune")
        first = await log.claim_writer("r", owner="one")
        await log.append([ev("r", 1, started(), first)] + [ev("r", s, epoch=first) for s in (2, 3)])
        await log.save_snapshot(Snapshot("r", 3, b"s3", T0))
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
        self.require(log, "prune")
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

    async def test_prune_many_prunes_each_run_as_prune_does(self, log: EventLog) -> None:
        self.require(log, "prune")
        for run_id in ("a", "b", "kept"):
            await seed(log, run_id, 3)
            for seq in (1, 2):
                await log.save_snapshot(Snapshot(run_id, seq, bytes([seq]), T0))
        before = {r: await log.get_run(r) for r in ("a", "b")}
        await log.prune_many(["a", "b", "nope", "a"], keep_latest_snapshot=True)
        for run_id in ("a", "b"):
            after = await log.get_run(run_id)
            assert dataclasses.replace(after, archived=False) == before[run_id]
            assert after.archived and (await log.load_snapshot(run_id)).seq == 2  # type: ignore[union-attr]
            with pytest.raises(RunArchivedError):
                await read_all(log, run_id)
        assert await log.find_run("nope") is None
        assert not (await log.get_run("kept")).archived and len(await read_all(log, "kept")) == 3
        await log.prune_many(["a", "kept"])
        await log.prune_many([])
        assert await log.load_snapshot("a") is None and await log.load_snapshot("kept") is None

    # -- seq bounds ---------------------------------------------------------------------

    async def test_seq_bounds_beyond_64_bits_are_empty_not_overflow(self, log: EventLog) -> None:
        events = await seed(log, "r", 3)
        await log.save_snapshot(Snapshot("r", 2, b"s2", T0))
        assert await read_all(log, "r", after_seq=2**70) == []
        assert await read_all(log, "r", upto_seq=2**70) == events
        assert await read_all(log, "r", after_seq=-(2**70)) == events
        assert (await log.load_snapshot("r", at_or_before=2**70)).seq == 2  # type: ignore[union-attr]
        assert await log.load_snapshot("r", at_or_before=-(2**70)) is None
