"""Old public names kept importable, with a warning, after a rename.

A package lists its renamed names and assigns the result of :func:`renamed`
to its module-level ``__getattr__``: ``from agentlog.archive import
ArchivedEventLog`` keeps working (with a :class:`DeprecationWarning` naming
the new name) for one minor release, and the old name is never in
``__all__``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["renamed"]


def renamed(
    package: str, names: Mapping[str, str], scope: Mapping[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` that answers each old name with its new object."""

    def __getattr__(name: str) -> Any:
        new = names.get(name)
        if new is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        warnings.warn(
            f"{package}.{name} was renamed {package}.{new}; the old name goes in a later release",
            DeprecationWarning,
            stacklevel=2,
        )
        return scope[new]

    return __getattr__
