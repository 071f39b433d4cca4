"""The Redis log's queue reads, over its queue sets.

``P:qwait:...`` and ``P:qheld:...`` (see :mod:`agentlog.eventlog.redis._schema`)
list each queue's and each workflow's ``queued`` runs by rank and the
``queued`` or ``running`` runs holding a lease by its end. A queue's
admission (:meth:`QueueSets.read`) is then one atomic script that reads the
live range of the held sets and the first entries of the waiting sets, and
the hashes of those runs only: as many as the writers plus the runs wanted,
whatever the backlog. A log written before the sets existed (no
``P:queues-built``, which the read script checks) has them built from the
``queued`` and ``running`` runs (:meth:`QueueSets.build`); deleting that key
has the next read check every entry against its run's hash and build them
again (after a process of an older agentlog, which keeps no sets, wrote to
the log).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from agentlog.eventlog._base import RunInfo
from agentlog.eventlog._queue_slots import rank_of
from agentlog.eventlog._row_format import to_us
from agentlog.eventlog.events import RunStatus
from agentlog.eventlog.redis._rows import info_from_hash
from agentlog.eventlog.redis._schema import Keys

__all__ = ["QueueSets"]

_CHUNK = 500  # runs per BUILD_QUEUES call


def _glob_escaped(text: str) -> str:
    """``text`` matched literally in a SCAN pattern."""
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


def _infos(reply: Sequence[Any]) -> list[RunInfo]:
    """``[[run_id, [field, value, ...]], ...]`` as RunInfos (a run with no hash left out)."""
    found = []
    for raw_id, flat in reply:
        if flat:
            fields = dict(zip(flat[::2], flat[1::2], strict=True))
            found.append(info_from_hash(raw_id.decode(), fields))
    return found


class QueueSets:
    """Reads the queues of one Redis log (see the module docstring)."""

    def __init__(self, client: Any, keys: Keys, scripts: tuple[Any, Any, Any]) -> None:
        self._client, self._keys = client, keys
        self._build, self._check, self._read = scripts

    async def build(self) -> None:
        """Bring the queue sets in line with the run hashes: of a log written
        before they existed, or after an older agentlog (which keeps none)
        wrote to it. Each entry there is checked against its run's hash, then
        every queued and running run put in; each step is atomic per chunk
        and reads the hashes as they are then, so appends and claims meanwhile
        (which keep the sets) lose nothing, and two processes may build at once."""
        keys, pattern = self._keys, _glob_escaped(self._keys.prefix)
        for kind in ("wait", "held"):
            async for key in self._client.scan_iter(match=f"{pattern}:q{kind}:*"):
                members = [m async for m, _ in self._client.zscan_iter(key)]
                for start in range(0, len(members), _CHUNK):
                    chunk = members[start : start + _CHUNK]
                    await self._check(keys=[key], args=[keys.prefix, kind, *chunk])
        listed = await self._client.smembers(keys.status(RunStatus.QUEUED))
        listed |= await self._client.smembers(keys.status(RunStatus.RUNNING))
        run_ids = sorted(listed)
        for start in range(0, len(run_ids), _CHUNK):
            await self._build(keys=[], args=[keys.prefix, *run_ids[start : start + _CHUNK]])
        await self._client.set(keys.queues_built, "1")

    async def read(
        self, queue: str, workflows: Collection[str], now: datetime, limit: int
    ) -> tuple[list[RunInfo], list[RunInfo]]:
        """The queued or running runs of ``queue`` (or of ``workflows``) holding
        a live lease at ``now``, and its ``limit`` best-ranked queued runs that
        nobody holds; see ``SqlIndexedEventLog.queue_runs``."""
        names = sorted(set(workflows))
        keys = self._keys.queue_sets("held", queue, names)
        keys += self._keys.queue_sets("wait", queue, names)
        args = [self._keys.run(""), to_us(now), max(limit, 0), self._keys.queues_built]
        reply = await self._read(keys=keys, args=args)
        if not reply:  # not built: a log written before the sets, or a rebuild asked for
            await self.build()
            reply = await self._read(keys=keys, args=args)
        held, candidates = reply
        active = (RunStatus.QUEUED, RunStatus.RUNNING)
        holders = [
            info
            for info in _infos(held)
            if info.status in active and info.last_seq > 0 and info.lease_live(now)
        ]
        waiting = [
            info
            for info in _infos(candidates)
            if info.status == RunStatus.QUEUED and info.last_seq > 0 and not info.lease_live(now)
        ]
        waiting.sort(key=rank_of)
        return holders, waiting[: max(limit, 0)]
