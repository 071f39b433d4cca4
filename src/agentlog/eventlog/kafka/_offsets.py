"""Which commands an owned partition handed out, finished, and may commit as consumed.

A command taken from commands partition p is *outstanding* until it is
finished: applied (its effect, the event it asks for, is committed) or
refused (acked with no effect). The transaction that finishes it also
commits the partition's consumed position and carries the owner's reply to
it (see :mod:`~agentlog.eventlog.kafka._ownership` and
:mod:`~agentlog.eventlog.kafka._commands`).
"""

from __future__ import annotations

from agentlog.eventlog.kafka._changes import Change

__all__ = ["CommandOffsets"]

#: The broker keeps commit metadata up to offset.metadata.max.bytes (4096 by default).
_METADATA_BYTES = 3000


class CommandOffsets:
    """The commands taken from one commands partition and the offset to commit.

    Kafka keeps one committed position per partition, so the position is the
    lowest command still outstanding; the commands done above it are listed
    in the commit's metadata (``done:<offset>,...``), committed in the same
    transactions, so that the partition's next owner skips them too. Past
    :data:`_METADATA_BYTES` (about 370 offsets of 7 digits above a command
    still outstanding) the list keeps the transaction's own commands first,
    then the newest others: the lowest are left out. An owner reopened after
    a commit in doubt keeps its own list (:meth:`reopened`), so it skips them
    still; the partition's *next* owner hands them out again: never lost, but
    a runtime command is then refused (its effect is recorded) with a second
    reply, and a queue's ask is decided again.
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

    def seed(self, committed: int, metadata: str) -> None:
        """Start from the group's committed offset and metadata (a new owner)."""
        self.committed = max(committed, -1)
        if committed >= 0:
            self.next = committed
        head, _, listed = metadata.partition(":")
        if head == "done" and listed:
            self.done_above = {int(o) for o in listed.split(",") if o.isdigit()}

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

    def skip(self, offset: int) -> bool:
        """Whether the record at ``offset`` was handed out or done already."""
        return (self.next is not None and offset < self.next) or offset in self.done_above

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
        """The commit metadata: the commands done at or above ``position``.

        Past the cap, this transaction's own (``done``) are listed first, then
        the newest of the others: the lowest are left out first.
        """
        own = sorted(o for o in done if o >= position)
        others = sorted((o for o in self.done_above - done if o >= position), reverse=True)
        listed, size = [], len("done:")
        for offset in [*own, *others]:
            size += len(str(offset)) + 1
            if size > _METADATA_BYTES:
                break
            listed.append(str(offset))
        return "done:" + ",".join(listed)

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
