"""The UI's own refusals, under :class:`agentlog.errors.AgentlogError` like every other.

Each names the HTTP status it is answered with (:func:`agentlog.ui._app.create_app`
maps them), says what was wrong and what to do instead::

    ConfigError
    └── RequestBodyError        a JSON body that is not a JSON object, or too deep (400)
        └── BodyTooLargeError   a body past MAX_BODY_BYTES (413)
    SqlLimitError
    └── SqlBusyError            as many SQL queries run as the UI allows (429)
"""

from __future__ import annotations

from agentlog.archive._errors import SqlLimitError
from agentlog.archive._sql import VIEWS
from agentlog.errors import ConfigError

__all__ = ["BodyTooLargeError", "RequestBodyError", "SqlBusyError"]


class RequestBodyError(ConfigError):
    """A request body the UI does not decode: not JSON, not an object, or nested too deep."""

    status = 400


class BodyTooLargeError(RequestBodyError):
    """A request body larger than the UI reads; nothing of it was decoded."""

    status = 413

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(
            f"the request body is larger than {limit:,} bytes, the most an action takes; "
            "send a smaller value (the UI's actions carry an answer, a reason or a fork's "
            "updates, never bulk data)"
        )


class SqlBusyError(SqlLimitError):
    """A query refused because the UI runs as many queries as it allows at once."""

    status = 429

    def __init__(self, sql: str, running: int) -> None:
        super().__init__(
            sql,
            "running",
            f"{running} SQL {'query is' if running == 1 else 'queries are'} running, the "
            "most this UI runs at once, so this one did not start. Wait for one to finish "
            "(or close the page that runs it) and try again, or start the UI with a larger "
            "--sql-max-running",
            VIEWS,
        )
