"""The ``agentlog`` command: the presentation layer at the top.

Typer and Rich live here and nowhere else; no component imports this
package. Every command reads the log named by ``--log`` (default
``sqlite:///.agentlog/agentlog.db``, or ``AGENTLOG_LOG``) and takes
``--json``. Bad input (an unknown run, a missing log, an unreadable file, a
bad URL) prints one line on stderr and exits with code 2.

* :mod:`agentlog.cli._app`: the Typer app, global options, the error boundary;
* :mod:`agentlog.cli._runs`: ``runs``, ``show``, ``state``, ``diff`` (read only);
* :mod:`agentlog.cli._control`: ``resume``, ``send``, ``cancel``, ``recover``, ``demo``;
* :mod:`agentlog.cli._fork`: ``fork``, a new run from another run's state at a seq;
* :mod:`agentlog.cli._worker`: ``worker``, the long-running process that drives runs;
* :mod:`agentlog.cli._archive`: ``archive`` and ``sql``;
* :mod:`agentlog.cli._ui`: ``ui``, the web debugger (:mod:`agentlog.ui`);
* :mod:`agentlog.cli._render`: the one set of renderers (JSON, tables, lines);
* :mod:`agentlog.cli._help`: ``--help`` in Click's conventions, the hint for a
  global option given after the command;
* :mod:`agentlog.cli._workflows`: ``--app`` loading; :mod:`agentlog.cli._logs`:
  ``-v`` and ``--log-format``.
"""

import importlib

from agentlog.cli._app import app, main

__all__ = ["app", "main"]

# Importing a command module registers its commands; this order is --help's.
for _module in ("runs", "control", "fork", "worker", "archive", "verify", "ui"):
    importlib.import_module(f"agentlog.cli._{_module}")
