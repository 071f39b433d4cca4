"""The archive on the seam by role: the history is a reader; pruning is a capability."""

from __future__ import annotations

from agentlog.archive import ArchivedEventReader, Archiver, LocalArchiveStore
from agentlog.eventlog import Capabilities, EventLog, MemoryEventLog
from tests.archive.helpers import read_all, record_run
from tests.support.archive import NOW


class _KeepEverythingLog(MemoryEventLog):
    """A backend that never deletes events: it does not claim ``prune``, and
    inherits the seam's default, which refuses."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = Capabilities(prune=False)

    prune = EventLog.prune


async def test_archiver_archives_but_does_not_prune_a_log_without_prune(
    store: LocalArchiveStore,
) -> None:
    log = _KeepEverythingLog()
    events = await record_run(log, "done", tag=1)
    summary = await Archiver(log, store).run(now=NOW)
    assert list(summary.run_ids) == ["done"] and summary.pruned == 0
    info = await log.get_run("done")
    assert not info.archived
    assert await read_all(log, "done") == events  # still hot, all of it
    history = ArchivedEventReader(log, store)
    assert await read_all(history, "done") == events
    await history.close()
