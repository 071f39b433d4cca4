"""Pytest plugin: a real single-node Apache Kafka broker for the session.

``kafka_bootstrap`` is the broker's ``host:port``. When
``KAFKA_BOOTSTRAP_SERVERS`` is set it is used as it is; otherwise the broker
is started from the Maven jars by ``scripts/kafka_broker.py`` in a temporary
folder, once per session, and stopped at the end. A broker that cannot be
started fails the tests that need it, with the reason; nothing is skipped
(under CI=true or not).

``kafka_sasl`` is a second broker, started only for the tests that ask for it
(once per session), with ``scripts/kafka_broker.py start --secure``: a
SASL_SSL listener (SCRAM-SHA-512 and PLAIN users) and an SSL listener that
requires a client certificate, beside its PLAINTEXT one. It is always started
here, even when ``KAFKA_BOOTSTRAP_SERVERS`` names a broker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "kafka_broker.py"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

#: The state folder of the broker ``kafka_bootstrap`` started (none when
#: ``KAFKA_BOOTSTRAP_SERVERS`` names a broker run elsewhere).
_STARTED: dict[str, Path] = {}


def broker(command: str, state: Path, timeout: float = 120.0, *flags: str) -> str:
    """Run ``scripts/kafka_broker.py COMMAND --dir STATE [FLAGS]``; return its stdout.

    Fails the calling test (never skips) when the script fails.
    """
    done = subprocess.run(
        [sys.executable, str(SCRIPT), command, "--dir", str(state), *flags],
        capture_output=True,
        text=True,
        timeout=timeout + 30,
        check=False,
    )
    if done.returncode != 0:
        where = " (CI=true: a missing broker fails the run)" if IN_CI else ""
        # The script's own message says what failed and what to do about it
        # (java missing, jars not fetched, storage format, broker exit).
        reason = done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}"
        pytest.fail(
            f"kafka_broker.py {command} --dir {state} failed{where}: {reason}\n"
            "(To use a broker you run yourself instead, set KAFKA_BOOTSTRAP_SERVERS.)",
            pytrace=False,
        )
    return done.stdout.strip()


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a running Kafka 4.0 broker (KRaft, one node, 127.0.0.1)."""
    given = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if given:
        yield given
        return
    state = tmp_path_factory.mktemp("kafka-broker")
    bootstrap = broker("start", state)
    _STARTED["state"] = state
    try:
        yield bootstrap
    finally:
        _STARTED.clear()
        broker("stop", state)


@pytest.fixture
def kafka_data_dir(kafka_bootstrap: str) -> Path:
    """The ``log.dirs`` folder of the ``kafka_bootstrap`` broker: its topic
    partitions' segment files, for tests that look at the bytes on its disk."""
    state = _STARTED.get("state")
    if state is None:
        pytest.fail(
            "the broker's disk is not reachable here: KAFKA_BOOTSTRAP_SERVERS names a broker "
            "run elsewhere; unset it to let the tests start their own",
            pytrace=False,
        )
    return state / "data"


@pytest.fixture
def kafka_name() -> str:
    """A log name no other test uses, so each test starts from empty topics."""
    return f"t{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class SecureBroker:
    """The addresses, users and TLS files of the ``kafka_sasl`` broker."""

    plaintext: str
    """``host:port`` of its PLAINTEXT listener."""
    sasl_ssl: str
    """``host:port`` of its SASL_SSL listener (SCRAM-SHA-512 and PLAIN)."""
    ssl: str
    """``host:port`` of its SSL listener, which requires a client certificate."""
    scram_user: str
    scram_password: str
    plain_user: str
    plain_password: str
    cafile: str
    """PEM of the CA that signed the broker's certificate."""
    certfile: str
    """PEM of a client certificate signed by that CA."""
    keyfile: str
    """PEM of that client certificate's key."""


@pytest.fixture(scope="session")
def kafka_sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    """A Kafka 4.0 broker with SASL_SSL and SSL (client certificate) listeners."""
    state = tmp_path_factory.mktemp("kafka-sasl")
    plaintext = broker("start", state, 150.0, "--secure")
    try:
        sec = json.loads((state / "secure.json").read_text())
        yield SecureBroker(
            plaintext=plaintext,
            sasl_ssl=sec["sasl_ssl"],
            ssl=sec["ssl"],
            scram_user=sec["scram"]["username"],
            scram_password=sec["scram"]["password"],
            plain_user=sec["plain"]["username"],
            plain_password=sec["plain"]["password"],
            cafile=sec["tls"]["cafile"],
            certfile=sec["tls"]["certfile"],
            keyfile=sec["tls"]["keyfile"],
        )
    finally:
        broker("stop", state)
