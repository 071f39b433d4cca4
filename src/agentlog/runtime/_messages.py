"""Messages into a run (``Runtime.send``) and values out of it (``Runtime.get_event``).

A message is recorded by the run's one writer, as every event is:

* the run is driven in this process: it is handed to its executor
  (:class:`~agentlog.runtime._inbox.Inbox`), which records it at its next
  superstep boundary, or before it parks; on a log with run mailboxes a
  send with a key stores the message there first (:func:`_store_first`), so
  that one key sent from two processes is recorded and reported once;
* else, on a log with run mailboxes (SQLite, PostgreSQL, Redis), the
  sender stores the message in the run's mailbox; if a writer holds the
  running run it returns at once, and that writer moves it into the history
  before the run parks or ends (runtime/_mailbox.py); else it claims the
  run politely, as a resume does, moves every stored message and lets go
  (or drives the run here if a message answers the ``recv`` it is parked
  on), waiting up to its ``timeout`` for a writer that closed its mailbox
  to let go. A send that raises then has stored the message unreported:
  the next send of its key returns True for it (eventlog/_mailbox.py);
* on memory (one process), the sender claims the run as above, and waits
  while another runtime's writer holds it;
* on a log whose workers own the runs (Kafka with a consumer group), the
  sender sends a ``send`` command, which the run's owner applies as above
  (:func:`apply_send`), and waits for its outcome. A command always carries
  an idempotency key (a random one if the caller gave none), so a command
  delivered twice is recorded once. A keyed send whose outcome did not come
  in time raises, its command still queued; this process keeps the command
  (:attr:`RunDriver.unheard_commands`), and a later send of the key that is
  refused as a duplicate asks for the first command's outcome: applied, so
  the later send reports it (:func:`_send_command`).

A message sent before a step waits for it is kept in the run's inbox, in
order per topic; a message that answers a parked ``recv`` carries that
recv's id (``MessageSent.wakes``), so the run index and the fold agree that
the run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

from agentlog.errors import (
    BackendUnavailableError,
    EventNotPublishedError,
    LeaseHeldError,
    RunEndedError,
    VersionMismatchError,
)
from agentlog.eventlog._base import Command
from agentlog.eventlog._mailbox import MailboxLog
from agentlog.eventlog.codec import pack
from agentlog.eventlog.events import (
    EventData,
    MessageSent,
    RunStatus,
    ValuePublished,
    WriterClaimed,
)
from agentlog.projector._snapshots import load_state
from agentlog.projector._state import RunState
from agentlog.runtime._cancelling import task_cancelling
from agentlog.runtime._driver import RunDriver
from agentlog.runtime._durations import timer_seconds
from agentlog.runtime._inbox import check_name, waiting_recv
from agentlog.runtime._mailbox import mailbox_of, message_events

__all__ = ["NO_DEFAULT", "ReadState", "apply_send", "get_event", "send_message"]


class _Duplicate(Exception):
    """The idempotency key was recorded before: let go of the claim, record nothing."""


def _check_open(state: RunState, topic: str) -> None:
    if state.is_terminal:
        raise RunEndedError(
            f"run {state.run_id!r} is {state.status}: no step will receive the message "
            f"on {topic!r}, so nothing was recorded. Send it to a run that has not ended."
        )


def _wait_seconds(timeout: float | timedelta | None) -> float | None:
    """How long a caller waits (None: no bound), checked like a timer's length."""
    return None if timeout is None else timer_seconds(timeout, "timeout")


#: Reads a run's state from the log, or from the runtime's archive.
ReadState = Callable[[str], Awaitable[RunState]]


async def send_message(
    driver: RunDriver,
    read_state: ReadState,
    run_id: str,
    topic: str,
    value: Any,
    idempotency_key: str | None,
    timeout: float | timedelta | None,  # noqa: ASYNC109 - bounds a wait for the writer
) -> bool:
    """``Runtime.send``; see there. True if recorded now, False if a message
    with this idempotency key was recorded before (True once for a message
    recorded for a send that raised or was cancelled)."""
    key = idempotency_key
    try:
        recorded = await _send(driver, read_state, run_id, topic, value, key, timeout)
    except RunEndedError:  # a key recorded before the run ended is a duplicate still
        if key is None or key not in (await read_state(run_id)).message_keys:
            raise
        mailbox = mailbox_of(driver.log)
        recorded = mailbox is not None and await mailbox.take_report(run_id, key)
        recorded = recorded or await _kept_was_applied(driver, run_id, key)
    if recorded or key is None:
        return recorded
    return _take_unheard(driver, run_id, key)


