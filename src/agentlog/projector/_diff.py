"""What changed in a run's state between two points."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentlog.projector._state import INTERNAL_FIELDS, RunState

__all__ = ["Change", "diff_states"]

# Fields that are bookkeeping rather than what a developer debugs.
_SKIPPED = frozenset({"run_id", "seq", "reducers", "fingerprint", "limits", "input"})


@dataclass(frozen=True, slots=True)
class Change:
    """One difference: ``path`` is ``values.<key>`` or a RunState field name."""

    path: str
    op: str  # "added", "removed" or "changed"
    before: Any = None
    after: Any = None

    def to_dict(self) -> dict[str, Any]:
        """As builtin values, for ``--json``."""
        return {"path": self.path, "op": self.op, "before": self.before, "after": self.after}


def _compare(path: str, before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    changes = []
    for key in before.keys() | after.keys():
        name = f"{path}{key}"
        if key not in after:
            changes.append(Change(name, "removed", before[key], None))
        elif key not in before:
            changes.append(Change(name, "added", None, after[key]))
        elif before[key] != after[key]:
            changes.append(Change(name, "changed", before[key], after[key]))
    return sorted(changes, key=lambda c: c.path)


def diff_states(before: RunState, after: RunState, *, internal: bool = True) -> list[Change]:
    """Changes from ``before`` to ``after``: state values first, then run fields.

    Args:
        internal: also compare the runtime's bookkeeping
            (:data:`~agentlog.projector._state.INTERNAL_FIELDS`); a person
            debugging their state asks for it only when they need it.
    """
    skipped = _SKIPPED if internal else _SKIPPED | INTERNAL_FIELDS
    fields_before = {k: v for k, v in before.to_dict().items() if k not in skipped}
    fields_after = {k: v for k, v in after.to_dict().items() if k not in skipped}
    values = _compare("values.", fields_before.pop("values"), fields_after.pop("values"))
    return values + _compare("", fields_before, fields_after)
