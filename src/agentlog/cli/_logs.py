"""How the ``agentlog`` command configures the library's logging.

The library only hands log lines to the stdlib loggers under ``agentlog``
(see :mod:`agentlog._logging`); as the application, the command decides where
they go: stderr, because stdout carries results (``--json``, ``sql``).
``-v`` shows info lines, ``-vv`` debug lines; without it, warnings and
errors only. ``--log-format json`` prints one JSON object per line.
"""

from __future__ import annotations

import logging
import sys
from enum import StrEnum

import structlog

__all__ = ["LogFormat", "configure_logging"]


class LogFormat(StrEnum):
    """How log lines are written."""

    CONSOLE = "console"
    JSON = "json"


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is at the time of the write.

    Looked up per line, not captured once: a test runner or CliRunner may
    swap stderr after the command configured logging.
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # a logging failure must never fail the command
            self.handleError(record)


def configure_logging(verbosity: int, fmt: LogFormat = LogFormat.CONSOLE) -> None:
    """Route the ``agentlog`` loggers to stderr at the level ``verbosity`` picks.

    Args:
        verbosity: 0 for warnings, 1 (``-v``) for info, 2 or more (``-vv``) for debug.
        fmt: console lines for people, or JSON lines for log collectors.
    """
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbosity, 2)]
    renderer = (
        structlog.processors.JSONRenderer()
        if fmt is LogFormat.JSON
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        # anything that asks structlog itself for a logger also goes to stderr
        logger_factory=lambda *args: structlog.PrintLogger(sys.stderr),
        cache_logger_on_first_use=False,
    )
    root = logging.getLogger("agentlog")
    for handler in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(handler)  # configured again in the same process (tests)
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    root.addHandler(handler)
    root.setLevel(level)
    root.propagate = False  # the command owns these lines; no second copy via root
