"""Credentials in a URL never reach text: errors, logs, the UI, CLI output.

``redact_url`` is the one helper: the ``user:password@`` password, and the
value of every query parameter named like a secret, become ``***``.
"""

from __future__ import annotations

import socket

import pytest

from agentlog.archive import open_archive
from agentlog.errors import AgentlogError, BackendUnavailableError, ConfigError
from agentlog.eventlog._urls import kafka_config, open_log, redact_url

SECRET = "S3cr3t"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            f"postgresql://bob@db/agentlog?password={SECRET}",
            "postgresql://bob@db/agentlog?password=***",
        ),
        (
            f"postgresql://bob:{SECRET}@db/agentlog?sslmode=require&sslpassword={SECRET}",
            "postgresql://bob:***@db/agentlog?sslmode=require&sslpassword=***",
        ),
        (
            f"kafka://h:9092/n?sasl_password={SECRET}&ssl_password={SECRET}&partitions=3",
            "kafka://h:9092/n?sasl_password=***&ssl_password=***&partitions=3",
        ),
        (
            f"x://h/?passwd={SECRET}&pwd={SECRET}&token={SECRET}&key={SECRET}&api_key={SECRET}"
            f"&client_secret={SECRET}&credentials={SECRET}&Access_Token={SECRET}",
            "x://h/?passwd=***&pwd=***&token=***&key=***&api_key=***"
            "&client_secret=***&credentials=***&Access_Token=***",
        ),
        (  # an environment variable's name is not a secret; a key file's path neither
            "kafka://h:9092/n?sasl_password_env=KAFKA_PASSWORD&ssl_keyfile=/etc/k.pem",
            "kafka://h:9092/n?sasl_password_env=KAFKA_PASSWORD&ssl_keyfile=/etc/k.pem",
        ),
        (
            f"s3://bucket/p?endpoint=http://minio:{SECRET}@h:9000&region=eu",
            "s3://bucket/p?endpoint=http://minio:***@h:9000&region=eu",
        ),
        (f"redis://:{SECRET}@h:6379/0?prefix=a", "redis://:***@h:6379/0?prefix=a"),
        ("sqlite:///.agentlog/agentlog.db", "sqlite:///.agentlog/agentlog.db"),
        (f"postgresql://u:{SECRET}@[::1/db", "postgresql://***"),
    ],
)
def test_every_credential_is_masked(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_password_parameter_stays_out_of_backend_unavailable() -> None:
    url = (
        f"postgresql://bob@127.0.0.1:{_closed_port()}/agentlog?password={SECRET}&connect_timeout=1"
    )
    with pytest.raises(BackendUnavailableError) as caught:
        await open_log(url)
    assert SECRET not in str(caught.value) and "password=***" in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        f"kafka://127.0.0.1:9092/x?sasl_password={SECRET}",
        f"kafka://alice:{SECRET}@127.0.0.1:9092/x?token={SECRET}&partitions=many",
        f"redis://:{SECRET}@127.0.0.1:6379/0?prefix=a&password={SECRET}&allow_volatile=maybe",
        f"postgresql://bob@127.0.0.1/db?password={SECRET}&pool_size=0",
        f"nosuch://bob:{SECRET}@h/db?token={SECRET}",
    ],
)
async def test_a_refused_url_is_echoed_masked(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        if url.startswith("kafka"):
            kafka_config(url)
        else:
            await open_log(url)
    assert SECRET not in str(caught.value) and "***" in str(caught.value)


def test_a_refused_archive_url_is_echoed_masked() -> None:
    with pytest.raises(AgentlogError) as caught:
        open_archive(f"s3://bucket/p?secret_access_key={SECRET}")
    assert SECRET not in str(caught.value) and "secret_access_key=***" in str(caught.value)
