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
from agentlog.eventlog.events import Event
from agentlog.eventlog.kafka._records import IndexEntry

__all__ = ["Change", "RunTail"]


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
        # The previous owner is fenced: its lease means nothing here.
        info = dataclasses.replace(entry.info, lease_owner="", lease_expires_at=None)
        return cls(
            info,
            entry.first_offset,
            entry.offset,
            True,
            entry.archived_seq,
            entry.pruned,
        )

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
