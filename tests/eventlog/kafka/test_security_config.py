"""Kafka security settings from a log URL or KafkaConfig: parsed, checked, passwords masked.

No broker is needed here: the URL becomes a KafkaConfig, the config becomes
the aiokafka keyword arguments, and bad settings are ConfigErrors before any
connection is tried.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from agentlog.errors import ConfigError
from agentlog.eventlog._urls import kafka_config, open_log, redact_url
from agentlog.eventlog.kafka import KafkaConfig
from agentlog.eventlog.kafka._admin import _wanted, production_looking
from agentlog.eventlog.kafka._security import client_security

SECRET = "s3cr%t:p@ss"  # URL-special characters: it must be percent-encoded in a URL
ENCODED = "s3cr%25t%3Ap%40ss"


def test_every_security_parameter_of_the_url_reaches_the_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAFKA_PW", SECRET)
    monkeypatch.setenv("KEY_PW", "key-secret")
    config = kafka_config(
        "kafka://b-1.example.com:9096,b-2.example.com:9096/prod?security_protocol=SASL_SSL"
        "&sasl_mechanism=SCRAM-SHA-512&sasl_username=alice&sasl_password_env=KAFKA_PW"
        "&ssl_cafile=/etc/ca.pem&ssl_certfile=/etc/c.pem&ssl_keyfile=/etc/k.pem"
        "&ssl_key_password_env=KEY_PW&replication_factor=3&min_insync_replicas=2"
    )
    assert config.bootstrap_servers == "b-1.example.com:9096,b-2.example.com:9096"
    assert config.name == "prod"
    assert (config.security_protocol, config.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert (config.sasl_username, config.sasl_password) == ("alice", SECRET)
    assert (config.ssl_cafile, config.ssl_certfile, config.ssl_keyfile) == (
        "/etc/ca.pem",
        "/etc/c.pem",
        "/etc/k.pem",
    )
    assert config.ssl_key_password == "key-secret"
    assert (config.replication_factor, config.min_insync_replicas) == (3, 2)


def test_user_and_password_before_the_host_mean_sasl_ssl() -> None:
    config = kafka_config(f"kafka://alice:{ENCODED}@127.0.0.1:9093/agentlog")
    assert (config.sasl_username, config.sasl_password) == ("alice", SECRET)
    assert config.bootstrap_servers == "127.0.0.1:9093"
    assert config.security_protocol == "SASL_SSL"
    assert config.sasl_mechanism == "PLAIN"  # aiokafka's default too


def test_the_password_is_masked_in_repr_str_and_the_url() -> None:
    config = kafka_config(f"kafka://alice:{ENCODED}@127.0.0.1:9093/agentlog")
    for text in (repr(config), str(config), f"{config}"):
        assert SECRET not in text and ENCODED not in text
        assert "sasl_password='***'" in text
        assert "sasl_username='alice'" in text
    shown = redact_url(f"kafka://alice:{ENCODED}@127.0.0.1:9093/agentlog?partitions=2")
    assert shown == "kafka://alice:***@127.0.0.1:9093/agentlog?partitions=2"
    assert redact_url("kafka://127.0.0.1:9092/x") == "kafka://127.0.0.1:9092/x"
    # An empty password is shown as empty, not as a masked secret.
    assert "sasl_password=''" in repr(KafkaConfig(bootstrap_servers="h:1"))


async def test_a_bad_url_parameter_error_does_not_show_the_password() -> None:
    with pytest.raises(ConfigError) as caught:
        await open_log(f"kafka://alice:{ENCODED}@127.0.0.1:9093/agentlog?colour=blue")
    text = str(caught.value)
    assert "'colour'" in text and "sasl_password_env" in text
    assert SECRET not in text and ENCODED not in text and "alice:***@" in text


def test_a_missing_password_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTLOG_NO_SUCH_VAR", raising=False)
    with pytest.raises(ConfigError, match=r"AGENTLOG_NO_SUCH_VAR.*not set"):
        kafka_config("kafka://alice@h:9093/x?sasl_password_env=AGENTLOG_NO_SUCH_VAR")


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"security_protocol": "TLS"}, "security_protocol must be one of"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI"}, "sasl_mechanism"),
        ({"security_protocol": "SASL_SSL", "sasl_username": "a"}, "needs sasl_username and"),
        ({"sasl_username": "a", "sasl_password": "p"}, "security_protocol is PLAINTEXT"),
        ({"ssl_cafile": "/ca.pem"}, "does not use TLS"),
        ({"security_protocol": "SSL", "ssl_keyfile": "/k.pem"}, "need ssl_certfile"),
        ({"replication_factor": 0}, "replication_factor must be >= 1"),
        ({"replication_factor": 1, "min_insync_replicas": 2}, "every write fails"),
    ],
)
def test_inconsistent_security_settings_are_config_errors(
    options: dict[str, object], says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        KafkaConfig(bootstrap_servers="h:9093", **options)  # type: ignore[arg-type]


def test_every_client_gets_the_sasl_and_tls_settings(tmp_path: Path) -> None:
    config = KafkaConfig(
        bootstrap_servers="h:9093",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="alice",
        sasl_password=SECRET,
    )
    options = client_security(config)
    assert isinstance(options.pop("ssl_context"), ssl.SSLContext)
    assert options == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": SECRET,
    }
    assert client_security(KafkaConfig(bootstrap_servers="h:9092")) == {
        "security_protocol": "PLAINTEXT"
    }


def test_a_missing_or_bad_tls_file_is_a_config_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(ConfigError, match=r"ssl_cafile .*nope\.pem.* is not a file"):
        client_security(
            KafkaConfig(bootstrap_servers="h:1", security_protocol="SSL", ssl_cafile=str(missing))
        )
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match="cannot load the TLS files"):
        client_security(
            KafkaConfig(bootstrap_servers="h:1", security_protocol="SSL", ssl_cafile=str(garbage))
        )


def test_min_insync_replicas_default_and_setting_on_new_topics() -> None:
    def min_isr(replication: int, min_insync: int) -> set[str]:
        topics = _wanted("t", 4, replication, True, min_insync)
        return {topic.topic_configs["min.insync.replicas"] for topic in topics}

    assert min_isr(1, 0) == {"1"}
    assert min_isr(3, 0) == {"2"}
    assert min_isr(5, 3) == {"3"}


@pytest.mark.parametrize(
    ("bootstrap", "brokers", "production"),
    [
        ("127.0.0.1:9092", 1, False),
        ("localhost:9092,[::1]:9093", 1, False),
        ("127.0.0.1:9092", 3, True),
        ("kafka:9092", 1, True),  # a compose service name is another host
        ("10.0.0.5:9092", 1, True),
        ("b-1.msk.example.com:9096,127.0.0.1:9092", 1, True),
    ],
)
def test_what_looks_like_a_production_cluster(
    bootstrap: str, brokers: int, production: bool
) -> None:
    assert bool(production_looking(bootstrap, brokers)) is production
