"""Every ``--help`` follows Click's conventions (issue 21 item 8): flags show no
metavar, values show TEXT/INTEGER/[a|b], usage lines name ``RUN_ID``, and each
paragraph of a command's docstring is printed whole, wrapped by the terminal."""

from __future__ import annotations

import inspect
import re

import pytest
import typer.main
from typer.testing import CliRunner

from agentlog.cli import app

runner = CliRunner()
#: Wide enough that every paragraph fits on one line of the help.
WIDE = {"COLUMNS": "1000", "TERMINAL_WIDTH": "1000"}
COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
#: Typer's Python-type labels: <bool>, <int>, <str>, <list[str]>, <int range>, <a|b>.
TYPE_LABEL = re.compile(r"<(?:bool|int|str|float|path|list\[[^>]*\])(?: range)?>|<\w+(?:\|\w+)+>")


def _help(*args: str) -> str:
    result = runner.invoke(app, [*args, "--help"], env=WIDE)
    assert result.exit_code == 0, result.output
    return result.stdout


def _paragraphs(doc: str | None) -> list[str]:
    return [" ".join(p.split()) for p in inspect.cleandoc(doc or "").split("\n\n") if p.strip()]


def _lines(text: str) -> list[str]:
    """The help's lines without the panels' borders, spaces collapsed."""
    return [" ".join(line.strip(" │╭╮╰╯─").split()) for line in text.splitlines()]


@pytest.mark.parametrize("name", ["", *COMMANDS])
def test_help_shows_click_metavars_and_usage(name: str) -> None:
    shown = _help(*([name] if name else []))
    assert not TYPE_LABEL.search(shown), TYPE_LABEL.findall(shown)
    usage = next(line for line in shown.splitlines() if "Usage:" in line)
    assert "{" not in usage and "}" not in usage, usage
    arguments = re.findall(r"\[?([A-Za-z_]+)\]?", usage.split("[OPTIONS]", 1)[1])
    assert all(arg.isupper() or arg in ("COMMAND", "ARGS") for arg in arguments), usage
    for line in shown.splitlines():  # a flag (or --help) is followed by its help, no metavar
        flag = re.search(r"(--json|--help|--version|--verbose\s+-v)\s+(\S+)", line)
        assert flag is None or not re.fullmatch(r"[A-Z_:.|\[\]]{2,}|<.*>", flag[2]), line


@pytest.mark.parametrize("name", COMMANDS)
def test_every_paragraph_of_a_command_is_printed_whole(name: str) -> None:
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    paragraphs = _paragraphs(command.callback.__doc__)
    lines = _lines(_help(name))
    for paragraph in paragraphs:
        assert paragraph in lines, f"{name}: {paragraph!r} is not one line in {lines}"
    # The list of commands shows the first paragraph whole, too.
    assert any(line.endswith(paragraphs[0]) for line in _lines(_help())), paragraphs[0]


def test_repeatable_options_name_their_values() -> None:
    assert re.search(r"--app\s+MODULE:ATTR\s", _help("worker"))
    assert re.search(r"--public-host\s+HOST\s", _help("ui"))
    assert re.search(r"--mode\s+\[events\|updates\|values\|progress\]", _help("show"))


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["runs", "-v"], "agentlog -v runs"),
        (["runs", "-vv"], "agentlog -vv runs"),
        (["show", "r1", "--log-format", "json"], "agentlog --log-format json show"),
    ],
)
def test_a_global_option_after_the_command_says_where_it_goes(args: list[str], hint: str) -> None:
    result = runner.invoke(app, args, env=WIDE)
    assert result.exit_code == 2, result.output
    assert "put it before the command" in result.output and hint in result.output, result.output
