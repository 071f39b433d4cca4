"""The EventLog contract: every backend's test class subclasses EventLogContract.

A subclass provides two pytest fixtures:

* ``log``: an async fixture yielding an open, empty EventLog created with
  ``keep_snapshots=self.keep_snapshots``, closed afterwards;
* ``log_url``: a URL that :func:`~agentlog.eventlog.open_log` opens onto the
  *same* store from another process, or None when the store lives in this
  process only (the memory backend); the several-writers test then races
  asyncio tasks on the one instance instead of processes. A backend whose
  URL scheme ``open_log`` does not know returns None too.

The tests are coroutines run by pytest-asyncio: under ``asyncio_mode =
"auto"`` or in strict mode alike (the class carries the asyncio mark; in
strict mode declare the ``log`` fixture with ``@pytest_asyncio.fixture``).
Tests of an optional capability skip on a backend that does not claim it
(:class:`~agentlog.eventlog._base.Capabilities`). Nothing here knows which
backend it runs against.
"""

from __future__ import annotations

import pytest

from agentlog.errors import ConfigError
from agentlog.eventlog._base import Capabilities, Command, EventLog, EventReader
from agentlog.eventlog.events import RunCancelled
from agentlog.testing._contract_claims import ClaimsContract
from agentlog.testing._contract_messages import MessagesContract
from agentlog.testing._contract_runs import RunsContract
from agentlog.testing._contract_storage import StorageContract

__all__ = ["EventLogContract"]


class EventLogContract(RunsContract, ClaimsContract, StorageContract, MessagesContract):
    """The behaviour every EventLog backend must have.

    Example::

        class TestMyEventLog(EventLogContract):
            @pytest.fixture
            async def log(self, tmp_path):
                async with MyEventLog(tmp_path, keep_snapshots=self.keep_snapshots) as log:
                    yield log

            @pytest.fixture
            def log_url(self, tmp_path):
                return f"my://{tmp_path}"
    """

    pytestmark = pytest.mark.asyncio

    async def test_the_log_declares_what_it_can_do(self, log: EventLog) -> None:
        assert isinstance(log, EventReader)
        assert isinstance(log.capabilities, Capabilities)
        assert log.direct_writes == log.capabilities.direct_writes
        if not log.capabilities.commands:
            with pytest.raises(ConfigError):
                await log.send_command(Command("r", "cancel", RunCancelled("no queue")))
            assert await log.find_run("r") is None
