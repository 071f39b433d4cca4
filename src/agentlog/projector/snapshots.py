"""Snapshots: a run's folded state, saved so that resume reads only the tail.

Snapshots are a cache of ``fold(events)``; the events stay the truth. A
snapshot that does not decode, or was written in an older snapshot format,
is logged and ignored, and the state is folded from the events instead.

Load = the latest snapshot at or below the wanted seq, plus the events after
it. That bounds resume time and memory by the snapshot interval, not by the
run's length, and makes time travel (:func:`load_state` with ``at_seq``)
cheap for any seq that has a snapshot below it.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentlog._logging import get_logger
from agentlog.errors import ConfigError, UnknownRunError
from agentlog.eventlog.base import EventLog, Snapshot
from agentlog.eventlog.codec import pack, unpack
from agentlog.eventlog.events import RunStatus, utcnow
from agentlog.projector.fold import apply
from agentlog.projector.state import RunState

__all__ = [
    "SNAPSHOT_FORMAT",
    "SnapshotPolicy",
    "decode_state",
    "encode_state",
    "load_state",
    "save_state",
]

log = get_logger("agentlog.projector")

#: Bumped whenever RunState's shape changes; older snapshots are ignored.
SNAPSHOT_FORMAT = 1


@dataclass(frozen=True, slots=True)
class SnapshotPolicy:
    """When the runtime saves a snapshot."""

    every: int = 200
    """Save after this many events since the last snapshot."""

    on_park: bool = True
    """Also save whenever the run parks on an interrupt or ends."""

    def due(self, state: RunState, last_snapshot_seq: int) -> bool:
        """Whether ``state`` should be snapshotted now."""
        if state.seq <= last_snapshot_seq:
            return False
        if state.seq - last_snapshot_seq >= self.every:
            return True
        parked = state.status == RunStatus.WAITING or state.is_terminal
        return self.on_park and parked


def encode_state(state: RunState) -> bytes:
    """A RunState as snapshot bytes."""
    return pack({"format": SNAPSHOT_FORMAT, "state": state.to_dict()}, path="snapshot")


def decode_state(snapshot: Snapshot) -> RunState | None:
    """The RunState in a snapshot, or None if it cannot be used."""
    try:
        body = unpack(snapshot.state)
        if body.get("format") != SNAPSHOT_FORMAT:
            raise ValueError(f"snapshot format {body.get('format')} != {SNAPSHOT_FORMAT}")
        state = RunState.from_dict(body["state"])
        if state.seq != snapshot.seq or state.run_id != snapshot.run_id:
            raise ValueError("snapshot seq or run does not match its row")
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        log.warning("snapshot ignored", run_id=snapshot.run_id, seq=snapshot.seq, reason=str(exc))
        return None
    return state


async def save_state(event_log: EventLog, state: RunState) -> None:
    """Save ``state`` as the run's newest snapshot."""
    await event_log.save_snapshot(Snapshot(state.run_id, state.seq, encode_state(state), utcnow()))


async def load_state(
    event_log: EventLog, run_id: str, *, at_seq: int | None = None, use_snapshots: bool = True
) -> RunState:
    """The run's state at ``at_seq`` (default: now): snapshot + tail.

    Raises:
        UnknownRunError: nothing was recorded for ``run_id``.
        ConfigError: ``at_seq`` is beyond the run's last event.
        CorruptEventError, ReplayError: a recorded event cannot be folded.
    """
    if at_seq is not None and at_seq < 1:
        raise ConfigError(f"seq must be 1 or more, got {at_seq}")
    state = None
    if use_snapshots:
        snapshot = await event_log.load_snapshot(run_id, at_or_before=at_seq)
        state = decode_state(snapshot) if snapshot is not None else None
    state = state or RunState()
    async for event in event_log.read(run_id, after_seq=state.seq, upto_seq=at_seq):
        apply(state, event)
    if state.seq == 0:
        raise UnknownRunError(run_id, event_log.url)
    if at_seq is not None and state.seq < at_seq:
        raise ConfigError(f"run {run_id!r} has no seq {at_seq}; its last seq is {state.seq}")
    return state