def _retrieved(future: asyncio.Future[bool]) -> None:
    """Mark a refusal nobody waits for as seen (asyncio would log it)."""
    if not future.cancelled():
        future.exception()


def _take_unheard(driver: RunDriver, run_id: str, key: str) -> bool:
    """True if a send of ``key`` to a run driven here was cancelled after its
    executor took the message, and the executor recorded it: this call
    reports it (once)."""
    future = driver.unheard.pop((run_id, key), None)
    if future is None or not future.done():
        if future is not None:
            driver.unheard[(run_id, key)] = future  # not recorded yet: not this call's
        return False
    return not future.cancelled() and future.exception() is None and future.result()


async def _send(
    driver: RunDriver,
    read_state: ReadState,
    run_id: str,
    topic: str,
    value: Any,
    idempotency_key: str | None,
    timeout: float | timedelta | None,  # noqa: ASYNC109 - bounds a wait for the writer
) -> bool:
    check_name("topic", topic)
    key = "" if idempotency_key is None else check_name("idempotency key", idempotency_key)
    pack(value, path="message value")  # refused before anything is claimed
    state = await read_state(run_id)  # UnknownRunError
    _check_open(state, topic)
    log = driver.log
    if not log.direct_writes:
        return await _send_command(driver, run_id, topic, value, key)
    seconds = _wait_seconds(timeout)
    deadline = None if seconds is None else time.monotonic() + seconds
    mailbox = mailbox_of(log)
    if mailbox is not None and driver.active_run(run_id) is None:
        return await _store(driver, mailbox, state, topic, value, key, deadline)
    own = None  # the mailbox where this send stored its message, reporting it
    if mailbox is not None and key:
        outcome = await _store_first(driver, mailbox, state, topic, value, key)
        if outcome is not None:
            return outcome  # a duplicate: the send that stored or recorded it reports it
        own = mailbox
    async with _given_back_on_raise(own, run_id, key, lambda: own is not None):
        while True:  # nothing is recorded before a LeaseHeldError unless stored
            try:
                recorded = await _record(driver, run_id, topic, value, key, own)
            except _Duplicate:
                recorded = False
            except LeaseHeldError as held:
                await _wait_for_writer(driver, deadline, held)
                continue
            return own is not None or recorded  # stored: recorded by this send or a move


async def _wait_for_writer(driver: RunDriver, deadline: float | None, held: LeaseHeldError) -> None:
    """A send found the run held by another writer: wait a poll before it
    tries again; past its deadline, raise ``held``. A cancel that a client
    library swallowed while the send waited in it (it came out as the
    library's error, here as LeaseHeldError: runtime/_cancelling.py) ends
    the send as cancelled, instead of a loop that never stops."""
    if task_cancelling():
        raise asyncio.CancelledError
    if deadline is not None and time.monotonic() >= deadline:
        raise held
    await asyncio.sleep(driver.config.poll_seconds)


async def _send_command(driver: RunDriver, run_id: str, topic: str, value: Any, key: str) -> bool:
    """Send on a log whose workers own the runs: a ``send`` command, and its outcome.

    A keyed send whose outcome did not come within the log's time bound
    raises BackendUnavailableError with its command queued, and the owner
    may apply it later: its caller heard nothing, so the first send of the
    key that returns reports it. This process keeps each such command, the
    first per key (:attr:`RunDriver.unheard_commands`); a later send refused
    as a duplicate asks for its outcome (:func:`_kept_was_applied`). A later
    send that is applied means the kept one was not (a key is recorded
    once): it is dropped. A process that dies keeps nothing, so a retry from
    another process returns False (docs/messages.md)."""
    log = driver.log
    command = Command(run_id, "send", MessageSent(topic, value, key or uuid.uuid4().hex))
    sent = await log.send_command(command)
    driver.wake.set()  # this process's worker may own the run
    try:
        applied = await log.command_outcome(sent)
    except BackendUnavailableError:
        if key:  # in doubt: the next send of the key learns how it went
            kept = dataclasses.replace(sent, data=MessageSent(topic, None, key))  # not the value
            driver.keep_unheard_command(run_id, key, kept)
        raise
    if applied is False:  # refused: ended, or a duplicate
        if await _kept_was_applied(driver, run_id, key):
            return True  # this send reports the kept command's message
        _check_open(await load_state(log, run_id), topic)
        return False
    driver.unheard_commands.pop((run_id, key), None)
    return True


