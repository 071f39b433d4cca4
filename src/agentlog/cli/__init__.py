"""The ``agentlog`` command: the presentation layer at the top.

Typer and Rich live here and nowhere else; no component imports this
package. Every command reads the log named by ``--log`` (default
``sqlite:///.agentlog/agentlog.db``, or ``AGENTLOG_LOG``) and takes
``--json``. Bad input (an unknown run, a missing log, an unreadable file, a
bad URL) prints one line on stderr and exits with code 2.

* :mod:`agentlog.cli.app`: the Typer app, global options, the error boundary;
* :mod:`agentlog.cli.runs`: ``runs``, ``show``, ``state``, ``diff`` (read only);
* :mod:`agentlog.cli.control`: ``resume``, ``cancel``, ``recover``, ``demo``;
* :mod:`agentlog.cli.fork`: ``fork``, a new run from another run's state at a seq;
* :mod:`agentlog.cli.worker`: ``worker``, the long-running process that drives runs;
* :mod:`agentlog.cli.archive`: ``archive`` and ``sql``;
* :mod:`agentlog.cli.ui`: ``ui``, the web debugger (:mod:`agentlog.ui`);
* :mod:`agentlog.cli.render`: the one set of renderers (JSON, tables, lines);
* :mod:`agentlog.cli.help`: ``--help`` in Click's conventions, the hint for a
  global option given after the command;
* :mod:`agentlog.cli.workflows`: ``--app`` loading; :mod:`agentlog.cli.logs`:
  ``-v`` and ``--log-format``.
"""

import importlib

from agentlog.cli.app import app, main

__all__ = ["app", "main"]

# Importing a command module registers its commands; this order is --help's.
for _module in ("runs", "control", "fork", "worker", "archive", "verify", "ui"):
    importlib.import_module(f"agentlog.cli.{_module}")
