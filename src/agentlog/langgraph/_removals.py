"""What ``delete_for_runs`` and ``prune`` remove from a thread, chosen from its model."""

from __future__ import annotations

from collections.abc import Callable

from langgraph.checkpoint.serde.base import SerializerProtocol

from agentlog.errors import ConfigError
from agentlog.eventlog.events import CheckpointsRemoved
from agentlog.langgraph._convert import Heads, build_tuple
from agentlog.langgraph._thread import ThreadModel

__all__ = ["Choice", "of_runs", "pruned"]

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
