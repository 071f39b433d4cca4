"""The saver's removals and copies, on its loop: what ``delete_thread``,
``delete_for_runs`` and ``prune`` remove from a thread (chosen from its
model), and ``copy_thread``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from langgraph.checkpoint.serde.base import SerializerProtocol

from agentlog.errors import ConfigError
from agentlog.eventlog.events import CheckpointsRemoved
from agentlog.langgraph._convert import Heads, build_tuple, copy_events
from agentlog.langgraph._store import ThreadStore
from agentlog.langgraph._thread import ThreadModel

__all__ = [
    "Choice",
    "copy_thread",
    "delete_for_runs",
    "delete_thread",
    "of_runs",
    "prune",
    "pruned",
    "remove",
]

#: Picks the removal to record from a thread's whole model and its heads.
Choice = Callable[[ThreadModel, Heads], CheckpointsRemoved]


def of_runs(serde: SerializerProtocol, wanted: set[str]) -> Choice:
    """The checkpoints whose metadata ``run_id`` is in ``wanted``."""

    def choose(model: ThreadModel, heads: Heads) -> CheckpointsRemoved:
        doomed = [
            [data.ns, data.checkpoint_id]
            for by_id in model.checkpoints.values()
            for data in by_id.values()
            if build_tuple(serde, model, heads, data).metadata.get("run_id") in wanted
        ]
        return CheckpointsRemoved(doomed, reason="delete_for_runs")

    return choose


def pruned(strategy: str) -> Choice:
    """Every checkpoint but each namespace's latest (``keep_latest``), or all (``delete``).

    Raises:
        ConfigError: another strategy.
    """
    if strategy not in ("keep_latest", "delete"):
        raise ConfigError(f"prune strategy must be 'keep_latest' or 'delete', not {strategy!r}")

    def choose(model: ThreadModel, heads: Heads) -> CheckpointsRemoved:
        if strategy == "delete":
            return CheckpointsRemoved(everything=True, reason="prune")
        doomed = [
            [ns, cid]
            for ns, by_id in model.checkpoints.items()
            for cid in by_id
            if cid != max(by_id)
        ]
        return CheckpointsRemoved(doomed, reason="prune keep_latest")

    return choose


async def remove(store: ThreadStore, thread_id: str, choose: Choice) -> None:
    """Record the removal ``choose`` picks from the thread's live checkpoints, if any."""
    async with store.lock(thread_id):
        state = await store.thread(thread_id)
        if state.model.empty:
            return
        removed = choose(await store.history(state), state.heads)
        if removed.everything or removed.checkpoints:
            await store.append(thread_id, [removed])


async def delete_thread(store: ThreadStore, thread_id: str) -> None:
    """Remove every checkpoint and write of the thread."""
    await remove(
        store,
        str(thread_id),
        lambda m, h: CheckpointsRemoved(everything=True, reason="delete_thread"),
    )


async def delete_for_runs(
    store: ThreadStore, serde: SerializerProtocol, run_ids: Sequence[str]
) -> None:
    """Remove, from every thread, the checkpoints :func:`of_runs` picks."""
    wanted = set(run_ids)
    if wanted:
        for thread_id in await store.thread_ids():
            await remove(store, thread_id, of_runs(serde, wanted))


async def copy_thread(store: ThreadStore, source: str, target: str) -> None:
    """Append every live checkpoint and write of ``source`` to ``target``."""
    source, target = str(source), str(target)
    async with store.lock(source):
        state = await store.thread(source)
        copies = copy_events(await store.history(state))
    if copies:
        async with store.lock(target):
            await store.append(target, copies)


async def prune(store: ThreadStore, thread_ids: Sequence[str], strategy: str) -> None:
    """Remove what :func:`pruned` picks from each thread."""
    older = pruned(strategy)
    for thread_id in thread_ids:
        await remove(store, str(thread_id), older)
