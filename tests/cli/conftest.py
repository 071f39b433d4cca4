"""Fixtures of the CLI tests."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """The CLI configures structlog and the ``agentlog`` logger; put them back after."""
    logger = logging.getLogger("agentlog")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    yield
    structlog.reset_defaults()
    logger.handlers[:] = handlers
    logger.setLevel(level)
    logger.propagate = propagate
