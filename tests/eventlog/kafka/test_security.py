"""Kafka security on a real broker: SASL_SSL (SCRAM-SHA-512, PLAIN), mutual TLS, typed refusals.

The broker is ``kafka_sasl`` (tests/services/kafka_broker.py): one per
session, with a SASL_SSL listener and an SSL listener that requires a client
certificate, its keys made with keytool and its SCRAM user added at format
time by Kafka's StorageTool.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from agentlog.errors import BackendUnavailableError, KafkaAuthError
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog
from agentlog.eventlog.kafka._admin import ensure_topics
from agentlog.eventlog.kafka._clients import stop_quietly
from agentlog.eventlog.kafka._grouplog import PartitionedKafkaEventLog
from agentlog.testing import EventLogContract, read_all, seed
from tests.eventlog.kafka.group_support import PARTITIONS, SESSION_S, settle, start_run
from tests.services.kafka_broker import SecureBroker

pytestmark = pytest.mark.kafka

#: Long enough that a refusal reported as KafkaAuthError cannot be this
#: timeout running out (that would be a plain BackendUnavailableError).
CONNECT_TIMEOUT_S = 60.0


def _name() -> str:
    return f"s{uuid.uuid4().hex[:12]}"


def scram_config(broker: SecureBroker, name: str, **overrides: Any) -> KafkaConfig:
    """A config for the SASL_SSL listener as the SCRAM-SHA-512 user."""
    options: dict[str, Any] = {
        "bootstrap_servers": broker.sasl_ssl,
        "name": name,
        "partitions": 2,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": broker.scram_user,
        "sasl_password": broker.scram_password,
        "ssl_cafile": broker.cafile,
        "connect_timeout_s": CONNECT_TIMEOUT_S,
    }
    return KafkaConfig(**{**options, **overrides})


def scram_url(broker: SecureBroker, name: str) -> str:
    user, password = quote(broker.scram_user), quote(broker.scram_password, safe="")
    return (
        f"kafka://{user}:{password}@{broker.sasl_ssl}/{name}"
        f"?sasl_mechanism=SCRAM-SHA-512&ssl_cafile={quote(broker.cafile)}&partitions=2"
    )


class TestKafkaEventLogOverSaslSsl(EventLogContract):
    """The whole EventLog contract over SASL_SSL with SCRAM-SHA-512."""

    @pytest.fixture
    async def log(self, kafka_sasl: SecureBroker, kafka_name: str) -> AsyncIterator[KafkaEventLog]:
        config = scram_config(kafka_sasl, kafka_name, keep_snapshots=self.keep_snapshots)
        async with await KafkaEventLog.connect(config) as log:
            yield log

    @pytest.fixture
    def log_url(self, kafka_sasl: SecureBroker, kafka_name: str) -> str:
        return scram_url(kafka_sasl, kafka_name)


async def test_plain_over_sasl_ssl_appends_fences_and_reads(kafka_sasl: SecureBroker) -> None:
    config = scram_config(
        kafka_sasl,
        _name(),
        sasl_mechanism="PLAIN",
        sasl_username=kafka_sasl.plain_user,
        sasl_password=kafka_sasl.plain_password,
    )
    async with await KafkaEventLog.connect(config) as log:
        epoch = await log.claim_writer("r1")
        events = await seed(log, "r1", 3, epoch=epoch)
        assert await read_all(log, "r1") == events
        assert [info.run_id for info in await log.list_runs()] == ["r1"]


async def test_mutual_tls_with_a_client_certificate(kafka_sasl: SecureBroker) -> None:
    config = KafkaConfig(
        bootstrap_servers=kafka_sasl.ssl,
        name=_name(),
        partitions=1,
        security_protocol="SSL",
        ssl_cafile=kafka_sasl.cafile,
        ssl_certfile=kafka_sasl.certfile,
        ssl_keyfile=kafka_sasl.keyfile,
        connect_timeout_s=CONNECT_TIMEOUT_S,
    )
    async with await KafkaEventLog.connect(config) as log:
        events = await seed(log, "m1", 2)
        assert await read_all(log, "m1") == events


async def test_a_url_with_the_password_in_an_env_var_opens_the_log(
    kafka_sasl: SecureBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTLOG_TEST_KAFKA_PASSWORD", kafka_sasl.scram_password)
    url = (
        f"kafka://{kafka_sasl.scram_user}@{kafka_sasl.sasl_ssl}/{_name()}?sasl_mechanism="
        f"SCRAM-SHA-512&sasl_password_env=AGENTLOG_TEST_KAFKA_PASSWORD&ssl_cafile="
        f"{quote(kafka_sasl.cafile)}&partitions=1"
    )
    async with await open_log(url) as log:
        events = await seed(log, "e1", 2)
        assert await read_all(log, "e1") == events


async def test_a_worker_group_member_owns_and_writes_over_sasl_ssl(
    kafka_sasl: SecureBroker,
) -> None:
    # The group consumer and the per-partition owner producers get the settings too.
    name = _name()
    member_config = scram_config(
        kafka_sasl,
        name,
        partitions=PARTITIONS,
        layout="partitioned",
        group_id="workers",
        session_timeout_s=SESSION_S,
    )
    member = await KafkaEventLog.connect(member_config)
    try:
        assert isinstance(member, PartitionedKafkaEventLog)
        await settle([member], lambda: len(member.owned_partitions) == PARTITIONS, "one member")
        await start_run(member, "g1")
        assert member.transactional_producers >= 1
        assert [info.run_id for info in await member.runnable()] == ["g1"]
        assert [e.seq async for e in member.read("g1")] == [1]
    finally:
        await member.close()


# -- refusals: typed, naming the listener, never the connect timeout ---------------


async def _refused(config: KafkaConfig) -> KafkaAuthError:
    with pytest.raises(KafkaAuthError) as caught:
        await KafkaEventLog.connect(config)
    error = caught.value
    assert isinstance(error, BackendUnavailableError)
    assert not error.retryable
    assert config.bootstrap_servers in str(error)
    assert config.security_protocol in str(error)
    assert f"within {CONNECT_TIMEOUT_S:g}s" not in str(error)  # not the timeout running out
    return error


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
async def test_a_wrong_password_names_the_listener_and_hides_the_password(
    kafka_sasl: SecureBroker, mechanism: str
) -> None:
    user = kafka_sasl.scram_user if mechanism == "SCRAM-SHA-512" else kafka_sasl.plain_user
    wrong = "not-the-password-" + uuid.uuid4().hex
    config = scram_config(
        kafka_sasl, _name(), sasl_mechanism=mechanism, sasl_username=user, sasl_password=wrong
    )
    error = await _refused(config)
    text = str(error)
    assert mechanism in text and user in text
    assert "refused the credentials" in text and "Check the user name and password" in text
    assert wrong not in text and wrong not in repr(error)
    assert error.listener == config.listener


async def test_a_wrong_password_in_a_url_is_not_in_the_error(kafka_sasl: SecureBroker) -> None:
    wrong = "url-password-" + uuid.uuid4().hex
    url = scram_url(kafka_sasl, _name()).replace(quote(kafka_sasl.scram_password, safe=""), wrong)
    with pytest.raises(KafkaAuthError) as caught:
        await open_log(url)
    assert wrong not in str(caught.value)
    assert kafka_sasl.sasl_ssl in str(caught.value)


async def test_an_untrusted_certificate_is_a_typed_error(kafka_sasl: SecureBroker) -> None:
    # No ssl_cafile: the system's CAs, which never signed the test CA's broker cert.
    error = await _refused(scram_config(kafka_sasl, _name(), ssl_cafile=""))
    assert "certificate is not trusted" in str(error)
    assert "ssl_cafile" in str(error)


async def test_a_plaintext_client_on_the_tls_port_is_a_typed_error(
    kafka_sasl: SecureBroker,
) -> None:
    config = KafkaConfig(
        bootstrap_servers=kafka_sasl.sasl_ssl, name=_name(), connect_timeout_s=CONNECT_TIMEOUT_S
    )
    error = await _refused(config)
    assert "PLAINTEXT" in str(error) and "expects TLS" in str(error)


async def test_no_client_certificate_on_the_mutual_tls_port_is_a_typed_error(
    kafka_sasl: SecureBroker,
) -> None:
    config = KafkaConfig(
        bootstrap_servers=kafka_sasl.ssl,
        name=_name(),
        security_protocol="SSL",
        ssl_cafile=kafka_sasl.cafile,
        connect_timeout_s=CONNECT_TIMEOUT_S,
    )
    error = await _refused(config)
    assert "client certificate" in str(error)


# -- topics: min.insync.replicas and the replication-1 warning ------------------------


@pytest.fixture
async def admin(kafka_sasl: SecureBroker) -> AsyncIterator[AIOKafkaAdminClient]:
    # The secured broker's PLAINTEXT listener: this file needs no second broker.
    client = AIOKafkaAdminClient(bootstrap_servers=kafka_sasl.plaintext)
    await client.start()
    try:
        yield client
    finally:
        await stop_quietly(client, 5.0)


async def _topic_config(admin: AIOKafkaAdminClient, topic: str, key: str) -> str:
    resource = ConfigResource(ConfigResourceType.TOPIC, topic)
    response = (await admin.describe_configs([resource]))[0]
    for resource_entry in response.resources:
        if resource_entry[3] == topic:
            return str({entry[0]: entry[1] for entry in resource_entry[4]}[key])
    raise AssertionError(f"{topic} not described")


async def test_min_insync_replicas_is_set_on_every_created_topic(
    admin: AIOKafkaAdminClient, kafka_name: str
) -> None:
    # One broker allows one replica; the broker still takes a higher
    # min.insync.replicas at creation, which tells ours from its default (1).
    layout = await ensure_topics(admin, kafka_name, 2, 1, "partitioned", min_insync=2)
    for topic in (layout.events, layout.runs, layout.commands):
        assert await _topic_config(admin, topic, "min.insync.replicas") == "2"


async def test_min_insync_replicas_from_the_config_reaches_the_topics(
    kafka_sasl: SecureBroker, kafka_name: str, admin: AIOKafkaAdminClient
) -> None:
    url = f"kafka://{kafka_sasl.plaintext}/{kafka_name}?replication_factor=1&min_insync_replicas=1"
    async with await open_log(url) as log:
        assert isinstance(log, KafkaEventLog)
        assert log.config.min_insync_replicas == 1
    assert await _topic_config(admin, f"{kafka_name}.events", "min.insync.replicas") == "1"


async def test_replication_one_on_a_non_loopback_bootstrap_warns(
    admin: AIOKafkaAdminClient, kafka_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The admin client talks to the local broker; the address the log was
    # given is what the decision reads.
    with caplog.at_level(logging.WARNING, logger="agentlog"):
        await ensure_topics(admin, kafka_name, 1, 1, bootstrap_servers="kafka-1.prod.example:9092")
    warned = [r.getMessage() for r in caplog.records if "kafka_replication_factor_one" in r.message]
    assert len(warned) == 1
    assert "kafka-1.prod.example" in warned[0] and f"{kafka_name}.events" in warned[0]


async def test_replication_one_on_a_local_single_broker_does_not_warn(
    admin: AIOKafkaAdminClient,
    kafka_bootstrap: str,
    kafka_name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="agentlog"):
        layout = await ensure_topics(admin, kafka_name, 1, 1, bootstrap_servers=kafka_bootstrap)
    assert layout.events == f"{kafka_name}.events"  # the topics were made and checked
    assert not [r for r in caplog.records if "kafka_replication_factor_one" in r.getMessage()]
