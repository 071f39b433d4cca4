"""What an owned partition's writes are made of: a run's tail, and one caller's change.

A :class:`RunTail` is what the partition's owner knows to be true of one run;
a :class:`Change` is one caller's write, committed by
:class:`~agentlog.eventlog.kafka._ownership.PartitionOwner` with whatever else
is queued for the partition. They are plain records, here beneath both the
owner and :mod:`~agentlog.eventlog.kafka._offsets`, which reads changes.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from agentlog.eventlog._base import RunInfo
from agentlog.eventlog.events import Event, RunStatus, utcnow
from agentlog.eventlog.kafka._records import IndexEntry

__all__ = ["Change", "RecentEvents", "RunTail"]

_DRIVEN = frozenset({RunStatus.RUNNING, RunStatus.QUEUED})

#: Events kept per run for its owner's reads (a just-started run has two or three).
RECENT_PER_RUN = 8


@dataclass(frozen=True, slots=True)
class RunTail:
    """What the owner knows to be true of one run (nobody else writes it)."""

    info: RunInfo
    first_offset: int = -1
    offset: int = -1
    has_entry: bool = False
    archived_seq: int = 0
    pruned: bool = False
    since_index: int = 0

    @classmethod
    def of(cls, entry: IndexEntry) -> RunTail:
        """The tail of an exact index entry, read when the partition was opened."""
        # The previous owner is fenced: its lease means nothing here. A lease it
        # still held ended now at the latest (a lapsed lease: a worker that goes
        # on with the run counts a takeover); one it let go stays none.
        expires = entry.info.lease_expires_at
        expires = None if expires is None else min(expires, utcnow())
        info = dataclasses.replace(entry.info, lease_owner="", lease_expires_at=expires)
        return cls(
            info,
            entry.first_offset,
            entry.offset,
            True,
            entry.archived_seq,
            entry.pruned,
        )

    @property
    def may_need_worker(self) -> bool:
        """Whether a worker's pass must look at the run: running, queued, or
        waiting on a timer. A parked run (waiting on an answer only) and an
        ended one need nothing until a command names them."""
        status = self.info.status
        return status in _DRIVEN or (status == RunStatus.WAITING and self.info.wake_at is not None)

    def entry(self, partition: int) -> IndexEntry:
        """The index entry that records this tail."""
        return IndexEntry(
            self.info,
            partition,
            self.first_offset,
            self.offset,
            self.pruned,
            self.archived_seq,
        )


@dataclass(eq=False)
class Change:
    """One caller's write, committed with whatever else is queued for the partition."""

    run_id: str
    """The run it changes; empty for an offsets-only change (a command ack)."""
    stage: Callable[[RunTail], RunTail] = lambda tail: tail
    """Checks the change against the run's tail (raising to refuse it, with
    nothing sent) and returns the tail after it."""
    events: list[tuple[Event, bytes]] = field(default_factory=list)
    records: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    """Extra runs-topic records (snapshots, tombstones), keyed."""
    index: bool = False
    """Write the run's index entry in this transaction (claims, leases, prunes)."""
    answers: dict[int, bytes | None] = field(default_factory=dict)
    """Commands this change finishes with no event of theirs (a runtime's ack, a
    queue admitter's answers): offset -> the reply to send (None: refused). Only
    this change's transaction sends them, and only for commands still outstanding
    then: none outlives a failed commit or a reopened owner."""
    done: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    def settle(self, error: BaseException | None = None) -> None:
        if self.done.done():
            return
        if error is None:
            self.done.set_result(None)
        else:
            self.done.set_exception(error)


class RecentEvents:
    """The last few events the owner committed for each run, as the bytes it sent.

    Driving a run it just started (or took over a moment ago), the owner
    reads the run back; from the broker that is a serialized fetch of its
    partition, which capped a worker near 14 starts a second. The owner is
    the only writer of its partition's runs, so the bytes of its own commits
    are the run's events: a read they cover is decoded from them (checksum
    verified, seals opened, as a broker read), with no round trip. Bounded
    per run (:data:`RECENT_PER_RUN`); dropped when the run parks (waits on an
    answer only), ends or is pruned, and all at once when the partition is
    reopened or closed: a parked run needs nothing until a command names it
    (the commit of its answer keeps the events from there on).
    """

    def __init__(self) -> None:
        self._runs: dict[str, list[tuple[int, bytes]]] = {}

    def committed(self, run_id: str, events: list[tuple[Event, bytes]], tail: RunTail) -> None:
        """Remember ``events``, just committed for ``run_id``, whose tail is now ``tail``."""
        if tail.pruned or not tail.may_need_worker:  # parked or ended
            self._runs.pop(run_id, None)
            return
        kept = self._runs.get(run_id, [])
        if kept and kept[-1][0] + 1 != events[0][0].seq:
            kept = []  # never a gap: start again from these
        kept = [*kept, *((event.seq, value) for event, value in events)]
        self._runs[run_id] = kept[-RECENT_PER_RUN:]

    def forget(self, run_id: str | None = None) -> None:
        """Drop one run's events (a prune), or every run's (None: reopened, closed)."""
        if run_id is None:
            self._runs.clear()
        else:
            self._runs.pop(run_id, None)

    def covering(
        self, tail: RunTail, after_seq: int, upto_seq: int | None
    ) -> list[tuple[int, bytes]] | None:
        """The run's events with ``after_seq < seq <= upto_seq``, if all are kept; else None."""
        last = tail.info.last_seq
        if tail.pruned or tail.archived_seq or last <= 0:
            return None
        kept = self._runs.get(tail.info.run_id)
        if not kept or kept[-1][0] != last or kept[0][0] > after_seq + 1:
            return None
        end = last if upto_seq is None else min(upto_seq, last)
        return [(seq, value) for seq, value in kept if after_seq < seq <= end]
