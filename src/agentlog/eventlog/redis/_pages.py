"""The Redis log's run list, paged in the server over its order sets.

``P:order`` and ``P:order:STATUS`` (see :mod:`agentlog.eventlog.redis._schema`)
hold every run with an event, scored by ``-updated_at``: ascending order is
the run list's. A :class:`~agentlog.eventlog._run_pages.RunQuery` by status,
time range and rank (``before``) is then answered without reading every run:
the page's ids are one ZRANGEBYSCORE with LIMIT, the counts one ZCOUNT per
status, and only the page's run hashes are read. A query by workflow or run
id text, which no set orders, reads the rows of its time range and pages
them in memory (:func:`~agentlog.eventlog._run_pages.page_in_memory`); a query
by run ids reads only those runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentlog.eventlog._row_format import epoch_us
from agentlog.eventlog._run_pages import RunQuery
from agentlog.eventlog.events import RunStatus
from agentlog.eventlog.redis._schema import Keys

__all__ = ["RunOrder"]

_CHUNK = 500  # runs per BUILD_ORDER call
_STATUSES = tuple(str(status) for status in RunStatus)


def _score(moment: datetime | None) -> int:
    """A run's order score: minus its update time in microseconds (0 for none)."""
    return 0 if moment is None else -epoch_us(moment)


@dataclass(frozen=True, slots=True)
class _Range:
    """The scores a query covers: ``low < score <= high`` (``low`` None: no
    floor), and at ``high`` only run ids below ``tie`` (None: every one)."""

    low: int | None
    high: int | None
    tie: str | None

    def bounds(self, *, below_tie: bool = False) -> tuple[str, str]:
        """ZRANGEBYSCORE's min and max; ``below_tie`` leaves ``high`` itself out
        when only some ids at it are in (they are counted apart)."""
        low = "-inf" if self.low is None else f"({self.low}"
        if self.high is None:
            return low, "+inf"
        return low, f"({self.high}" if below_tie and self.tie is not None else str(self.high)


def _range(query: RunQuery) -> _Range:
    # updated >= since: score <= -since; updated < until: score > -until.
    low = None if query.until is None else _score(query.until)
    high = None if query.since is None else _score(query.since)
    tie = None
    if query.before is not None:
        at = _score(query.before[0])
        if high is None or at <= high:
            high, tie = at, query.before[1]
        if low is not None and at <= low:
            tie = None  # the rank's own time is past the range: no tie is in it
    return _Range(low, high, tie)


class RunOrder:
    """Pages the run list of one Redis log (see the module docstring)."""

    def __init__(self, client: Any, keys: Keys, build: Any) -> None:
        self._client, self._keys, self._build = client, keys, build
        self._built = False

    async def ensure(self) -> None:
        """Build the order sets of a log written before they existed, once."""
        if self._built:
            return
        keys = self._keys
        if await self._client.get(keys.order_built) is None:
            run_ids = sorted(await self._client.smembers(keys.runs))
            run_prefix = keys.run("")
            for start in range(0, len(run_ids), _CHUNK):
                chunk = run_ids[start : start + _CHUNK]
                await self._build(keys=[keys.order], args=[run_prefix, *chunk])
            await self._client.set(keys.order_built, "1")
        self._built = True

    async def in_range(self, query: RunQuery) -> list[bytes]:
        """The ids of every run in the query's time range, for a query the
        order sets cannot answer (by workflow or id text)."""
        low, high = _range(query).bounds()
        ids: list[bytes] = await self._client.zrangebyscore(self._keys.order, low, high)
        return ids

    async def page(self, query: RunQuery) -> tuple[list[bytes], dict[str, int]]:
        """The page's run ids, in order, and the counts by status.

        Only for a query with no workflow, text or run ids filter.
        """
        scores = _range(query)
        keys = self._keys
        async with self._client.pipeline(transaction=False) as pipe:
            for status in _STATUSES:
                pipe.zcount(keys.order_in(status), *scores.bounds(below_tie=True))
                if scores.tie is not None:
                    pipe.zrangebyscore(keys.order_in(status), scores.high, scores.high)
            if query.limit:
                key = keys.order if query.status is None else keys.order_in(query.status)
                pipe.zrangebyscore(
                    key, *scores.bounds(), start=query.offset, num=query.limit, withscores=True
                )
            replies = await pipe.execute()
        counts: dict[str, int] = {}
        for status in _STATUSES:
            n = int(replies.pop(0))
            if scores.tie is not None:
                n += sum(1 for member in replies.pop(0) if member.decode() < scores.tie)
            if n:
                counts[status] = n
        ids = []
        for member, score in replies[0] if query.limit else []:
            tie = scores.tie
            if tie is not None and int(score) == scores.high and member.decode() >= tie:
                break  # ties at the rank's own time sort after the ones below its id
            ids.append(member)
        return ids, counts
