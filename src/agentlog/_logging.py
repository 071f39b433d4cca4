"""The library's loggers: structlog over the standard library, silent by default.

agentlog is a library, so it never decides where log lines go. Each module
takes its logger from :func:`get_logger`: a structlog logger that hands its
rendered lines to the standard-library logger of the same name. The
``agentlog`` stdlib logger carries a ``NullHandler``, so nothing reaches the
console until the application configures logging (``logging.basicConfig``,
a handler on ``"agentlog"``, or structlog's ``ProcessorFormatter``). The
``agentlog`` command does so itself (``-v``, ``--log-format json``).

A line nobody can receive is not rendered: structlog runs its processors
before the stdlib logger checks its level, and its default ones render a
console line with every value's repr (about 0.08 ms, most of a debug line
in ``open_log``, issue 23 item 8). So while structlog is not configured, a
line below the stdlib logger's level is dropped before them. Once anything
configures structlog (an application, the ``agentlog`` command,
``structlog.testing.capture_logs``), its processors see every line, as before.

Context (run id, seq, step) is bound on the logger a run carries, never in
the caller's ``contextvars``, so it cannot leak onto unrelated lines.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

__all__ = ["get_logger"]

logging.getLogger("agentlog").addHandler(logging.NullHandler())

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL,
}


def _dropped(*_args: Any, **_kwargs: Any) -> None:
    """A line below the level, with structlog unconfigured: nobody receives it."""


class _Logger:
    """structlog's bound logger whose level methods skip the processors for a
    line the stdlib logger would drop while structlog is unconfigured; every
    other attribute (``bind``, ``new``...) is structlog's."""

    __slots__ = ("_bound", "_stdlib")

    def __init__(self, stdlib: logging.Logger, bound: Any) -> None:
        self._stdlib, self._bound = stdlib, bound

    def __getattr__(self, name: str) -> Any:
        level = _LEVELS.get(name)
        if (
            level is not None
            and not self._stdlib.isEnabledFor(level)
            and not structlog.is_configured()
        ):
            return _dropped
        found = getattr(self._bound, name)
        if name in ("bind", "new", "unbind", "try_unbind"):
            return lambda *args, **kwargs: _Logger(self._stdlib, found(*args, **kwargs))
        return found


def get_logger(name: str, **context: Any) -> Any:
    """A structlog logger writing to the stdlib logger ``name``.

    The processors are structlog's configured ones (so
    ``structlog.testing.capture_logs`` and an application's own
    ``structlog.configure`` apply); the output always goes through stdlib
    logging, never straight to stdout. A line below the stdlib logger's
    level is not rendered while structlog is unconfigured (see above).
    """
    stdlib = logging.getLogger(name)
    return _Logger(stdlib, structlog.wrap_logger(stdlib, **context))
