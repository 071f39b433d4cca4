"""``--help`` as Click and Typer users read it, for every command.

Typer labels each value by its Python type (``<bool>`` on a flag that takes
no value, ``<list[str]>``, ``{run_id}`` in the usage line) and keeps the
line breaks of a docstring, so a paragraph breaks where the source did,
not where the terminal does. The command classes here restore the usual
conventions, in one place for every command:

* a flag (or a counted ``-v``) shows no metavar; a value shows ``TEXT``,
  ``INTEGER``, ``FLOAT``, ``[a|b]``, a repeatable one ``TEXT...``, unless
  the option names its own metavar (``--app MODULE:ATTR``);
* the usage line names arguments as ``RUN_ID`` (``[NAME]`` when optional);
* each paragraph of a docstring is one line that the terminal wraps
  (:func:`help_text`; a paragraph starting with ``\\b`` keeps its lines);
* a global option given after the command (``agentlog runs -v``) is
  refused with a hint to put it before (``agentlog -v runs``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable

from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

try:  # a Typer that carries its own copy of Click
    from typer._click.core import Context, Parameter
    from typer._click.exceptions import NoSuchOption
except ImportError:  # pragma: no cover - a Typer on Click
    from click import Context, Parameter  # type: ignore[assignment]
    from click.exceptions import NoSuchOption  # type: ignore[assignment]

__all__ = ["GLOBAL_OPTIONS", "HelpCommand", "HelpGroup", "help_text"]

#: The options of ``agentlog`` itself, which go before the command.
GLOBAL_OPTIONS = ("-v", "--verbose", "--log-format", "--version")

#: Typer's type labels -> Click's metavars.
_CLICK_NAMES = {
    "str": "TEXT",
    "int": "INTEGER",
    "int range": "INTEGER",
    "float": "FLOAT",
    "float range": "FLOAT",
    "path": "PATH",
    "file": "FILE",
    "directory": "DIRECTORY",
    "uuid": "UUID",
}
_LIST = re.compile(r"list\[(.*)\]")


def help_text(doc: str | None) -> str:
    """A docstring as help: each paragraph one line, so the terminal wraps it
    whole; a paragraph that starts with ``\\b`` keeps its line breaks."""
    paragraphs = inspect.cleandoc(doc or "").split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split()) for p in paragraphs)


def _click_metavar(param: TyperArgument | TyperOption, ctx: Context) -> str | None:
    """The metavar Click would show for ``param`` ("" for a flag), or None for
    a Typer that already labels values as Click does."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return ""
    shown = getattr(param, "display_type", None)
    if shown is None:  # pragma: no cover - no Python-type labels to replace
        return None
    label = str(shown(ctx)).strip("<>")
    repeated = _LIST.fullmatch(label)
    inner = repeated[1] if repeated else label
    name = f"[{inner}]" if "|" in inner else _CLICK_NAMES.get(inner, inner.upper())
    return name + "..." if repeated or param.nargs != 1 else name


def _showing(label: str) -> Callable[[Context], str]:
    """A ``display_type_rich`` that shows ``label``."""
    return lambda ctx: label


class _Conventions:
    """What :class:`HelpCommand` and :class:`HelpGroup` share."""

    def get_params(self, ctx: Context) -> list[Parameter]:
        params: list[Parameter] = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if isinstance(param, TyperOption) and param.metavar is None:
                param.metavar = _click_metavar(param, ctx)
            elif isinstance(param, TyperArgument) and param.metavar is None:
                label = _click_metavar(param, ctx)
                param.metavar = (param.name or "").upper()
                if label is not None:  # Typer shows the value's type beside the name
                    param.display_type_rich = _showing(label)  # type: ignore[method-assign,assignment]
        return params

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        pieces: list[str] = super().collect_usage_pieces(ctx)  # type: ignore[misc]
        for param in self.get_params(ctx):
            if not isinstance(param, TyperArgument):
                continue
            name = param.metavar or (param.name or "").upper()
            name = name if param.required else f"[{name}]"
            name += "..." if param.nargs != 1 else ""
            for typer_piece in param.get_usage_pieces(ctx):
                if typer_piece in pieces:
                    pieces[pieces.index(typer_piece)] = name
        return pieces


class HelpCommand(_Conventions, TyperCommand):
    """A command whose help follows Click's conventions (see the module)."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        given = list(args)  # the parser consumes ``args``
        try:
            return super().parse_args(ctx, args)
        except NoSuchOption as exc:
            if exc.option_name not in GLOBAL_OPTIONS:
                raise
            moved = " ".join(_global_args(given))
            raise NoSuchOption(
                exc.option_name,
                message=f"{exc.option_name} is an option of agentlog itself: put it before "
                f"the command, as in: agentlog {moved} {ctx.info_name} ...",
                ctx=ctx,
            ) from None


def _global_args(args: list[str]) -> list[str]:
    """The global options among a command's ``args``, with their values."""
    found: list[str] = []
    for index, arg in enumerate(args):
        name = arg.split("=", 1)[0]
        if re.fullmatch(r"-v+", arg) or name in GLOBAL_OPTIONS:
            found.append(arg)
            if arg == "--log-format" and index + 1 < len(args):
                found.append(args[index + 1])
    return found


class HelpGroup(_Conventions, TyperGroup):
    """The ``agentlog`` group, with the same conventions as its commands."""
