"""scripts/kafka_broker.py: cluster ids StorageTool accepts, and failures that say what failed."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.services.kafka_broker import REPO, broker

_spec = importlib.util.spec_from_file_location("kafka_broker", REPO / "scripts" / "kafka_broker.py")
assert _spec is not None and _spec.loader is not None
kafka_broker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kafka_broker)

pytestmark = pytest.mark.kafka

#: base64 of 0xF8... starts with "-" (62 is "-" in the URL-safe alphabet).
DASH_FIRST = bytes([0xF8]) + bytes(15)


def _draws(*values: bytes) -> Iterator[bytes]:
    yield from values


def test_cluster_id_never_starts_with_a_dash() -> None:
    draws = _draws(DASH_FIRST, DASH_FIRST, bytes(range(16)))
    ident = kafka_broker.cluster_id(lambda n: next(draws))
    assert not ident.startswith("-")
    assert len(ident) == 22  # a 16-byte Kafka Uuid
    assert ident == "AAECAwQFBgcICQoLDA0ODw"
    assert next(draws, None) is None  # it drew again until the id was usable


def test_a_failed_storage_format_says_so_not_install_a_jdk(tmp_path: Path) -> None:
    state = tmp_path / "broker"
    state.mkdir()
    (state / "data").write_text("a file where the log dir should be\n")
    with pytest.raises(pytest.fail.Exception) as failed:
        broker("start", state)
    message = str(failed.value)
    assert "formatting the broker storage" in message
    assert "No available log directories to format" in message  # StorageTool's own words
    assert "JDK" not in message
    assert kafka_broker._read_pid(state) is None


def test_missing_java_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no java, no mvn
    with pytest.raises(pytest.fail.Exception) as failed:
        broker("start", tmp_path / "broker")
    assert "java is not on PATH" in str(failed.value)