async def _kept_was_applied(driver: RunDriver, run_id: str, key: str) -> bool:
    """True if this process kept an in-doubt send command of ``key`` (see
    :func:`_send_command`) and the run's owner applied it: the caller, whose
    send of the key was refused as a duplicate, reports the message. The
    kept command is let go whatever the answer, and False if its reply
    cannot be read within the log's time bound (it is gone once the commands
    topic's retention dropped it); a caller cancelled meanwhile leaves it kept."""
    first = driver.unheard_commands.pop((run_id, key), None)  # none kept for no key
    if first is None:
        return False
    try:
        return await driver.log.command_outcome(first) is True
    except BackendUnavailableError:
        return False
    except BaseException:
        driver.keep_unheard_command(run_id, key, first)  # the next send of the key asks again
        raise


async def _store_first(
    driver: RunDriver, mailbox: MailboxLog, state: RunState, topic: str, value: Any, key: str
) -> bool | None:
    """A keyed send to a run driven here, on a log with mailboxes: store the
    message first, so that a send of its key from another process stored
    before it wins (its message is the one recorded, and it reports it) and
    one stored after it is a duplicate. None: this send stored it and reports
    it (now hand it to the executor); else what the send returns: False for
    a message stored or recorded before, True if the send of it raised."""
    if key in state.message_keys:
        return await mailbox.take_report(state.run_id, key)  # recorded: a duplicate
    stored = await mailbox.store_message(state.run_id, topic, value, key)
    if stored.ended:
        _check_open(await load_state(driver.log, state.run_id), topic)
    if stored.moved or not stored.reports:
        return stored.reports  # moved, or stored by another send that reports it
    return None


async def _store(
    driver: RunDriver,
    mailbox: MailboxLog,
    state: RunState,
    topic: str,
    value: Any,
    key: str,
    deadline: float | None,
) -> bool:
    """Send through the run's mailbox (runtime/_mailbox.py): store the message
    and return at once if the run's writer will move it; else move it (and
    any stored before it) as the run's claimed writer, once nobody holds it.

    Returns True if this call reports the message: it stored it, or the send
    that stored it raised (this one takes its report over; eventlog/_mailbox.py).
    A call that raises after storing leaves the report to the next send."""
    run_id = state.run_id
    key = key or uuid.uuid4().hex  # every stored message has a key: moved once
    if key in state.message_keys:
        return await mailbox.take_report(run_id, key)  # moved: unreported if its send raised
    stored = await mailbox.store_message(run_id, topic, value, key)
    reports = stored.reports
    async with _given_back_on_raise(mailbox, run_id, key, lambda: reports):
        while not (stored.moved or stored.taken):  # else: in the history, or the writer's
            if stored.ended:
                _check_open(await load_state(driver.log, run_id), topic)
            try:
                await _record(driver, run_id, topic, value, key, mailbox)
                break
            except _Duplicate:
                break  # moved by another writer meanwhile
            except LeaseHeldError as held:
                await _wait_for_writer(driver, deadline, held)
            stored = await mailbox.store_message(run_id, topic, value, key)
            reports = reports or stored.reports  # a send that raised meanwhile left it
    return reports


@contextlib.asynccontextmanager
async def _given_back_on_raise(
    mailbox: MailboxLog | None, run_id: str, key: str, reports: Callable[[], bool]
) -> AsyncIterator[None]:
    """A send that raises while it holds its message's report (``reports()``:
    it stored it, or took the report over) gives the report back: its caller
    hears no outcome, so the next send of the key reports it."""
    try:
        yield
    except BaseException:
        if mailbox is not None and reports():
            with contextlib.suppress(Exception):
                await mailbox.unreport(run_id, key)
        raise


