"""Which commands an owned partition handed out, finished, and may commit as consumed.

A command taken from commands partition p is *outstanding* until it is
finished: applied (its effect, the event it asks for, is committed) or
refused (acked with no effect). The transaction that finishes it also
commits the partition's consumed position and carries the owner's reply to
it (see :mod:`~agentlog.eventlog.kafka._ownership` and
:mod:`~agentlog.eventlog.kafka._commands`).
"""

from __future__ import annotations

from bisect import bisect_right

from agentlog.eventlog.kafka._changes import Change

__all__ = ["CommandOffsets"]

#: The broker keeps commit metadata up to offset.metadata.max.bytes (4096 by default).
_METADATA_BYTES = 3000


class CommandOffsets:
    """The commands taken from one commands partition and the offset to commit.

    Kafka keeps one committed position per partition, so the position is the
    lowest command still outstanding; the commands done above it are listed
    in the commit's metadata, committed in the same transactions, so that the
    partition's next owner skips them too. The list is of ranges
    (``done:<first>-<last>,<offset>,...``): a range spans every offset
    between two done commands that no command still outstanding sits in (the
    owner's replies, unreadable commands, commands done), so its length is
    set by the commands still outstanding above the position, not by the
    commands done: any number done above one command still outstanding is
    one range. Past :data:`_METADATA_BYTES` (about 180 ranges of 7-digit
    offsets, so only with more than that many commands outstanding at once
    above the lowest, each between commands done) the list keeps the ranges
    of the transaction's own commands first, then the newest others: the
    lowest are left out. An owner reopened after a commit in doubt keeps its
    own list (:meth:`reopened`), so it skips them still; the partition's
    *next* owner hands them out again: never lost, but a runtime command is
    then refused (its effect is recorded) with a second reply, and a queue's
    ask is decided again.
    """

    def __init__(self) -> None:
        #: offset -> (run id, the event type that records its effect), lowest offset first
        self.outstanding: dict[int, tuple[str, str]] = {}
        #: The offsets of ``outstanding`` by (run id, event type), lowest first: a
        #: commit looks at the commands of its own runs only, never at a backlog.
        self._waiting: dict[tuple[str, str], list[int]] = {}
        self.next: int | None = None
        self.committed = -1
        self.done_above: set[int] = set()
        #: Ranges (first, last) done by the partition's owners before this one (the
        #: seeded metadata), lowest first: a range is never expanded into offsets.
        self.done_ranges: list[tuple[int, int]] = []

    def seed(self, committed: int, metadata: str) -> None:
        """Start from the group's committed offset and metadata (a new owner)."""
        self.committed = max(committed, -1)
        if committed >= 0:
            self.next = committed
        head, _, listed = metadata.partition(":")
        if head == "done" and listed:
            self.done_ranges = _merged(_parsed(listed))

    def reopened(self, before: CommandOffsets) -> None:
        """Go on from ``before`` (this ownership's offsets before a reopen), once
        seeded from the group's commit as the settled transaction left it.

        Commands still handed out stay outstanding, but not those the settled
        transaction finished (consumed: their replies are on record, never
        twice). The commands handed out before stay skipped: a rebalance that
        keeps the partition fetches again from the committed offset, and
        those must not be handed out a second time in this ownership.
        """
        self.restore({o: k for o, k in before.outstanding.items() if not self.skip(o)})
        if before.next is not None and (self.next is None or before.next > self.next):
            self.next = before.next
        # Done in transactions that landed before the doubt (the metadata may list
        # fewer: its cap); the settled one's own are in the seeded metadata if it landed.
        self.done_above |= {o for o in before.done_above if o >= self.committed}
        ranges = [(max(lo, self.committed), hi) for lo, hi in before.done_ranges]
        self.done_ranges = _merged(self.done_ranges + [r for r in ranges if r[1] >= r[0]])

    def skip(self, offset: int) -> bool:
        """Whether the record at ``offset`` was handed out or done already."""
        if (self.next is not None and offset < self.next) or offset in self.done_above:
            return True
        ranges = self.done_ranges
        i = bisect_right(ranges, (offset, offset)) - 1
        if i + 1 < len(ranges) and ranges[i + 1][0] == offset:
            i += 1
        return i >= 0 and ranges[i][0] <= offset <= ranges[i][1]

    def taken(self, offset: int, run_id: str = "", event_type: str = "") -> None:
        """A record was handed out (or skipped, with no run: an unreadable command)."""
        if run_id:
            if self.outstanding and offset < next(reversed(self.outstanding)):
                self.restore({offset: (run_id, event_type)})  # never in this order, but kept
            else:
                self.outstanding[offset] = (run_id, event_type)
                self._waiting.setdefault((run_id, event_type), []).append(offset)
        self.next = offset + 1

    def restore(self, outstanding: dict[int, tuple[str, str]]) -> None:
        """Keep ``outstanding`` (commands still handed out) as outstanding here too."""
        merged = {**self.outstanding, **outstanding}
        self.outstanding = dict(sorted(merged.items()))
        self._waiting = {}
        for offset, key in self.outstanding.items():
            self._waiting.setdefault(key, []).append(offset)

    def matched(self, changes: list[Change]) -> dict[int, bool]:
        """The outstanding commands these changes finish: offset -> applied.

        Each event of these changes is the effect of one command, the oldest
        outstanding one of its run that asks for that event type (applied):
        the runtime applies a run's commands in order. So of two answers to
        one interrupt, the second stays outstanding until the runtime acks
        it, refused. The commands of a change's ``answers`` are finished with no
        effect (refused, or a queue admitter's answer).
        """
        if not self.outstanding:
            return {}
        # Only the events some outstanding command asks for: a transaction's
        # other events (most of them, under load) finish nothing.
        waiting = self._waiting
        effects: dict[tuple[str, str], int] = {}
        for change in changes:
            for event, _ in change.events:
                key = (change.run_id, event.type)
                if key in waiting:
                    effects[key] = effects.get(key, 0) + 1
        done = {o: False for c in changes for o in c.answers if o in self.outstanding}
        for key, count in effects.items():
            for offset in self._waiting.get(key, ()):
                if count <= 0:
                    break
                if offset not in done:
                    count -= 1
                    done[offset] = True
        return done

    def position(self, done: set[int]) -> int | None:
        """The offset to commit once ``done`` are: the lowest one still outstanding."""
        for offset in self.outstanding:  # lowest first: stops at the first not done
            if offset not in done:
                return offset
        return self.next

    def due(self, position: int | None, done: set[int]) -> bool:
        """Whether a commit of ``done`` at ``position`` changes what the group has."""
        return position is not None and (position > self.committed or bool(done))

    def metadata(self, position: int, done: set[int]) -> str:
        """The commit metadata: the commands done at or above ``position``, as ranges.

        Two done ranges join when no command still outstanding sits between
        them and the offsets between were read (below :attr:`next`). Past the
        cap, the ranges of this transaction's own (``done``) are listed
        first, then the newest of the others: the lowest are left out first.
        """
        own = sorted(o for o in done if o >= position)
        singles = [(o, o) for o in sorted(self.done_above | done) if o >= position]
        seeded = [(max(lo, position), hi) for lo, hi in self.done_ranges if hi >= position]
        # One C-level copy, no Python line per outstanding command (see the tests).
        pending = list(self.outstanding)
        ranges: list[tuple[int, int]] = []
        for lo, hi in _merged(seeded + singles):
            if ranges and self._joinable(ranges[-1][1], lo, pending, done):
                ranges[-1] = (ranges[-1][0], max(hi, ranges[-1][1]))
            else:
                ranges.append((lo, hi))
        first = [r for r in ranges if _holds(r, own)]
        others = sorted((r for r in ranges if not _holds(r, own)), reverse=True)
        listed, size = [], len("done:")
        for lo, hi in [*first, *others]:
            size += len(_item(lo, hi)) + 1
            if size > _METADATA_BYTES:
                break
            listed.append((lo, hi))
        return "done:" + ",".join(_item(lo, hi) for lo, hi in sorted(listed))

    def _joinable(self, last: int, lo: int, pending: list[int], done: set[int]) -> bool:
        """Whether every offset between ``last`` and ``lo`` may be skipped: read,
        and none a command still outstanding once ``done`` are finished."""
        if lo <= last + 1:
            return True
        if self.next is None or lo - 1 >= self.next:
            return False  # not read yet: a command may be there
        i = bisect_right(pending, last)
        while i < len(pending) and pending[i] < lo:
            if pending[i] not in done:
                return False
            i += 1
        return True

    def commit(self, position: int | None, done: set[int]) -> None:
        for offset in done:
            key = self.outstanding.pop(offset, None)
            if key is not None:
                waiting = self._waiting[key]
                waiting.remove(offset)
                if not waiting:
                    del self._waiting[key]
        if position is not None:
            self.committed = max(self.committed, position)
        self.done_above = {o for o in self.done_above | done if o >= self.committed}
        if self.done_ranges and self.done_ranges[0][1] < self.committed:
            self.done_ranges = [r for r in self.done_ranges if r[1] >= self.committed]


def _parsed(listed: str) -> list[tuple[int, int]]:
    """The ranges of a ``done:`` list (``<first>-<last>`` or ``<offset>``); junk is ignored."""
    out = []
    for item in listed.split(","):
        lo, _, hi = item.partition("-")
        if lo.isdigit() and (hi.isdigit() or not hi):
            first, last = int(lo), int(hi or lo)
            if first <= last:
                out.append((first, last))
    return out


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``ranges`` sorted, with overlapping and adjacent ones joined."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(hi, out[-1][1]))
        else:
            out.append((lo, hi))
    return out


def _item(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _holds(rng: tuple[int, int], offsets: list[int]) -> bool:
    """Whether ``rng`` holds one of ``offsets`` (sorted)."""
    i = bisect_right(offsets, rng[1]) - 1
    return i >= 0 and offsets[i] >= rng[0]
