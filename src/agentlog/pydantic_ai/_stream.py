"""Streaming: a model request's stream events reach ``Runtime.stream`` while it runs.

With ``AgentlogAgent(agent, stream=True)`` the agent runs in Pydantic AI's
streaming mode (a capability that overrides its public ``on_event`` hook
turns it on), so each model request is a streamed request inside its task.
:class:`_StreamingRecorder` sees every ``ModelResponseStreamEvent`` (part
start, part delta, part end, final result) of the request in flight and
publishes them with ``ctx.progress`` as ``{"pydantic_ai": "stream",
"events": [...]}``, each event in Pydantic AI's own JSON form (rebuild one with
``TypeAdapter(AgentStreamEvent)``).

``Runtime.stream`` follows only what the log holds, so a published event is
a recorded event; to keep the log from growing by one event per token, the
events are batched: one item per ``interval`` seconds at most while the
request streams, and the rest when the request ends. A request answered from
the log (a step that runs again) streams nothing again. A request whose
stream breaks midway (Pydantic AI raises that to the stream's consumer: the
step fails and runs again) or whose process dies streams again from the
start: watchers may see the broken try's published events, then all of the
retry's; what the broken try still buffered is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import AgentStreamEvent
from pydantic_ai.tools import RunContext
from pydantic_core import to_jsonable_python

from agentlog.pydantic_ai._recorder import _Recorder

#: The events of a model response's stream (Pydantic AI's ModelResponseStreamEvent).
_MODEL_EVENTS = frozenset({"part_start", "part_delta", "part_end", "final_result"})


@dataclass
class _StreamingRecorder(_Recorder):
    """A :class:`_Recorder` that also publishes its live requests' stream events.

    Attributes:
        interval: at most this many seconds between a stream event and its item.
    """

    interval: float = 0.1
    _buffer: list[Any] = field(default_factory=list, init=False)
    _timer: asyncio.Task[None] | None = field(default=None, init=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    async def on_event(self, ctx: RunContext[Any], *, event: AgentStreamEvent) -> None:
        if not self.live or event.event_kind not in _MODEL_EVENTS:
            return  # a request answered from the log, or not a model stream event
        self._buffer.append(to_jsonable_python(event))
        if self._timer is None:
            self._timer = asyncio.create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.interval)
        self._timer = None
        await self._publish()

    async def flush(self) -> None:
        """Publish what is buffered now (a request ended, or the agent's run did)."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer
        await self._publish()

    def discard(self) -> None:
        """Drop what is buffered and stop the timer: the step failed."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._buffer = []

    async def _publish(self) -> None:
        async with self._lock:
            events, self._buffer = self._buffer, []
            if events:
                await self.ctx.progress({"pydantic_ai": "stream", "events": events})