async def _record(
    driver: RunDriver,
    run_id: str,
    topic: str,
    value: Any,
    key: str,
    mailbox: MailboxLog | None = None,
) -> bool:
    """Record one message as the run's writer: through its executor here, or
    by claiming it. Raises LeaseHeldError while another writer holds it.
    ``mailbox``: the message is stored there; move every stored message."""
    executor, task = driver.active_run(run_id), driver.active_task(run_id)
    if executor is not None and task is not None:
        future = executor.inbox.put(topic, value, key)
        either: list[asyncio.Future[Any]] = [future, task]
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # the caller hears nothing: the next send of the key reports it
            if not executor.inbox.withdraw(future) and key and mailbox is None:
                driver.unheard[(run_id, key)] = future  # taken: recorded unless refused
                future.add_done_callback(_retrieved)
            raise
        if future.done():
            return future.result()
        executor.inbox.withdraw(future)  # it stopped first: claim the run below
        raise LeaseHeldError(run_id, driver.config.owner, 0.0)
    moved: list[int] = []
    async with driver.claimed(run_id) as (epoch, deadline):
        state = await load_state(driver.log, run_id)
        _check_open(state, topic)
        if mailbox is not None:
            sent, moved, woke = message_events(state, await mailbox.stored_messages(run_id))
            if not sent:
                await mailbox.messages_moved(run_id, moved)
                raise _Duplicate  # moved before: let go, record nothing
        else:
            if key and key in state.message_keys:
                raise _Duplicate
            wakes = waiting_recv(state, topic)
            sent, woke = [MessageSent(topic, value, key, wakes)], wakes is not None
        events: list[EventData] = [WriterClaimed(epoch, driver.config.owner), *sent]
    wf = driver.workflows.get(state.workflow)
    # Running after the message (it answered a recv, or nothing held the run):
    # continue it here, as a resume does, if this process executes its code.
    running = woke or state.status == RunStatus.RUNNING
    here = running and driver.config.execute and wf is not None
    if here and wf is not None:
        try:
            driver.migration(wf, state)
        except VersionMismatchError:
            here = False  # a worker with the run's code goes on with it
    mode = state.durability or driver.config.durability
    await driver.continue_run(wf, state, epoch, deadline, mode, events, here)
    if mailbox is not None:
        await mailbox.messages_moved(run_id, moved)
    return True


async def apply_send(driver: RunDriver, command: Command) -> bool:
    """As the run's owner, apply a client's ``send`` command.

    Returns:
        True once it is recorded (or refused: a duplicate key, an ended run,
        raised as RunEndedError); False while the executor driving the run
        here has not recorded it yet (it does at its next superstep boundary,
        and that append finishes the command).
    """
    data = command.data
    assert isinstance(data, MessageSent)
    executor = driver.active_run(command.run_id)
    if executor is not None:
        future = executor.inbox.put(data.topic, data.value, data.key, token=command.ref)
        if not future.done():
            return False
        future.result()  # RunEndedError: refused, acked
        return True
    try:
        await _record(driver, command.run_id, data.topic, data.value, data.key)
    except _Duplicate:
        return True  # recorded before (a command delivered twice): acked, no effect
    return True


#: ``get_event``'s ``default`` when none is given: raise instead.
NO_DEFAULT: Any = object()


async def get_event(
    driver: RunDriver,
    read_state: ReadState,
    run_id: str,
    key: str,
    timeout: float | timedelta | None,  # noqa: ASYNC109 - raises or returns default when it passes
    default: Any = NO_DEFAULT,
) -> Any:
    """``Runtime.get_event``; see there."""
    check_name("key", key)
    active = driver.active_run(run_id)
    state = active.state.copy() if active is not None else await read_state(run_id)
    if key in state.published:
        return state.published[key]
    ended = state.is_terminal
    if not ended:
        try:
            async with asyncio.timeout(_wait_seconds(timeout)):
                tail = driver.log.tail(
                    run_id, after_seq=state.seq, poll_seconds=driver.config.poll_seconds
                )
                async for event in tail:
                    data = event.data
                    if isinstance(data, ValuePublished) and data.key == key:
                        return data.value
            ended = True  # the tail ends with the run
        except TimeoutError:
            pass
    if default is not NO_DEFAULT:
        return default
    raise EventNotPublishedError(run_id, key, ended)
