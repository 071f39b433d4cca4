"""The Typer application, its global options, and the one error boundary.

Every command is registered with :func:`command`, which turns any
:class:`~agentlog.errors.AgentlogError` into one line on stderr and exit
code 2. Anything else that escapes is a bug in agentlog: it is shown as one
line too (exit code 1), and ``-vv`` shows the traceback.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, ParamSpec, TypeVar

import typer

from agentlog import __version__
from agentlog.cli._help import HelpCommand, HelpGroup, help_text
from agentlog.cli._logs import LogFormat, configure_logging
from agentlog.cli._render import print_error
from agentlog.errors import AgentlogError

__all__ = ["app", "command", "main", "run_async"]

P = ParamSpec("P")
T = TypeVar("T")

app = typer.Typer(
    name="agentlog",
    cls=HelpGroup,
    help="Durable, event-sourced runs for long-running AI agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_verbosity = 0


def run_async(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the coroutine ``make()`` to the end on a fresh event loop."""
    return asyncio.run(make())


def command(name: str | None = None) -> Callable[[Callable[P, None]], Callable[P, None]]:
    """Register a command on :data:`app` behind the error boundary, with its
    help in Click's conventions (:mod:`agentlog.cli._help`)."""

    def register(fn: Callable[P, None]) -> Callable[P, None]:
        @functools.wraps(fn)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> None:
            try:
                fn(*args, **kwargs)
            except AgentlogError as exc:
                print_error(exc)
                raise typer.Exit(2) from None
            except (typer.Exit, typer.Abort, KeyboardInterrupt):
                raise
            except Exception as exc:
                if _verbosity >= 2:
                    raise
                print_error(
                    f"internal error ({type(exc).__name__}: {exc}); this is a bug in "
                    "agentlog: please report it with the output of the same command "
                    "run with -vv"
                )
                raise typer.Exit(1) from None

        app.command(name, cls=HelpCommand, help=help_text(fn.__doc__))(guarded)
        return fn

    return register


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"agentlog {__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    verbose: Annotated[
        int,
        typer.Option("--verbose", "-v", count=True, help="-v: info logs; -vv: debug logs."),
    ] = 0,
    log_format: Annotated[
        LogFormat, typer.Option("--log-format", help="Log lines on stderr as console or json.")
    ] = LogFormat.CONSOLE,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """Durable, event-sourced runs for long-running AI agents."""
    global _verbosity
    _verbosity = verbose
    configure_logging(verbose, log_format)


def main() -> None:
    """Entry point of the ``agentlog`` script and of ``python -m agentlog``."""
    app(prog_name="agentlog")
