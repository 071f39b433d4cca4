"""The one set of renderers: JSON for scripts, Rich tables and lines for people.

Data is never Rich markup. Every value that comes from a run (ids, step
names, payloads, errors, SQL rows) reaches the terminal as a
:class:`rich.text.Text`, which Rich prints as it is: ``[bold]`` stays
visible and ``:x:`` stays ``:x:``. The consoles themselves are made with
markup, emoji and highlighting off, so a plain ``str`` is safe too.

JSON is always valid JSON: ``NaN`` and the infinities become ``null`` (as
JavaScript's ``JSON.stringify`` does), bytes base64 text, datetimes ISO 8601.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import orjson
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from agentlog.eventlog.codec import jsonable
from agentlog.eventlog.events import utcnow
from agentlog.replay._rows import NO_KEY, SHREDDED, short

__all__ = [
    "age",
    "cell",
    "err",
    "event_text",
    "out",
    "print_error",
    "print_json",
    "print_json_line",
    "print_line",
    "print_table",
    "print_timeline",
    "short",
    "table",
    "timeline_note",
    "to_json",
]

#: Results go to stdout; errors, progress and logs to stderr.
out = Console(markup=False, emoji=False, highlight=False)
err = Console(stderr=True, markup=False, emoji=False, highlight=False)


def to_json(value: Any) -> str:
    """``value`` as indented, always-valid JSON text."""
    return orjson.dumps(jsonable(value), option=orjson.OPT_INDENT_2).decode()


def print_json(value: Any) -> None:
    """Print ``value`` as JSON on stdout, unstyled, so scripts can parse it."""
    sys.stdout.write(to_json(value) + "\n")
    sys.stdout.flush()


def print_json_line(value: Any) -> None:
    """Print ``value`` as one line of compact JSON (JSON Lines), flushed at once."""
    sys.stdout.write(orjson.dumps(jsonable(value)).decode() + "\n")
    sys.stdout.flush()


def print_error(message: object) -> None:
    """One line on stderr: ``error: <message>``."""
    err.print(Text.assemble(("error:", "bold red"), " ", str(message)), soft_wrap=True)


def print_line(*parts: str | tuple[str, str]) -> None:
    """One line on stdout from plain text parts and ``(text, style)`` pairs."""
    out.print(Text.assemble(*parts), soft_wrap=True)


def cell(value: Any) -> Text:
    """A table cell that shows ``value`` literally (never markup, never emoji)."""
    return value if isinstance(value, Text) else Text("NULL" if value is None else str(value))


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    """A table whose headers, title and cells all print literally."""
    grid = Table(title=Text(title) if title else None, title_justify="left")
    for column in columns:
        grid.add_column(Text(column), overflow="fold")
    for row in rows:
        grid.add_row(*(cell(v) for v in row))
    return grid


def print_table(renderable: RenderableType, console: Console | None = None) -> None:
    """Print a table (or any renderable) on stdout."""
    (console or out).print(renderable)


def age(ts: datetime | None) -> str:
    """How long ago ``ts`` was, in the largest whole unit (``3h``)."""
    if ts is None:
        return ""
    seconds = (utcnow() - ts).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def timeline_note(rows: Iterable[dict[str, Any]]) -> str:
    """What the timeline's title adds when content could not be shown."""
    marks = {row.get("unreadable") for row in rows}
    if SHREDDED in marks:
        return " (shredded: its data key is destroyed; metadata only)"
    if NO_KEY in marks:
        return " (encrypted: no key here, set AGENTLOG_KEYRING=PATH to read it; metadata only)"
    return ""


#: How much of a key the timeline shows (``--json`` has it whole).
KEY_SHOWN = 12
#: How much of one payload value the timeline shows before folding it with "…".
VALUE_SHOWN = 60


def print_timeline(rows: list[dict[str, Any]], title: str, console: Console | None = None) -> None:
    """The timeline as a table: seq, time, type, and what happened.

    The last column starts with what identifies the event (its step, its
    task's name, its key), then the rest of the payload as ``field=value``,
    each value cut at :data:`VALUE_SHOWN` characters; it wraps instead of
    being cut, so that at 80 columns (the width when piped) a row still names
    its step and task.
    """
    console = console or out
    grid = Table(title=Text(title), title_justify="left")
    grid.add_column("seq", justify="right", no_wrap=True)
    grid.add_column("time", no_wrap=True)
    grid.add_column("type", no_wrap=True)
    grid.add_column("what", overflow="fold", ratio=1)
    for row in rows:
        grid.add_row(cell(row["seq"]), cell(row["ts"][11:23]), cell(row["type"]), event_text(row))
    console.print(grid)


def event_text(row: dict[str, Any]) -> Text:
    """What a timeline row says happened: its identity first, then its payload."""
    payload = dict(row["payload"])
    task = row.get("task") or ""
    if task and payload.get("name") == task:
        del payload["name"]  # TaskStarted's own copy of the name, shown once
    key = payload.pop("key", None)
    text = Text()
    for part, style in (
        (row["step"], "bold"),
        (task, "cyan"),
        (f"key={key[:KEY_SHOWN]}…" if isinstance(key, str) else "", ""),
    ):
        if part:
            text.append(Text(part, style) + " ")
    for field, value in payload.items():
        shown = f"{value:g}" if isinstance(value, float) else short(value, VALUE_SHOWN)
        text.append(Text(f"{field}=", "dim") + shown + " ")
    text.rstrip()
    return text
