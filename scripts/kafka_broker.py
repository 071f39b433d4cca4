#!/usr/bin/env python3
"""Start, stop or inspect a single-node KRaft Apache Kafka broker for tests.

The broker is the real one: Apache Kafka 4.0.x jars resolved from Maven
Central by ``kafka/pom.xml`` (cached in ``.cache/kafka-jars``), run with
``java -cp``. Everything it writes lives in one state folder (default
``.cache/kafka-broker``)::

    server.properties   the broker's config (ports chosen here, 127.0.0.1 only)
    data/               the KRaft metadata and topic logs (formatted once)
    broker.log          the JVM's stdout and stderr
    broker.pid          the JVM's process id while it runs
    bootstrap           host:port for clients, written once the broker answers
    secure.json         with ``--secure`` only: the secured listeners, users, TLS files
    tls/                with ``--secure`` only: the CA, broker and client keys (keytool)

Usage::

    python scripts/kafka_broker.py start  [--dir DIR] [--timeout S] [--secure]
    python scripts/kafka_broker.py stop   [--dir DIR]
    python scripts/kafka_broker.py kill   [--dir DIR]   # SIGKILL, for fault tests
    python scripts/kafka_broker.py status [--dir DIR]

``start`` on a folder that was started before reuses its data and its ports,
so a broker killed mid-run comes back on the same log dir and address.
It prints the bootstrap address on stdout. Exit status 0 means it answers.

``--secure`` (given the first time a folder is started; later starts keep it)
adds two listeners on 127.0.0.1 beside the PLAINTEXT one, for the tests of
Kafka security (:func:`make_tls` makes their files):

* ``SASL_SSL``: TLS with a broker certificate signed by a test CA (made with
  the JDK's ``keytool``), and SASL with ``SCRAM-SHA-512`` (a user added at
  format time by ``StorageTool format --add-scram``) and ``PLAIN`` (a user
  in the listener's JAAS config);
* ``SSL``: TLS that requires a client certificate signed by the same CA.

``secure.json`` lists their addresses, the user names and passwords, and the
PEM files a client needs (the CA certificate, a client certificate and key).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
POM = ROOT / "kafka" / "pom.xml"
LOG4J = ROOT / "kafka" / "log4j2.xml"
JARS = ROOT / ".cache" / "kafka-jars"
DEFAULT_DIR = ROOT / ".cache" / "kafka-broker"
STARTED_LINE = "Kafka Server started"
SECURE_FILE = "secure.json"


class BrokerError(RuntimeError):
    """The broker could not be resolved, formatted, started or stopped."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cluster_id(random_bytes: Callable[[int], bytes] = os.urandom) -> str:
    """A new KRaft cluster id: 16 random bytes, URL-safe base64, never starting with ``-``.

    StorageTool reads an argument that starts with ``-`` as a flag, so one id
    in 64 would fail ``format -t ID``; Kafka's own ``Uuid.randomUuid`` skips
    such ids the same way.
    """
    while True:
        text = base64.urlsafe_b64encode(random_bytes(16)).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise BrokerError(
            "java is not on PATH: install a JDK 17+ (the broker runs on the JVM), or point "
            "KAFKA_BOOTSTRAP_SERVERS at a running broker."
        )
    return java


