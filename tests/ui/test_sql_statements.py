"""The SQL page's API runs one statement per query and keeps DuckDB's caret line."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from agentlog.ui import create_app
from agentlog.ui._actions import CSRF_HEADER
from tests.support.ui import Recorded
from tests.ui.test_sql_limits import token_of


@pytest.mark.process
def test_the_api_refuses_a_second_statement_and_keeps_the_caret(recorded: Recorded) -> None:
    app = create_app(recorded.log_url, recorded.archive_url)
    with TestClient(app, base_url="http://127.0.0.1:8765") as http:
        http.headers[CSRF_HEADER] = token_of(http.get("/sql").text)
        two = http.get("/api/sql", params={"q": "SELECT 1 AS a; SELECT 2 AS b"})
        assert two.status_code == 400, two.text
        assert "2 statements" in two.json()["error"] and "rows" not in two.json()
        typo = http.get("/api/sql", params={"q": "SELECT * FORM runs"})
        assert typo.status_code == 400, typo.text
        lines = typo.json()["error"].splitlines()
        quoted = next(i for i, line in enumerate(lines) if line.startswith("LINE 1: "))
        assert lines[quoted + 1].index("^") == lines[quoted].index("runs"), lines
        one = http.get("/api/sql", params={"q": "SELECT 2 AS b;"})
        assert one.status_code == 200 and one.json()["rows"] == [[2]], one.text
