"""Retention policies, per workflow: what stays hot and what the archive keeps.

Every archived run has its full history written to the archive first; the
policy then decides what happens next:

* ``full``: the archive keeps the run forever; the hot log drops it entirely.
* ``latest_snapshot``: the archive keeps the run forever; the hot log keeps
  the run's index row and latest snapshot, so its state still loads fast.
* ``ttl``: like ``full``, and the archive deletes the run ``ttl`` after it
  ended (file by file: a file goes once every run in it has expired).

``idle_after`` is the retention window: a run that is not finished (running
or parked on an interrupt) but has recorded nothing for that long is archived
too. Such a run always keeps its index row and latest snapshot in the hot
log, so that it can still be resumed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum

from agentlog.archive._errors import ArchiveConfigError

__all__ = [
    "RetentionMode",
    "RetentionPolicies",
    "RetentionPolicy",
    "format_duration",
    "parse_duration",
    "parse_policy",
]


class RetentionMode(StrEnum):
    """What is kept once a run is archived."""

    FULL = "full"
    LATEST_SNAPSHOT = "latest_snapshot"
    TTL = "ttl"


@dataclass(frozen=True)
class RetentionPolicy:
    """The retention of one class of runs."""

    mode: RetentionMode = RetentionMode.FULL
    """Keep the full history, keep the latest snapshot hot, or expire after ``ttl``."""
    ttl: timedelta | None = None
    """How long the archive keeps a run after it ended; required for ``ttl``."""
    idle_after: timedelta = timedelta(days=7)
    """A run not finished but idle this long is archived (the retention window)."""

    def __post_init__(self) -> None:
        if self.mode is RetentionMode.TTL and (self.ttl is None or self.ttl <= timedelta(0)):
            raise ArchiveConfigError("a ttl retention policy needs a positive ttl, e.g. ttl:30d")
        if self.idle_after <= timedelta(0):
            raise ArchiveConfigError("idle_after must be positive, e.g. 7d")


@dataclass(frozen=True)
class RetentionPolicies:
    """A default policy plus overrides by workflow name."""

    default: RetentionPolicy = field(default_factory=RetentionPolicy)
    """The policy of every workflow without an override."""
    per_workflow: Mapping[str, RetentionPolicy] = field(default_factory=dict)
    """Overrides, keyed by workflow name."""

    def for_workflow(self, workflow: str) -> RetentionPolicy:
        """The policy that applies to runs of ``workflow``."""
        return self.per_workflow.get(workflow, self.default)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    """``"30d"``, ``"12h"``, ``"15m"``, ``"45s"`` or ``"2w"`` as a timedelta.

    Raises:
        ArchiveConfigError: anything else.
    """
    match = _DURATION.match(text)
    if not match:
        raise ArchiveConfigError(
            f"bad duration {text!r}: write a number and a unit s, m, h, d or w, such as 30d"
        )
    return timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})


def format_duration(value: timedelta) -> str:
    """A short rendering such as ``7d`` or ``90s``."""
    seconds = value.total_seconds()
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def parse_policy(text: str, *, idle_after: timedelta | None = None) -> tuple[str, RetentionPolicy]:
    """Parse ``WORKFLOW=full``, ``WORKFLOW=latest_snapshot`` or ``WORKFLOW=ttl:30d``.

    ``*`` as the workflow means the default policy.

    Raises:
        ArchiveConfigError: the text has another shape.
    """
    name, sep, spec = text.partition("=")
    mode_text, _, ttl_text = spec.partition(":")
    if not sep or not name.strip():
        raise ArchiveConfigError(
            f"bad retention {text!r}: write WORKFLOW=full, WORKFLOW=latest_snapshot or "
            "WORKFLOW=ttl:30d (WORKFLOW may be * for every workflow)"
        )
    try:
        mode = RetentionMode(mode_text.strip())
    except ValueError as exc:
        raise ArchiveConfigError(
            f"bad retention mode {mode_text!r} in {text!r}: use full, latest_snapshot "
            "or ttl:DURATION"
        ) from exc
    ttl = parse_duration(ttl_text) if ttl_text else None
    if ttl is not None and mode is not RetentionMode.TTL:
        raise ArchiveConfigError(f"bad retention {text!r}: only the ttl mode takes a duration")
    extra = {"idle_after": idle_after} if idle_after is not None else {}
    return name.strip(), RetentionPolicy(mode=mode, ttl=ttl, **extra)
