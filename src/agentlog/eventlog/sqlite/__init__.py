"""The SQLite backend, the embedded default: the whole log in one file.

Modules, by role (the same roles in every backend package):

* :mod:`~agentlog.eventlog.sqlite._log`: :class:`SqliteEventLog`, the
  backend's hooks under the shared indexed read path;
* :mod:`~agentlog.eventlog.sqlite._connection`: opening the file, its
  pragmas, and what a SQLite error code means;
* :mod:`~agentlog.eventlog.sqlite._schema`: the tables and the statements;
* :mod:`~agentlog.eventlog.sqlite._group_commit`: many appends in one
  transaction and one fsync;
* :mod:`~agentlog.eventlog.sqlite._reader`: the reads run on the caller's
  thread, and :mod:`~agentlog.eventlog.sqlite._cold_read`: a run's newest
  snapshot and the events after it in one statement.
"""

from agentlog.eventlog.sqlite._log import SqliteEventLog

__all__ = ["SqliteEventLog"]
