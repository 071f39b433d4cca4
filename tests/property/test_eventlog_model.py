"""The shipped Hypothesis state machine (agentlog.testing) on each in-process backend."""

from __future__ import annotations

from pathlib import Path

from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.testing import MODEL_SETTINGS, EventLogMachine

# Names this module had before the machine shipped in the package, for old imports.
__all__ = ["KEEP", "MODEL_SETTINGS", "EventLogMachine"]
KEEP = EventLogMachine.keep_snapshots


class MemoryMachine(EventLogMachine):
    async def open_log(self, tmp: Path) -> EventLog:
        return MemoryEventLog(keep_snapshots=self.keep_snapshots)


class SqliteMachine(EventLogMachine):
    async def open_log(self, tmp: Path) -> EventLog:
        return SqliteEventLog(tmp / "model.db", keep_snapshots=self.keep_snapshots)


class SealedSqliteMachine(EventLogMachine):
    """Payloads and snapshots sealed at rest (a local keyring per example)."""

    async def open_log(self, tmp: Path) -> EventLog:
        cipher = PayloadCipher(LocalKeyStore(tmp / "keyring.json"))
        return SqliteEventLog(tmp / "model.db", keep_snapshots=self.keep_snapshots, cipher=cipher)


TestMemoryModel = MemoryMachine.test_case()
TestSqliteModel = SqliteMachine.test_case()
TestSealedSqliteModel = SealedSqliteMachine.test_case()
