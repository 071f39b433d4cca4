"""The Redis backend: the log in streams and hashes of one Redis database.

Modules, by role (the same roles in every backend package):

* :mod:`~agentlog.eventlog.redis._log`: :class:`RedisEventLog`, the
  backend's hooks under the shared indexed read path;
* :mod:`~agentlog.eventlog.redis._connection`: :class:`RedisConfig`, the
  client, and the server's durability settings;
* :mod:`~agentlog.eventlog.redis._schema`: the key layout and the Lua
  scripts that run the rules inside the server;
* :mod:`~agentlog.eventlog.redis._rows`, :mod:`~agentlog.eventlog.redis._pages`:
  the run index's rows and its pages.
"""

from agentlog.eventlog.redis._connection import RedisConfig
from agentlog.eventlog.redis._log import RedisEventLog

__all__ = ["RedisConfig", "RedisEventLog"]
