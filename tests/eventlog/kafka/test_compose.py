"""compose.yaml and the "Run on Kafka and S3" section of docs/servers.md say the same thing.

No Docker engine runs here, so the file is checked, not started: the
services, images, ports, credentials and bucket must match the URLs that the
guide tells users to export.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
SECTION = "## Run on Kafka and S3"


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load((REPO / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def _section() -> str:
    text = (REPO / "docs" / "servers.md").read_text()
    assert SECTION in text, f"docs/servers.md has no section {SECTION!r}"
    body = text.split(SECTION, 1)[1]
    return body.split("\n## ", 1)[0]


def _host_ports(service: dict[str, Any]) -> dict[int, str]:
    """container port -> host address:port, from ``"127.0.0.1:HOST:CONTAINER"``."""
    out = {}
    for spec in service["ports"]:
        host, host_port, container = str(spec).split(":")
        out[int(container)] = f"{host}:{host_port}"
    return out


def test_compose_has_kafka_4_kraft_and_minio_with_a_bucket() -> None:
    services = _compose()["services"]
    assert {"kafka", "minio", "minio-init"} <= set(services)  # other backends add theirs
    kafka = services["kafka"]
    assert kafka["image"].startswith("apache/kafka:4.0.")
    env = kafka["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft, no ZooKeeper
    assert env["KAFKA_NODE_ID"] == "1"
    assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "1"  # transactions on 1 node
    assert services["minio"]["image"].startswith("minio/minio:")
    init = services["minio-init"]
    assert init["depends_on"]["minio"]["condition"] == "service_healthy"
    assert "mc mb" in " ".join(init["entrypoint"])


def test_every_port_is_published_on_loopback_only() -> None:
    for name, service in _compose()["services"].items():
        for spec in service.get("ports", []):
            assert str(spec).startswith("127.0.0.1:"), (name, spec)


def test_readme_urls_match_compose() -> None:
    services = _compose()["services"]
    section = _section()

    kafka_ports = _host_ports(services["kafka"])
    advertised = services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert advertised == f"PLAINTEXT://{kafka_ports[9092]}"
    log_url = re.search(r"AGENTLOG_LOG=(kafka://\S+)", section)
    assert log_url, "the section must export AGENTLOG_LOG=kafka://..."
    assert log_url.group(1).startswith(f"kafka://{kafka_ports[9092]}/")
    name = log_url.group(1).rsplit("/", 1)[1]
    assert f"{name}.events" in section and f"{name}.runs" in section

    minio = services["minio"]
    minio_ports = _host_ports(minio)
    archive = re.search(r"AGENTLOG_ARCHIVE='(s3://[^']+)'", section)
    assert archive, "the section must export AGENTLOG_ARCHIVE='s3://...'"
    bucket = archive.group(1).removeprefix("s3://").split("/", 1)[0]
    assert f"endpoint=http://{minio_ports[9000]}" in archive.group(1)
    assert f"local/{bucket}" in " ".join(services["minio-init"]["entrypoint"])
    env = minio["environment"]
    assert f"AWS_ACCESS_KEY_ID={env['MINIO_ROOT_USER']}" in section
    assert f"AWS_SECRET_ACCESS_KEY={env['MINIO_ROOT_PASSWORD']}" in section
    for port in (*kafka_ports.values(), *minio_ports.values()):
        assert port in section, f"docs/servers.md does not mention {port}"
