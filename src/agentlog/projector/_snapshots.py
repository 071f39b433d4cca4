"""Snapshots: a run's folded state, saved so that resume reads only the tail.

Snapshots are a cache of ``fold(events)``; the events stay the truth. A
snapshot carries an xxHash3-64 checksum of its bytes inside its own
encoding, so every backend (SQLite's table, Kafka's runs topic) stores and
returns it unchanged. A snapshot that fails its checksum, does not decode,
was written in a format this version does not read, or whose chain has a
missing or changed link is never trusted: it is logged, and
:func:`load_state` falls back to the run's previous snapshot (backends keep
the last few), and in the end to the events alone.

The runtime's snapshots are a chain (``_snapshot_frames``): a list under the
``append`` reducer is stored once across them, each snapshot holding only the
items added since the one before, with a standalone base every
:attr:`SnapshotPolicy.base_every` snapshots. Loading one reads at most that
many snapshots, and never more events than the snapshot interval.

Load = the latest snapshot at or below the wanted seq, plus the events after
it. That bounds resume time and memory by the snapshot interval, not by the
run's length, and makes time travel (:func:`load_state` with ``at_seq``)
cheap for any seq that has a snapshot below it.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from agentlog._logging import get_logger
from agentlog.errors import ConfigError, CorruptEventError, UnknownRunError
from agentlog.eventlog._base import EventLog, EventReader, Snapshot
from agentlog.eventlog._indexed import ColdRead, IndexedEventLog
from agentlog.eventlog.codec import unpack
from agentlog.eventlog.events import RunStatus
from agentlog.projector._fold import apply
from agentlog.projector._reducers import Reducer
from agentlog.projector._row_fold import fold_rows
from agentlog.projector._snapshot_frames import (
    FORMAT,
    Frame,
    SnapshotChain,
    build_state,
    open_frame,
)
from agentlog.projector._state import RunState

__all__ = [
    "SNAPSHOT_FORMAT",
    "SnapshotChain",
    "SnapshotPolicy",
    "decode_state",
    "encode_state",
    "load_state",
    "save_state",
]

_log = get_logger("agentlog.projector")

#: The snapshot format written now. Bumped whenever RunState's shape or the
#: encoding changes; format 2 (checksummed, standalone) still loads. Format 3
#: added delta snapshots of append-only lists.
SNAPSHOT_FORMAT = FORMAT

#: What a snapshot that cannot be trusted raises while it is checked.
_UNUSABLE = (
    ValueError,
    TypeError,
    KeyError,
    AttributeError,
    IndexError,
    zlib.error,
    CorruptEventError,  # a part that inflates past its bound (packing.inflate)
)


@dataclass(frozen=True, slots=True)
class SnapshotPolicy:
    """When the runtime saves a snapshot, and how often one stands alone."""

    every: int = 200
    """Save after this many events since the last snapshot."""

    on_park: bool = True
    """Also save whenever the run parks on an interrupt or ends."""

    base_every: int = 16
    """Every this many snapshots, one stands alone; the ones between store
    only what append-only lists gained since the one before. 1 makes every
    snapshot standalone. A load reads at most this many snapshots."""

    def __post_init__(self) -> None:
        if isinstance(self.base_every, bool) or not isinstance(self.base_every, int):
            raise ConfigError(f"base_every must be a whole number; got {self.base_every!r}")
        if self.base_every < 1:
            raise ConfigError(f"base_every must be 1 or more; got {self.base_every}")

    def due(self, state: RunState, last_snapshot_seq: int) -> bool:
        """Whether ``state`` should be snapshotted now."""
        if state.seq <= last_snapshot_seq:
            return False
        if state.seq - last_snapshot_seq >= self.every:
            return True
        parked = state.status == RunStatus.WAITING or state.is_terminal
        return self.on_park and parked


def encode_state(state: RunState) -> bytes:
    """A RunState as the bytes of a standalone snapshot."""
    return SnapshotChain().encode(state).state


def _warn(snapshot: Snapshot, exc: BaseException) -> None:
    _log.warning(
        "snapshot ignored",
        run_id=snapshot.run_id,
        seq=snapshot.seq,
        reason=f"{type(exc).__name__}: {exc}",
    )


def _foreign(snapshot: Snapshot) -> bool:
    """True for another component's snapshot (its format is a name, such as
    the LangGraph saver's ``agentlog.langgraph/2``): not a bad one, not ours."""
    try:
        frame = unpack(snapshot.state)
    except _UNUSABLE:
        return False
    return isinstance(frame, dict) and isinstance(frame.get("format"), str)


