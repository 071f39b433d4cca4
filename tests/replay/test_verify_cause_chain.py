"""verify rebuilds a task error's cause chain as the live run saw it (issue 24, item 4).

A task that fails for good raises, in the live step, the original exception
with its ``__cause__`` (``raise Declined(...) from KeyError(...)``) or its
``__context__`` (an error raised while handling another). A step that reads
the chain (``isinstance(exc.__cause__, KeyError)``) must take the same path
when verify replays it: the recorded chain is rebuilt link by link, through
the runtime's one allow-list, explicit causes as ``__cause__`` and implicit
ones as ``__context__``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunStatus, TaskFailed
from agentlog.replay import verify_history
from agentlog.replay._verify_compare import recorded_error
from agentlog.runtime import RetryPolicy, Runtime, StepContext, Workflow, end, task
from agentlog.runtime._failures import describe
from tests.support.runtime import FAST_RETRY, config, event_log, events_of, run_to_rest

__all__ = ["event_log"]


class Declined(Exception):
    """The app's own error, at module level: rebuilt as this class."""


class CardGone(Exception):
    """The app's error behind it."""


GIVES_UP = RetryPolicy(max_attempts=3, initial_interval=0.001, non_retryable=(Declined,))


def _why(exc: BaseException) -> list[tuple[str, str, str]]:
    """The chain behind ``exc`` as the step sees it: (how, class, message)."""
    links: list[tuple[str, str, str]] = []
    while True:
        if exc.__cause__ is not None:
            how, exc = "cause", exc.__cause__
        elif exc.__context__ is not None and not exc.__suppress_context__:
            how, exc = "context", exc.__context__
        else:
            return links
        links.append((how, type(exc).__name__, str(exc)))


def billing(seen: list[list[tuple[str, str, str]]]) -> Workflow:
    wf = Workflow("billing", state={"out": "replace"}, retry=FAST_RETRY)

    @task(name="charge", retry=GIVES_UP)
    async def charge(cents: int) -> str:
        try:
            try:
                {}["card"]  # the lookup that fails
            except KeyError:
                raise CardGone("card 4242 removed") from None  # context: none
        except CardGone:
            try:
                raise ValueError("no fallback card")  # context: CardGone
            except ValueError as why:
                raise Declined(f"{cents} declined") from why

    @wf.step
    async def pay(ctx: StepContext) -> Any:
        try:
            return end(out=await charge(500))
        except Declined as exc:
            chain = _why(exc)
            seen.append(chain)
            # The path depends on the chain: a replay that lost it diverges.
            return end(out=f"invoice later ({len(chain)}: {chain[0][1] if chain else '-'})")

    return wf


async def test_verify_rebuilds_the_cause_chain_the_live_step_saw(event_log: EventLog) -> None:
    live: list[list[tuple[str, str, str]]] = []
    async with Runtime(event_log, workflows=[billing(live)], config=config()) as rt:
        await rt.start(billing(live), run_id="b", durability="sync")
        assert (await run_to_rest(rt, "b")).status == RunStatus.COMPLETED
    assert live == [
        [("cause", "ValueError", "no fallback card"), ("context", "CardGone", "card 4242 removed")]
    ]
    events = await events_of(event_log, "b")
    replayed: list[list[tuple[str, str, str]]] = []
    assert await verify_history(billing(replayed), events) == []
    assert replayed == live


def test_a_link_that_cannot_be_rebuilt_ends_the_chain() -> None:
    try:
        try:
            raise LookupError("first")
        except LookupError as first:
            raise Declined("second") from first
    except Declined as exc:
        failure = describe(exc)
    recorded = TaskFailed("k", "Declined: second", 1, 0.0, False, failure=failure)
    rebuilt = recorded_error(recorded, [__name__])
    assert type(rebuilt) is Declined
    assert _why(rebuilt) == [("cause", "LookupError", "first")]
    # Declined is not the workflow's here: the head is not rebuilt, nor its chain.
    assert _why(recorded_error(recorded, ["other.app"])) == []
    # A cause of a class outside the allow-list is not rebuilt: the chain stops.
    failure = {**failure, "causes": [{"type": "other.app.Gone", "message": "x"}]}
    rebuilt = recorded_error(dataclasses.replace(recorded, failure=failure), [__name__])
    assert type(rebuilt) is Declined and _why(rebuilt) == []
    # A record from before links had a module: found by the allowed prefixes.
    failure = {**failure, "causes": [{"type": "builtins.LookupError", "message": "old"}]}
    rebuilt = recorded_error(dataclasses.replace(recorded, failure=failure), [__name__])
    assert _why(rebuilt) == [("cause", "LookupError", "old")]
