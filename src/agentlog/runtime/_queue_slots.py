"""A driver's queue slots on a log whose runs are owned per partition (Kafka).

There the run index cannot count a queue (no worker sees the others'
claims), so a driver asks the queue's admitter for a slot before it drives a
queued run (see :mod:`agentlog.eventlog._queue_slots` and
docs/queues.md, "Kafka"): every time it claims one, a first start as a
resume or a takeover, and it renews the slot with the run's lease. A first
admission's ``RunAdmitted`` carries the grant's time, the time the admitter
counted against the rate. The slot is let go when the run's driver stops
(it parked, ended, was handed over or failed).

A renewal the admitter refuses (the slot lapsed, and its room went to
another run) stops the run as a fence does: the run lets go and asks again.
A renewal that gets no answer is a renewal that failed: the run's lease
deadline is not moved, so it starts no effect past the slot it was given.
"""

from __future__ import annotations

from datetime import datetime

from agentlog._logging import get_logger
from agentlog.errors import BackendUnavailableError, FencedError
from agentlog.eventlog._queue_slots import QueueSlots, SlotAsk
from agentlog.eventlog.events import RunAdmitted
from agentlog.runtime._queues import Queue

__all__ = ["SlotKeeper", "SlotLostError"]

_log = get_logger("agentlog.runtime")


class SlotLostError(FencedError):
    """The run's queue slot lapsed and went to another run: its writer stops."""

    def __init__(self, run_id: str, queue: str, epoch: int) -> None:
        FencedError.__init__(self, run_id, epoch, epoch)
        self.args = (
            f"run {run_id!r}: its slot in queue {queue!r} lapsed (not renewed within the "
            "lease) and its room may have gone to another run; this writer stops and the "
            "run waits for room again.",
        )

    def __str__(self) -> str:
        return str(self.args[0])


class SlotKeeper:
    """The queue slots this process's drivers hold, by run id."""

    def __init__(self, log: QueueSlots, lease_seconds: float) -> None:
        self._log, self._lease = log, lease_seconds
        self._held: dict[str, SlotAsk] = {}
        self._granted: dict[str, datetime] = {}

    async def ask(
        self,
        queue: Queue,
        run_id: str,
        admitted: bool,
        priority: int,
        started: datetime | None,
        epoch: int,
    ) -> RunAdmitted | bool:
        """May the run, claimed here, be driven now? As
        :func:`~agentlog.runtime._queue_admission.admit`: False (not now),
        True (yes, admitted before), or a RunAdmitted (first admission)."""
        rate = queue.rate
        ask = SlotAsk(
            queue.name,
            run_id,
            self._lease,
            not admitted,
            priority,
            started,
            queue.concurrency,
            None if rate is None else rate.runs,
            None if rate is None else rate.per.total_seconds(),
            epoch,
        )
        try:
            grant = await self._log.hold_slot(ask)
        except BackendUnavailableError as exc:  # no admitter now: it stays queued, asked again
            _log.info("queue slot not granted", run_id=run_id, queue=queue.name, error=str(exc))
            return False
        if grant is None:
            return False
        self._held[run_id] = SlotAsk(
            queue.name,
            run_id,
            self._lease,
            False,
            priority,
            started,
            queue.concurrency,
            epoch=epoch,
        )
        if admitted:
            return True
        self._granted[run_id] = grant.granted_at
        return RunAdmitted(queue.name)

    def granted_at(self, run_id: str) -> datetime | None:
        """The grant time of the run's first admission (its RunAdmitted's time), once."""
        return self._granted.pop(run_id, None)

    async def renew(self, run_id: str, epoch: int) -> None:
        """Keep the run's slot, if it holds one.

        Raises:
            SlotLostError: the admitter refused: the slot lapsed meanwhile.
            BackendUnavailableError: no answer within the lease.
        """
        ask = self._held.get(run_id)
        if ask is not None and await self._log.hold_slot(ask) is None:
            self._held.pop(run_id, None)
            raise SlotLostError(run_id, ask.queue, epoch)

    async def release(self, run_id: str) -> None:
        """Let go of the run's slot, if it holds one (a lost release lapses)."""
        self._granted.pop(run_id, None)
        ask = self._held.pop(run_id, None)
        if ask is not None:
            try:
                await self._log.release_slot(ask.queue, run_id, ask.epoch)
            except Exception:  # the slot lapses after one lease instead
                return