def decode_state(snapshot: Snapshot) -> RunState | None:
    """The RunState in a standalone snapshot, or None (logged) if it cannot be
    trusted alone (a delta needs its chain: :func:`load_state` follows it), or
    is another component's (the LangGraph saver's: its run folds from events)."""
    if _foreign(snapshot):
        _log.info("snapshot is not the projector's", run_id=snapshot.run_id, seq=snapshot.seq)
        return None
    try:
        frame = open_frame(snapshot)
        if frame.parent is not None:  # not bad: load_state follows its chain
            _log.info("snapshot needs its chain", run_id=snapshot.run_id, seq=snapshot.seq)
            return None
        return build_state([frame], snapshot.run_id)
    except _UNUSABLE as exc:
        _warn(snapshot, exc)
        return None


async def _chain_state(
    log: EventReader, snapshot: Snapshot, fetched: ColdRead | None = None
) -> RunState | None:
    """The state in ``snapshot``, following its chain down to its base; None
    (logged) if any link is missing, corrupt or does not fit. A link is taken
    from ``fetched`` where it holds it, else read from ``log``."""
    chain: list[Frame] = []
    link: Snapshot | None = snapshot
    try:
        while link is not None:
            frame = open_frame(link)
            chain.append(frame)
            if frame.parent is None:
                break
            parent_seq = frame.parent[0]
            if parent_seq >= link.seq:
                raise ValueError(f"parent snapshot {parent_seq} is not older")
            link = None if fetched is None else fetched.snapshot_at_or_before(parent_seq)
            if link is None:
                link = await log.load_snapshot(snapshot.run_id, at_or_before=parent_seq)
            if link is None or link.seq != parent_seq:
                raise ValueError(f"the chain's snapshot {parent_seq} is missing")
        return build_state(chain, snapshot.run_id)
    except _UNUSABLE as exc:
        _warn(snapshot, exc)
        return None


async def _latest_good_state(log: EventReader, run_id: str, at_seq: int | None) -> RunState:
    """The newest snapshot at or before ``at_seq`` that passes its checks, else an empty state."""
    bound = at_seq
    while True:
        snapshot = await log.load_snapshot(run_id, at_or_before=bound)
        if snapshot is None or _foreign(snapshot):
            return RunState()  # the run's snapshots are another component's: fold its events
        state = await _chain_state(log, snapshot)
        if state is not None:
            return state
        if snapshot.seq <= 1:
            return RunState()
        bound = snapshot.seq - 1  # fall back to the previous one


async def _cold_state(
    log: IndexedEventLog,
    run_id: str,
    at_seq: int | None,
    use_snapshots: bool,
    reducers: Mapping[str, Reducer] | None,
) -> RunState | None:
    """The state from the log's one-statement read of the newest snapshot and
    the rows after it (:meth:`~agentlog.eventlog._indexed.IndexedEventLog.cold_read`);
    None where that read does not serve (the backend cannot, the run is out
    of the ordinary, the newest snapshot is another component's): the caller
    reads hook by hook. A newest snapshot that cannot be trusted falls back
    to the previous ones, and to the events, as :func:`_latest_good_state`."""
    cold = log.cold_read(run_id, upto_seq=at_seq, snapshots=use_snapshots)
    if cold is None:
        return None
    state = RunState()
    if cold.snapshots:
        top = cold.snapshots[0]
        if _foreign(top):
            return None
        found = await _chain_state(log, top, cold)
        if found is None:  # logged: the previous snapshot, and the rows from there
            state = await _latest_good_state(log, run_id, top.seq - 1) if top.seq > 1 else state
            async for rows in log.read_rows(run_id, after_seq=state.seq, upto_seq=at_seq):
                fold_rows(state, run_id, rows, reducers, log.url, log.cipher)
            return state
        state = found
    if cold.rows:
        fold_rows(state, run_id, cold.rows, reducers, log.url, log.cipher)
    if not cold.complete:
        async for rows in log.read_rows(run_id, after_seq=state.seq, upto_seq=at_seq):
            fold_rows(state, run_id, rows, reducers, log.url, log.cipher)
    return state


async def save_state(log: EventLog, state: RunState) -> None:
    """Save ``state`` as the run's newest snapshot (a standalone one)."""
    await log.save_snapshot(SnapshotChain().encode(state))


async def load_state(
    log: EventReader,
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
    if isinstance(log, IndexedEventLog) and log.reads_rows:
        state = await _cold_state(log, run_id, at_seq, use_snapshots, reducers)
        if state is None:
            state = await _latest_good_state(log, run_id, at_seq) if use_snapshots else RunState()
            # stored rows, folded without building the events the fold only skims
            async for rows in log.read_rows(run_id, after_seq=state.seq, upto_seq=at_seq):
                fold_rows(state, run_id, rows, reducers, log.url, log.cipher)
    else:
        state = await _latest_good_state(log, run_id, at_seq) if use_snapshots else RunState()
        async for event in log.read(run_id, after_seq=state.seq, upto_seq=at_seq):
            apply(state, event, reducers)
    if state.seq == 0:
        raise UnknownRunError(run_id, log.url)
    if at_seq is not None and state.seq < at_seq:
        raise ConfigError(f"run {run_id!r} has no seq {at_seq}; its last seq is {state.seq}")
    return state
