"""The library's loggers: structlog over the standard library, silent by default.

agentlog is a library, so it never decides where log lines go. Each module
takes its logger from :func:`get_logger`: a structlog logger that hands its
rendered lines to the standard-library logger of the same name. The
``agentlog`` stdlib logger carries a ``NullHandler``, so nothing reaches the
console until the application configures logging (``logging.basicConfig``,
a handler on ``"agentlog"``, or structlog's ``ProcessorFormatter``). The
``agentlog`` command does so itself (``-v``, ``--log-format json``).

Context (run id, seq, step) is bound on the logger a run carries, never in
the caller's ``contextvars``, so it cannot leak onto unrelated lines.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

__all__ = ["get_logger"]

logging.getLogger("agentlog").addHandler(logging.NullHandler())


def get_logger(name: str, **context: Any) -> Any:
    """A structlog logger writing to the stdlib logger ``name``.

    The processors are structlog's configured ones (so
    ``structlog.testing.capture_logs`` and an application's own
    ``structlog.configure`` apply); the output always goes through stdlib
    logging, never straight to stdout.
    """
    return structlog.wrap_logger(logging.getLogger(name), **context)
