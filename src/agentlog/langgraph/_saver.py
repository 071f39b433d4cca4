"""AgentlogSaver: LangGraph's BaseCheckpointSaver on an agentlog EventLog."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from agentlog.crypto import KeyStore
from agentlog.errors import BackendUnavailableError, ConfigError, UnknownCheckpointError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog._urls import open_log, open_sqlite_log
from agentlog.eventlog.events import CheckpointSaved, EventData
from agentlog.langgraph import _removals
from agentlog.langgraph._convert import (
    Heads,
    build_tuple,
    checkpoint_config,
    checkpoint_event,
    where,
    writes_event,
)
from agentlog.langgraph._loop import LoopThread, close_unused, runs_here
from agentlog.langgraph._serde import serializer
from agentlog.langgraph._store import NotHere, ThreadStore
from agentlog.langgraph._thread import NeedsHistory, ThreadModel

__all__ = ["AgentlogSaver"]


def _matches(metadata: Any, wanted: dict[str, Any] | None) -> bool:
    return not wanted or all(metadata.get(key) == value for key, value in wanted.items())


class AgentlogSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer that stores each thread as an agentlog run.

    Use :meth:`from_url` (as ``with`` or ``async with``), or wrap an open
    EventLog. The same object serves ``invoke`` and ``ainvoke``.

    Args:
        event_log: the log to store threads in. It is used from the saver's
            own loop thread: pass a log that any loop may use (SQLite,
            memory), or open Kafka through :meth:`from_url`.
        serde: the serializer; default :class:`StrictSerializer`, which
            never constructs a class that is not on its allow-list.
        allowed: classes (or ``(module, name)`` pairs) the default
            serializer also loads: the graph's state schema, say, which
            brings the pydantic models, dataclasses and enums its fields
            name. LangGraph hands the saver its schema's classes only when
            ``LANGGRAPH_STRICT_MSGPACK`` is set, so name them here.
        snapshot_every: save a snapshot of a thread after this many events,
            so a new process reads the snapshot and a bounded tail.
    """

    def __init__(
        self,
        log: EventLog,
        *,
        serde: SerializerProtocol | None = None,
        snapshot_every: int = 200,
        allowed: Iterable[type | tuple[str, ...]] = (),
    ) -> None:
        self._setup(LoopThread(), log, False, serializer(serde, allowed), snapshot_every)

    def _setup(
        self,
        loop: LoopThread,
        log: EventLog,
        owns_log: bool,
        serde: SerializerProtocol,
        snapshot_every: int,
    ) -> None:
        BaseCheckpointSaver.__init__(self, serde=serde)
        if snapshot_every < 1:
            raise ConfigError(f"snapshot_every must be 1 or more, not {snapshot_every!r}")
        self._loop, self._log, self._owns_log = loop, log, owns_log
        #: Set as close() starts: a read on a caller's thread that then finds
        #: the log closed says the saver is (get_tuple).
        self._closing = False
        self._store = ThreadStore(log, snapshot_every=snapshot_every)
        #: Reads may run the loop on the caller's thread until its own starts
        #: (a SQLite log in clear: no background task waits on the loop).
        self._here = runs_here(log)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        serde: SerializerProtocol | None = None,
        snapshot_every: int = 200,
        keys: KeyStore | None = None,
        allowed: Iterable[type | tuple[str, ...]] = (),
    ) -> AgentlogSaver:
        """Open the log at ``url`` (``sqlite:///...``, ``kafka://...``) on the saver's loop.

        ``keys``: encrypt checkpoints and writes at rest with per-thread data
        keys from this key store (see :func:`~agentlog.eventlog._urls.open_log`
        and docs/security.md). ``serde``, ``snapshot_every`` and ``allowed``:
        as for the constructor.
        """
        serde = serializer(serde, allowed)
        if snapshot_every < 1:
            raise ConfigError(f"snapshot_every must be 1 or more, not {snapshot_every!r}")
        loop = LoopThread()
        try:
            if keys is None and urlsplit(url).scheme == "sqlite":
                event_log: EventLog = open_sqlite_log(url)  # no loop needed to open it
            else:
                event_log = loop.run(open_log(url, keys=keys))
        except BaseException:
            loop.stop()
            raise
        saver = cls.__new__(cls)
        saver._setup(loop, event_log, True, serde, snapshot_every)
        return saver

    # -- lifecycle ------------------------------------------------------------------

    def close(self) -> None:
        """Close the log (when opened by :meth:`from_url`) and stop the loop thread."""
        if self._loop.closed:
            return
        self._closing = True
        if self._owns_log and not close_unused(self._log, self._loop):
            self._loop.run(self._log.close(), here=self._here)
        self._loop.stop()

    async def aclose(self) -> None:
        """:meth:`close`, from a coroutine."""
        if self._loop.closed:
            return
        self._closing = True
        if self._owns_log and not close_unused(self._log, self._loop):
            await self._loop.arun(self._log.close())
        self._loop.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- the operations, as coroutines on the saver's loop --------------------------------

    async def _get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id, ns, checkpoint_id = where(config, "get_tuple")
        async with self._store.lock(thread_id):
            return await self._get_tuple_locked(thread_id, ns, checkpoint_id)

    async def _get_tuple_locked(
        self, thread_id: str, ns: str, checkpoint_id: str | None
    ) -> CheckpointTuple | None:
        state = await self._store.serve(thread_id, [ns])
        try:
            return self._tuple_of(state.model, state.heads, ns, checkpoint_id)
        except NeedsHistory:
            pass  # an older checkpoint than the snapshot holds: read the history
        model = await self._store.history(state)
        found = model.get(ns, checkpoint_id) if checkpoint_id else model.latest(ns)
        return None if found is None else build_tuple(self.serde, model, state.heads, found)

    def _tuple_of(
        self, model: ThreadModel, heads: Heads, ns: str, checkpoint_id: str | None
    ) -> CheckpointTuple | None:
        """The checkpoint from the model; NeedsHistory if only the history holds it
        (a fork from a checkpoint older than the latest snapshot)."""
        found = model.get(ns, checkpoint_id) if checkpoint_id else model.latest(ns)
        if found is None:
            if model.complete or not checkpoint_id:
                return None
            raise NeedsHistory(checkpoint_id)
        return build_tuple(self.serde, model, heads, found)

    async def _list(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> list[CheckpointTuple]:
        if config is None:
            thread_ids, ns, checkpoint_id = await self._store.thread_ids(), None, None
        else:
            thread_id, _ns, checkpoint_id = where(config, "list")
            thread_ids = [thread_id]
            ns = (config.get("configurable") or {}).get("checkpoint_ns")
        before_id = (before or {}).get("configurable", {}).get("checkpoint_id")
        out: list[CheckpointTuple] = []
        for thread_id in thread_ids:
            async with self._store.lock(thread_id):
                if not await self._list_thread(
                    out, thread_id, ns, checkpoint_id, filter, before_id, limit
                ):
                    break
        return out

    async def _list_thread(
        self,
        out: list[CheckpointTuple],
        thread_id: str,
        ns: str | None,
        checkpoint_id: str | None,
        filter: dict[str, Any] | None,
        before_id: str | None,
        limit: int | None,
    ) -> bool:
        """Add the thread's matches to ``out``; False once ``limit`` is reached."""
        state = await self._store.serve(thread_id, None if ns is None else [ns])
        model = await self._store.history(state)
        saved = [
            data
            for space, by_id in model.checkpoints.items()
            if ns is None or space == ns
            for data in by_id.values()
            if (not checkpoint_id or data.checkpoint_id == checkpoint_id)
            and (not before_id or data.checkpoint_id < before_id)
        ]
        saved.sort(key=lambda d: d.checkpoint_id, reverse=True)
        for data in saved:
            if limit is not None and len(out) >= limit:
                return False
            built = build_tuple(self.serde, model, state.heads, data)
            if _matches(built.metadata, filter):
                out.append(built)
        return True

    def _put_event(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[str, str, str | None, Callable[[ThreadModel, Heads], CheckpointSaved]]:
        """Where a put goes (thread, namespace, parent), and how its event is
        made of the thread's model and heads."""
        thread_id, ns, parent_id = where(config, "put")
        meta, versions = get_checkpoint_metadata(config, metadata), dict(new_versions)

        def make(model: ThreadModel, heads: Heads) -> CheckpointSaved:
            return checkpoint_event(
                self.serde, model, heads, ns, parent_id, checkpoint, meta, versions
            )

        return thread_id, ns, parent_id, make

    async def _put(
        self,
        thread_id: str,
        ns: str,
        parent_id: str | None,
        make: Callable[[ThreadModel, Heads], CheckpointSaved],
    ) -> None:
        async with self._store.lock(thread_id):
            state = await self._store.thread(thread_id, refresh=False)
            model = state.model
            if parent_id and model.get(ns, parent_id) is None:
                await self._store.thread(thread_id)  # perhaps another process saved it
                model = state.model
                if model.get(ns, parent_id) is None and not model.complete:
                    model = await self._store.history(state)  # an older parent: a fork
                if model.get(ns, parent_id) is None:
                    raise UnknownCheckpointError(thread_id, ns, parent_id, "the parent of a put")
            try:
                event = make(model, state.heads)
            except NeedsHistory:
                event = make(await self._store.history(state), state.heads)
            await self._store.append(thread_id, [event], served_ns=ns)

    async def _put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, path: str
    ) -> None:
        thread_id, ns, checkpoint_id = where(config, "put_writes")
        if not checkpoint_id:
            raise UnknownCheckpointError(thread_id, ns, "", "put_writes needs a checkpoint_id")
        if not writes:
            return
        event = writes_event(self.serde, thread_id, ns, checkpoint_id, writes, task_id, path)
        async with self._store.lock(thread_id):
            await self._store.append(thread_id, [event], served_ns=ns)

    # -- LangGraph's sync API -------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint that ``config`` names, or the thread's latest; None if none.

        Served on the calling thread when the saver holds the thread and the
        log tells there that nothing was appended since, or (SQLite in clear)
        reads it there cold; else on the loop."""
        thread_id, ns, checkpoint_id = where(config, "get_tuple")
        if not self._loop.closed:
            try:
                return self._store.serve_here(
                    thread_id,
                    ns,
                    lambda m, h: self._tuple_of(m, h, ns, checkpoint_id),
                    cold=self._here,
                )
            except NotHere:
                pass
            except BackendUnavailableError:
                if self._closing:  # another thread closed the saver during the read
                    raise self._loop.closed_error("closed during this read") from None
                raise
        return self._loop.run(self._get_tuple(config), here=self._here)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first, by thread (every thread if ``config`` is None),
        namespace, metadata ``filter``, ``before`` a checkpoint id, up to ``limit``."""
        return iter(self._loop.run(self._list(config, filter, before, limit)))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint: only the channels in ``new_versions`` are stored.

        Appended and committed on the calling thread when the saver holds
        the thread and the log is idle (SQLite in clear), else on the loop."""
        thread_id, ns, parent_id, make = self._put_event(config, checkpoint, metadata, new_versions)

        def build(model: ThreadModel, heads: Heads) -> CheckpointSaved:
            if parent_id and model.get(ns, parent_id) is None:
                raise NotHere(thread_id)  # the loop looks further: another process, a fork
            return make(model, heads)

        if not self._write_here(thread_id, ns, build):
            self._loop.run(self._put(thread_id, ns, parent_id, make))
        return checkpoint_config(thread_id, ns, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Save a task's pending writes against the checkpoint ``config`` names
        (on the calling thread when it can, as :meth:`put`)."""
        thread_id, ns, checkpoint_id = where(config, "put_writes")
        if checkpoint_id and writes:
            serde = self.serde
            if self._write_here(
                thread_id,
                ns,
                lambda m, h: writes_event(
                    serde, thread_id, ns, checkpoint_id, writes, task_id, task_path
                ),
            ):
                return
        self._loop.run(self._put_writes(config, writes, task_id, task_path))

    def _write_here(
        self, thread_id: str, ns: str, build: Callable[[ThreadModel, Heads], EventData]
    ) -> bool:
        """Append what ``build`` makes on the calling thread, with no event loop
        (:meth:`ThreadStore.append_here`); False if it cannot (nothing written)."""
        if not (self._here and self._loop.outside):
            return False
        try:
            follow_up = self._store.append_here(thread_id, ns, build)
        except NotHere:
            return False
        if follow_up:  # a snapshot is due: the loop saves it
            self._loop.run(self._store.follow_up(thread_id))
        return True

    def delete_thread(self, thread_id: str) -> None:
        """Remove every checkpoint and write of the thread (the events stay)."""
        self._loop.run(_removals.delete_thread(self._store, thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Remove the checkpoints (and their writes) whose metadata run_id is in ``run_ids``."""
        self._loop.run(_removals.delete_for_runs(self._store, self.serde, run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of one thread onto another."""
        self._loop.run(_removals.copy_thread(self._store, source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only each namespace's latest checkpoint (``keep_latest``), or none (``delete``)."""
        self._loop.run(_removals.prune(self._store, thread_ids, strategy))

    # -- LangGraph's async API ------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple`."""
        return await self._loop.arun(self._get_tuple(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`."""
        for item in await self._loop.arun(self._list(config, filter, before, limit)):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put`."""
        thread_id, ns, parent_id, make = self._put_event(config, checkpoint, metadata, new_versions)
        await self._loop.arun(self._put(thread_id, ns, parent_id, make))
        return checkpoint_config(thread_id, ns, checkpoint["id"])

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes`."""
        await self._loop.arun(self._put_writes(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`."""
        await self._loop.arun(_removals.delete_thread(self._store, thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""
        await self._loop.arun(_removals.delete_for_runs(self._store, self.serde, run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread`."""
        await self._loop.arun(
            _removals.copy_thread(self._store, source_thread_id, target_thread_id)
        )

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async :meth:`prune`."""
        await self._loop.arun(_removals.prune(self._store, thread_ids, strategy))

    def get_next_version(self, current: str | None, channel: None) -> str:
        """The next channel version: a zero-padded counter, then a random tiebreak."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"
