"""Fixtures of the LangGraph saver tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentlog.langgraph import AgentlogSaver


@pytest.fixture
def log_url(tmp_path: Path) -> str:
    """A fresh SQLite log URL."""
    return f"sqlite:///{tmp_path}/agentlog.db"


@pytest.fixture
def saver(log_url: str) -> Iterator[AgentlogSaver]:
    """An AgentlogSaver on a fresh SQLite log."""
    with AgentlogSaver.from_url(log_url) as opened:
        yield opened
