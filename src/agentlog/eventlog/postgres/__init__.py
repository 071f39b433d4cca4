"""The PostgreSQL backend: the log in two tables of one database.

Modules, by role (the same roles in every backend package):

* :mod:`~agentlog.eventlog.postgres._log`: :class:`PostgresEventLog`, the
  backend's hooks under the shared indexed read path;
* :mod:`~agentlog.eventlog.postgres._connection`: the pool, the target and
  what a driver error means;
* :mod:`~agentlog.eventlog.postgres._schema`: the tables and the statements;
* :mod:`~agentlog.eventlog.postgres._append`: an append's one round trip.
"""

from agentlog.eventlog.postgres._log import PostgresEventLog

__all__ = ["PostgresEventLog"]
