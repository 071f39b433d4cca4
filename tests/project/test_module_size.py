"""No module of src/agentlog is over 500 lines (issue 22).

A module that long holds more than one idea, and a newcomer has to read all
of it to find the one they need; split it along its seams into private
modules (``errors`` and ``eventlog.events`` re-export theirs), and keep the
public import path.
"""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

import agentlog
from agentlog import errors
from agentlog.eventlog import events

_ROOT = Path(agentlog.__file__).parent
_MOST_LINES = 500


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_walk_sees_every_module() -> None:
    """The walk reaches nested packages and counts lines as ``wc -l`` does
    (a test of the test)."""
    sizes = {path.relative_to(_ROOT): _lines(path) for path in _ROOT.rglob("*.py")}
    assert len(sizes) > 100
    assert any(len(path.parts) >= 3 for path in sizes), "no module of a nested package"
    init = _ROOT / "__init__.py"
    assert sizes[Path("__init__.py")] == init.read_bytes().count(b"\n") > 10


def test_no_module_is_over_500_lines() -> None:
    too_long = sorted(
        f"{path.relative_to(_ROOT).as_posix()} ({lines} lines)"
        for path in _ROOT.rglob("*.py")
        if (lines := _lines(path)) > _MOST_LINES
    )
    assert not too_long, (
        f"modules over {_MOST_LINES} lines (split each along its seams into private "
        "modules, and re-export the names from the public one): " + ", ".join(too_long)
    )


@pytest.mark.parametrize("name", errors.__all__)
def test_an_error_keeps_its_module(name: str) -> None:
    """An error defined in a private module of agentlog.errors says it lives
    in agentlog.errors: tracebacks, pickles and the API reference name it
    ``agentlog.errors.X`` as before the split."""
    cls = getattr(errors, name)
    assert cls.__module__ == "agentlog.errors"
    typing.get_type_hints(cls)  # its annotations resolve where it says it lives


@pytest.mark.parametrize("cls", [events.EventData, *events.EVENT_TYPES.values()])
def test_a_payload_class_is_imported_from_events(cls: type) -> None:
    """Every payload class, defined in eventlog/_payloads.py, is re-exported
    by agentlog.eventlog.events, and its annotations resolve."""
    assert getattr(events, cls.__name__) is cls
    assert cls.__name__ in events.__all__
    typing.get_type_hints(cls)
