"""Snapshots: a run's folded state, saved so that resume reads only the tail.

Snapshots are a cache of ``fold(events)``; the events stay the truth. A
snapshot carries an xxHash3-64 checksum of its state bytes inside its own
encoding, so every backend (SQLite's table, Kafka's runs topic) stores and
returns it unchanged. A snapshot that fails its checksum, does not decode,
or was written in an older snapshot format is never trusted: it is logged,
and :func:`load_state` falls back to the run's previous snapshot (backends
keep the last few), and in the end to the events alone.

Load = the latest snapshot at or below the wanted seq, plus the events after
it. That bounds resume time and memory by the snapshot interval, not by the
run's length, and makes time travel (:func:`load_state` with ``at_seq``)
cheap for any seq that has a snapshot below it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agentlog._logging import get_logger
from agentlog.errors import ConfigError, UnknownRunError
from agentlog.eventlog.base import EventLog, Snapshot
from agentlog.eventlog.codec import checksum, pack, unpack
from agentlog.eventlog.events import RunStatus, utcnow
from agentlog.projector.fold import apply
from agentlog.projector.reducers import Reducer
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

#: Bumped whenever RunState's shape or the snapshot encoding changes; older
#: snapshots are ignored. Format 2 added the checksum.
SNAPSHOT_FORMAT = 2


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
    """A RunState as snapshot bytes: ``{"format", "state": bytes, "checksum"}``."""
    body = pack(state.to_dict(), path="snapshot")
    return pack({"format": SNAPSHOT_FORMAT, "state": body, "checksum": checksum(body)})


def _verified_state(snapshot: Snapshot) -> RunState:
    """The state in a snapshot; ValueError (and friends) saying why it is unusable."""
    frame = unpack(snapshot.state)
    if not isinstance(frame, dict):
        raise ValueError("snapshot is not a map")
    if frame.get("format") != SNAPSHOT_FORMAT:
        raise ValueError(f"snapshot format {frame.get('format')!r} != {SNAPSHOT_FORMAT}")
    body = frame.get("state")
    if not isinstance(body, bytes) or frame.get("checksum") != checksum(body):
        raise ValueError("checksum mismatch: the snapshot changed after it was written")
    state = RunState.from_dict(unpack(body))
    if state.seq != snapshot.seq or state.run_id != snapshot.run_id:
        raise ValueError("snapshot seq or run does not match its row")
    return state


def decode_state(snapshot: Snapshot) -> RunState | None:
    """The RunState in a snapshot, or None (logged) if it cannot be trusted."""
    try:
        return _verified_state(snapshot)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        log.warning(
            "snapshot ignored",
            run_id=snapshot.run_id,
            seq=snapshot.seq,
            reason=f"{type(exc).__name__}: {exc}",
        )
        return None


async def _latest_good_state(event_log: EventLog, run_id: str, at_seq: int | None) -> RunState:
    """The newest snapshot at or before ``at_seq`` that passes its checks, else an empty state."""
    bound = at_seq
    while True:
        snapshot = await event_log.load_snapshot(run_id, at_or_before=bound)
        if snapshot is None:
            return RunState()
        state = decode_state(snapshot)
        if state is not None:
            return state
        if snapshot.seq <= 1:
            return RunState()
        bound = snapshot.seq - 1  # fall back to the previous one


async def save_state(event_log: EventLog, state: RunState) -> None:
    """Save ``state`` as the run's newest snapshot."""
    await event_log.save_snapshot(Snapshot(state.run_id, state.seq, encode_state(state), utcnow()))


async def load_state(
    event_log: EventLog,
    run_id: str,
    *,
    at_seq: int | None = None,
    use_snapshots: bool = True,
    reducers: Mapping[str, Reducer] | None = None,
) -> RunState:
    """The run's state at ``at_seq`` (default: now): snapshot + tail.

    ``reducers`` is the reducer table to fold with (a workflow's own); None
    means the registered ones.

    Raises:
        UnknownRunError: nothing was recorded for ``run_id``.
        RunArchivedError: the events needed were pruned into the archive.
        ConfigError: ``at_seq`` is not a seq, or is beyond the run's last event.
        CorruptEventError, ReplayError: a recorded event cannot be folded, or
            a seq is missing.
    """
    if at_seq is not None and (
        not isinstance(at_seq, int) or isinstance(at_seq, bool) or at_seq < 1
    ):
        raise ConfigError(f"seq must be a whole number, 1 or more; got {at_seq!r}")
    state = await _latest_good_state(event_log, run_id, at_seq) if use_snapshots else RunState()
    async for event in event_log.read(run_id, after_seq=state.seq, upto_seq=at_seq):
        apply(state, event, reducers)
    if state.seq == 0:
        raise UnknownRunError(run_id, event_log.url)
    if at_seq is not None and state.seq < at_seq:
        raise ConfigError(f"run {run_id!r} has no seq {at_seq}; its last seq is {state.seq}")
    return state