def ensure_jars() -> Path:
    """Resolve the broker jars with mvn once; later calls reuse the cache."""
    marker = JARS / ".complete"
    if marker.exists():
        return JARS
    JARS.mkdir(parents=True, exist_ok=True)
    if shutil.which("mvn") is None:
        raise BrokerError(
            f"the Kafka jars are not in {JARS} and mvn is not on PATH to fetch them: "
            "install Maven, or copy the jars there."
        )
    cmd = [
        "mvn",
        "-q",
        "-B",
        "-f",
        str(POM),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={JARS}",
        "-DincludeScope=runtime",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not any(JARS.glob("kafka_2.13-*.jar")):
        raise BrokerError(
            f"mvn could not resolve the Kafka jars (exit {done.returncode}):\n"
            f"{done.stdout[-2000:]}{done.stderr[-2000:]}\n"
            "Check that Maven Central is reachable and that `mvn` is installed."
        )
    marker.write_text("ok\n")
    return JARS


def _properties(
    state: Path, port: int, controller_port: int, secure: dict[str, Any] | None = None
) -> str:
    data = state / "data"
    listeners = [f"PLAINTEXT://127.0.0.1:{port}"]
    protocols = ["CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT"]
    if secure is not None:
        listeners += [f"SASL_SSL://{secure['sasl_ssl']}", f"SSL://{secure['ssl']}"]
        protocols += ["SASL_SSL:SASL_SSL", "SSL:SSL"]
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
            f"listeners={','.join(listeners)},CONTROLLER://127.0.0.1:{controller_port}",
            f"advertised.listeners={','.join(listeners)}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            f"listener.security.protocol.map={','.join(protocols)}",
            f"log.dirs={data}",
            "num.partitions=1",
            "auto.create.topics.enable=false",
            # One node: every internal topic has one replica. Few partitions keep
            # the first transactional producer's start fast on a small machine.
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=4",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=4",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            # Let the cleaner compact the small runs topic promptly.
            "log.cleaner.backoff.ms=1000",
            *([] if secure is None else _secure_properties(secure)),
            "",
        ]
    )


def _secure_properties(secure: dict[str, Any]) -> list[str]:
    """The broker side of the SASL_SSL and SSL listeners (see the module docstring)."""
    tls, plain = secure["tls"], secure["plain"]
    return [
        "sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN",
        # SCRAM users live in the KRaft metadata (added at format time).
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config="
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "listener.name.sasl_ssl.plain.sasl.jaas.config="
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'user_{plain["username"]}="{plain["password"]}";',
        "ssl.keystore.type=PKCS12",
        f"ssl.keystore.location={tls['keystore']}",
        f"ssl.keystore.password={tls['store_password']}",
        f"ssl.key.password={tls['store_password']}",
        "ssl.truststore.type=PKCS12",
        f"ssl.truststore.location={tls['truststore']}",
        f"ssl.truststore.password={tls['store_password']}",
        "listener.name.ssl.ssl.client.auth=required",
    ]


def _secure_setup(state: Path, java: str) -> dict[str, Any]:
    """Make (once) the TLS files, users and ports of the secured listeners."""
    saved = state / SECURE_FILE
    if saved.exists():
        loaded: dict[str, Any] = json.loads(saved.read_text())
        return loaded
    keytool = str(Path(java).resolve().parent / "keytool")
    if not Path(keytool).exists():
        keytool = shutil.which("keytool") or ""
    if not keytool:
        raise BrokerError("keytool (from the JDK) is not on PATH: the secured broker needs it")
    try:
        tls = make_tls(state / "tls", keytool)
    except RuntimeError as exc:
        raise BrokerError(str(exc)) from exc
    secure = {
        "sasl_ssl": f"127.0.0.1:{_free_port()}",
        "ssl": f"127.0.0.1:{_free_port()}",
        "scram": {"username": "alice", "password": secrets.token_hex(12)},
        "plain": {"username": "paula", "password": secrets.token_hex(12)},
        "tls": tls,
    }
    saved.write_text(json.dumps(secure, indent=2) + "\n")
    return secure


