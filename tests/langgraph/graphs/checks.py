"""What the tests read back from a saver: a thread's shape, its chain, what it saved.

Everything here goes through LangGraph's own ``BaseCheckpointSaver.list``, so
the same check runs on agentlog's saver and on LangGraph's reference savers.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from tests.langgraph.graphs.graphs import config_for, plain

#: Pending writes that do not mean a task finished: it parked, was answered, or failed.
UNFINISHED_CHANNELS = frozenset({"__interrupt__", "__resume__", "__error__"})


def ns_label(ns: str) -> str:
    """A checkpoint namespace without its task ids (they differ from run to run)."""
    return "|".join(part.split(":", 1)[0] for part in ns.split("|")) if ns else ""


def by_namespace(
    saver: BaseCheckpointSaver[Any], thread_id: str
) -> dict[str, list[CheckpointTuple]]:
    """Every checkpoint of a thread, per namespace, newest first (as ``list`` returns them)."""
    chains: dict[str, list[CheckpointTuple]] = defaultdict(list)
    for item in saver.list(config_for(thread_id)):
        chains[item.config["configurable"].get("checkpoint_ns", "")].append(item)
    return dict(chains)


def chain_problems(saver: BaseCheckpointSaver[Any], thread_id: str) -> list[str]:
    """Where a thread's checkpoints do not form one chain per namespace (empty: linear).

    Linear means: newest first, every checkpoint's parent is the next one
    listed, and only the oldest has no parent. A fork shows up as two
    checkpoints naming the same parent, or as a parent that is not listed.
    """
    problems = []
    for ns, chain in by_namespace(saver, thread_id).items():
        ids = [item.config["configurable"]["checkpoint_id"] for item in chain]
        parents = [
            item.parent_config["configurable"]["checkpoint_id"] if item.parent_config else None
            for item in chain
        ]
        if parents != [*ids[1:], None]:
            problems.append(f"ns {ns!r}: checkpoints {ids}, parents {parents}")
    return problems


def assert_linear(saver: BaseCheckpointSaver[Any], thread_id: str) -> int:
    """Assert each namespace's checkpoints form one chain; return how many there are."""
    problems = chain_problems(saver, thread_id)
    assert not problems, f"thread {thread_id} forked: {problems}"
    return sum(len(chain) for chain in by_namespace(saver, thread_id).values())


def thread_shape(saver: BaseCheckpointSaver[Any], thread_id: str) -> dict[str, list[Any]]:
    """Per namespace (task ids left out), newest first: each checkpoint's step, source,
    channel values, and pending writes as (channel, value)."""
    shape: dict[str, list[Any]] = {}
    for ns, chain in by_namespace(saver, thread_id).items():
        shape[ns_label(ns)] = [
            (
                item.metadata["step"],
                item.metadata["source"],
                repr(plain(item.checkpoint["channel_values"])),
                sorted(
                    repr(plain([channel, value])) for _, channel, value in item.pending_writes or []
                ),
            )
            for item in chain
        ]
    return shape


@dataclass
class SavedWork:
    """What a thread's log held at one moment: which node executions it had kept."""

    #: Per namespace, the highest committed step (a task of step s is in checkpoint s).
    steps: dict[str, int] = field(default_factory=dict)
    #: Tasks (by id) whose writes were saved as pending writes.
    tasks: set[str] = field(default_factory=set)

    @classmethod
    def read(cls, saver: BaseCheckpointSaver[Any], thread_id: str) -> SavedWork:
        saved = cls()
        for ns, chain in by_namespace(saver, thread_id).items():
            saved.steps[ns] = max(item.metadata["step"] for item in chain)
            for item in chain:
                saved.tasks.update(
                    task
                    for task, channel, _ in item.pending_writes or []
                    if channel not in UNFINISHED_CHANNELS
                )
        return saved

    def holds(self, ns: str, step: int) -> bool:
        """Whether the execution of the task at ``ns`` (``parent|node:task_id``) in
        ``step`` was saved, as a committed step or as its own pending writes."""
        parent, _, own = ns.rpartition("|")
        task_id = own.split(":", 1)[1]
        return task_id in self.tasks or self.steps.get(parent, -2) >= step
