"""compose.yaml's postgres service and the PostgreSQL URL of docs/servers.md say the same thing."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]


def test_readme_url_matches_the_compose_postgres_service() -> None:
    service = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]["postgres"]
    env = service["environment"]
    host, host_port, container = str(service["ports"][0]).split(":")
    assert host == "127.0.0.1" and container == "5432"
    url = (
        f"postgresql://{env['POSTGRES_USER']}:{env['POSTGRES_PASSWORD']}"
        f"@{host}:{host_port}/{env['POSTGRES_DB']}"
    )
    assert url in (REPO / "docs" / "servers.md").read_text()