def _keytool(keytool: str, *args: str) -> None:
    done = subprocess.run([keytool, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BrokerError(
            f"keytool {args[0]} failed (exit {done.returncode}): {done.stdout}{done.stderr}"
        )


def make_tls(folder: Path, keytool: str) -> dict[str, str]:
    """A test CA, a broker keystore and a client certificate, made with ``keytool``.

    The broker certificate names 127.0.0.1 and localhost (clients check the
    host name). Kafka reads the PKCS12 keystore and truststore; Python's
    ``ssl`` reads PEM only, so the client's key is taken out of its PKCS12
    file with ``cryptography``.

    Returns:
        Paths (``cafile``, ``certfile``, ``keyfile``, ``keystore``,
        ``truststore``) and the store password.
    """
    folder.mkdir(parents=True, exist_ok=True)
    pw = secrets.token_hex(12)
    store = ["-storetype", "PKCS12", "-storepass", pw, "-keypass", pw]
    ca, ca_pem = folder / "ca.p12", folder / "ca.pem"
    days = ["-validity", "3650", "-keyalg", "RSA", "-keysize", "2048"]
    _keytool(keytool, "-genkeypair", "-alias", "ca", "-dname", "CN=agentlog-test-ca",
             "-ext", "bc:c", *days, "-keystore", str(ca), *store)  # fmt: skip
    _keytool(keytool, "-exportcert", "-alias", "ca", "-rfc", "-keystore", str(ca),
             "-storepass", pw, "-file", str(ca_pem))  # fmt: skip
    truststore = folder / "truststore.p12"
    _keytool(keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_pem),
             "-keystore", str(truststore), *store)  # fmt: skip
    for name, cn in (("broker", "127.0.0.1"), ("client", "agentlog-test-client")):
        keystore, csr, pem = (folder / f"{name}{ext}" for ext in (".p12", ".csr", ".pem"))
        _keytool(keytool, "-genkeypair", "-alias", name, "-dname", f"CN={cn}", *days,
                 "-keystore", str(keystore), *store)  # fmt: skip
        _keytool(keytool, "-certreq", "-alias", name, "-keystore", str(keystore),
                 "-storepass", pw, "-file", str(csr))  # fmt: skip
        _keytool(keytool, "-gencert", "-alias", "ca", "-keystore", str(ca), "-storepass", pw,
                 "-infile", str(csr), "-outfile", str(pem), "-rfc", "-validity", "3650",
                 "-ext", "SAN=ip:127.0.0.1,dns:localhost")  # fmt: skip
        _keytool(keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_pem),
                 "-keystore", str(keystore), *store)  # fmt: skip
        _keytool(keytool, "-importcert", "-alias", name, "-file", str(pem),
                 "-keystore", str(keystore), *store)  # fmt: skip
    _client_pem(folder / "client.p12", pw, folder / "client-key.pem")
    return {
        "cafile": str(ca_pem),
        "certfile": str(folder / "client.pem"),
        "keyfile": str(folder / "client-key.pem"),
        "keystore": str(folder / "broker.p12"),
        "truststore": str(truststore),
        "store_password": pw,
    }


def _client_pem(keystore: Path, password: str, keyfile: Path) -> None:
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError as exc:
        raise BrokerError(
            "the secured broker's client key is converted with the cryptography package, "
            "which is not installed: pip install cryptography"
        ) from exc
    key, _cert, _chain = pkcs12.load_key_and_certificates(keystore.read_bytes(), password.encode())
    assert key is not None
    keyfile.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _read_pid(state: Path) -> int | None:
    try:
        pid = int((state / "broker.pid").read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid


def _ports(state: Path) -> tuple[int, int]:
    saved = state / "ports"
    if saved.exists():
        port, controller = saved.read_text().split()
        return int(port), int(controller)
    port, controller = _free_port(), _free_port()
    saved.write_text(f"{port} {controller}\n")
    return port, controller


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def start(state: Path, timeout: float = 90.0, *, secure: bool = False) -> str:
    """Start the broker (formatting storage the first time); return host:port.

    Args:
        secure: also open the SASL_SSL and SSL listeners (see the module
            docstring); a folder started secure once stays secure.
    """
    state.mkdir(parents=True, exist_ok=True)
    pid = _read_pid(state)
    bootstrap_file = state / "bootstrap"
    if pid is not None and bootstrap_file.exists():
        return bootstrap_file.read_text().strip()
    bootstrap_file.unlink(missing_ok=True)
    jars = ensure_jars()
    port, controller = _ports(state)
    props = state / "server.properties"
    java = [_java(), "-Xms256m", "-Xmx768m", f"-Dlog4j2.configurationFile={LOG4J}"]
    sec = _secure_setup(state, java[0]) if secure or (state / SECURE_FILE).exists() else None
    props.write_text(_properties(state, port, controller, sec))
    classpath = f"{jars}/*"
    if not (state / "data" / "meta.properties").exists():
        scram = [] if sec is None else ["--add-scram", _scram_credential(sec["scram"])]
        fmt = subprocess.run(
            [
                *java,
                "-cp",
                classpath,
                "kafka.tools.StorageTool",
                "format",
                "-t",
                cluster_id(),
                "-c",
                str(props),
                "--ignore-formatted",
                *scram,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if fmt.returncode != 0:
            raise BrokerError(
                f"formatting the broker storage in {state / 'data'} failed (kafka.tools."
                f"StorageTool exit {fmt.returncode}):\n{fmt.stdout}{fmt.stderr}"
            )
    log_path = state / "broker.log"
    with log_path.open("ab") as log:
        offset = log.tell()
        proc = subprocess.Popen(
            [*java, "-cp", classpath, "kafka.Kafka", str(props)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    (state / "broker.pid").write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[offset:][-3000:]
            raise BrokerError(f"the broker exited with {proc.returncode}:\n{tail}")
        with log_path.open("rb") as log:
            log.seek(offset)
            started = STARTED_LINE.encode() in log.read()
        ports = [port] if sec is None else [port, *(_port(sec[k]) for k in ("sasl_ssl", "ssl"))]
        if started and all(_answers(p) for p in ports):
            bootstrap = f"127.0.0.1:{port}"
            bootstrap_file.write_text(bootstrap + "\n")
            return bootstrap
        time.sleep(0.2)
    stop(state)
    raise BrokerError(f"the broker did not answer within {timeout:.0f}s; see {log_path}")


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def _scram_credential(user: dict[str, str]) -> str:
    """StorageTool's ``--add-scram`` argument for one SCRAM-SHA-512 user."""
    return f"SCRAM-SHA-512=[name={user['username']},password={user['password']}]"


def stop(state: Path, timeout: float = 30.0) -> bool:
    """Stop the broker cleanly (SIGTERM, then SIGKILL); True if one was running."""
    pid = _read_pid(state)
    (state / "bootstrap").unlink(missing_ok=True)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _read_pid(state) is not None:
        _reap(pid)
        time.sleep(0.1)
    if _read_pid(state) is not None:
        os.kill(pid, signal.SIGKILL)
        _reap(pid)
    (state / "broker.pid").unlink(missing_ok=True)
    return True


def kill(state: Path) -> bool:
    """SIGKILL the broker JVM, as a crash would; its data stays for a restart."""
    pid = _read_pid(state)
    (state / "bootstrap").unlink(missing_ok=True)
    if pid is None:
        return False
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _read_pid(state) is not None:
        _reap(pid)
        time.sleep(0.05)
    (state / "broker.pid").unlink(missing_ok=True)
    return True


def _reap(pid: int) -> None:
    # The JVM is our child only when start() ran in this same process.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["start", "stop", "kill", "status"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="state folder")
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds to wait")
    parser.add_argument(
        "--secure", action="store_true", help="also open SASL_SSL and SSL listeners (start)"
    )
    args = parser.parse_args(argv)
    state = args.dir.resolve()
    try:
        if args.command == "start":
            print(start(state, args.timeout, secure=args.secure))
        elif args.command == "stop":
            print("stopped" if stop(state) else "not running")
        elif args.command == "kill":
            print("killed" if kill(state) else "not running")
        else:
            pid = _read_pid(state)
            bootstrap = (state / "bootstrap").read_text().strip() if pid else ""
            print(f"running pid={pid} bootstrap={bootstrap}" if pid else "not running")
            return 0 if pid else 1
    except BrokerError as exc:
        print(f"kafka_broker: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
