"""SASL and TLS for every aiokafka client of the Kafka backend, and why a listener refused us.

:func:`client_security` turns a :class:`~agentlog.eventlog.kafka.KafkaConfig`
into the keyword arguments that every aiokafka client of the log gets (the
admin client, the plain and transactional producers, the consumers): they
all go through the one ``common`` dict built in
:meth:`KafkaEventLog.connect <agentlog.eventlog.kafka.KafkaEventLog.connect>`.

When a client cannot start, aiokafka 0.14 logs the real cause and raises only
"Unable to bootstrap from [...]", which reads the same for a stopped broker
and for a wrong password. :func:`diagnose` then opens one connection to each
bootstrap address itself (aiokafka's own ``create_conn``, with the same
settings) and maps what that raises to :class:`~agentlog.errors.KafkaAuthError`:

=====================================  =========================================
what the probe raised                  what it means
=====================================  =========================================
``SaslAuthenticationFailed``           wrong user name or password
``UnsupportedSaslMechanismError``      the listener does not offer the mechanism
``IllegalSaslStateError``              SASL spoken to a listener without SASL
``ssl.SSLCertVerificationError``       the broker's certificate is not trusted
                                       (or does not name the host)
other ``ssl.SSLError`` / ``OSError``   TLS spoken to a listener without TLS
after the TCP connect
connection closed at the first         no TLS spoken to a TLS listener, or (with
request                                TLS) no client certificate for a listener
                                       that requires one
=====================================  =========================================

A refused TCP connection, a timeout or a probe that succeeds are not a
security problem: :func:`diagnose` returns None and the caller's own error
(BackendUnavailableError) stands. Messages never contain a password.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

from aiokafka.conn import create_conn
from aiokafka.errors import (
    IllegalSaslStateError,
    KafkaConnectionError,
    KafkaError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)
from aiokafka.helpers import create_ssl_context
from aiokafka.protocol.metadata import MetadataRequest

from agentlog.errors import ConfigError, KafkaAuthError
from agentlog.eventlog.kafka._config import SECRET_FIELDS, KafkaConfig

__all__ = ["client_security", "diagnose", "scrub"]


def client_security(config: KafkaConfig) -> dict[str, Any]:
    """The security keyword arguments of every aiokafka client the log makes.

    Raises:
        ConfigError: a TLS file is missing or cannot be loaded.
    """
    options: dict[str, Any] = {"security_protocol": config.security_protocol}
    if config.security_protocol in ("SSL", "SASL_SSL"):
        options["ssl_context"] = _ssl_context(config)
    if config.security_protocol.startswith("SASL_"):
        options.update(
            sasl_mechanism=config.sasl_mechanism,
            sasl_plain_username=config.sasl_username,
            sasl_plain_password=config.sasl_password,
        )
    return options


def _ssl_context(config: KafkaConfig) -> ssl.SSLContext:
    for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
        path = getattr(config, name)
        if path and not Path(path).is_file():
            raise ConfigError(f"{name} {path!r} is not a file: give the path of a PEM file")
    try:
        context: ssl.SSLContext = create_ssl_context(
            cafile=config.ssl_cafile or None,
            certfile=config.ssl_certfile or None,
            keyfile=config.ssl_keyfile or None,
            # Always a password: given None for an encrypted key, OpenSSL
            # would prompt on the terminal and the process would hang.
            password=config.ssl_key_password,
        )
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            f"cannot load the TLS files of {config.listener} ({scrub(str(exc), config)}): "
            "ssl_cafile and ssl_certfile must be PEM certificates, ssl_keyfile the "
            "certificate's PEM key (with ssl_key_password if it is encrypted)"
        ) from exc
    return context


def scrub(text: str, config: KafkaConfig) -> str:
    """``text`` with every password of ``config`` replaced by ``***``."""
    for name in SECRET_FIELDS:
        secret = getattr(config, name)
        if secret:
            text = text.replace(secret, "***")
    return text


async def diagnose(
    config: KafkaConfig, security: dict[str, Any], timeout_s: float
) -> KafkaAuthError | None:
    """Why the bootstrap listener refused this client, if it did.

    Args:
        security: what :func:`client_security` returned for ``config``.
        timeout_s: how long all the probes together may take.

    Returns:
        The error to raise, or None when no bootstrap address refused us
        for a security reason (it is down, slow, or let us in).
    """
    try:
        async with asyncio.timeout(timeout_s):
            for address in config.bootstrap_servers.split(","):
                host, _, port = address.strip().rpartition(":")
                if not host or not port.isdigit():
                    continue
                found = await _probe(config, security, host.strip("[]"), int(port), timeout_s)
                if found is not None:
                    return found
    except TimeoutError:
        pass
    return None


async def _probe(
    config: KafkaConfig, security: dict[str, Any], host: str, port: int, timeout_s: float
) -> KafkaAuthError | None:
    tls = config.security_protocol.endswith("SSL")
    try:
        conn = await create_conn(host, port, request_timeout_ms=int(timeout_s * 1000), **security)
    except ConnectionRefusedError:
        return None  # nothing listens there: the broker is down, not refusing us
    except (SaslAuthenticationFailed, UnsupportedSaslMechanismError) as exc:
        return _refused(config, exc)
    except IllegalSaslStateError as exc:
        return _error(
            config,
            f"the listener does not speak SASL ({_cause(exc, config)})",
            "Check security_protocol: a listener without SASL takes PLAINTEXT or SSL.",
        )
    except ssl.SSLCertVerificationError as exc:
        return _untrusted(config, exc)
    except KafkaConnectionError as exc:
        return _closed(config, exc) if "closed" in str(exc) else None
    except (ssl.SSLError, OSError) as exc:
        if not tls:
            return None
        return _error(
            config,
            f"the TLS handshake failed ({_cause(exc, config)})",
            "Check that this listener is a TLS one (SSL or SASL_SSL); a PLAINTEXT or "
            "SASL_PLAINTEXT listener needs that security_protocol instead.",
        )
    except (KafkaError, TimeoutError):
        return None
    try:
        # A listener that wants SASL lets a client without it ask only for the
        # API versions; the next request closes the connection.
        await conn.send(MetadataRequest([]))
    except KafkaConnectionError as exc:
        return _closed(config, exc)
    except (KafkaError, TimeoutError):
        return None
    finally:
        conn.close()
    return None


def _refused(config: KafkaConfig, exc: KafkaError) -> KafkaAuthError:
    if isinstance(exc, UnsupportedSaslMechanismError):
        return _error(
            config,
            f"the listener does not offer SASL mechanism {config.sasl_mechanism} "
            f"({_cause(exc, config)})",
            "Set sasl_mechanism to one the broker enables.",
        )
    return _error(
        config,
        f"the broker refused the credentials ({_cause(exc, config)})",
        f"Check the user name and password, and that user {config.sasl_username!r} exists "
        f"for {config.sasl_mechanism} on the cluster (SCRAM users are added with "
        "kafka-configs or kafka-storage --add-scram; PLAIN users in the broker's JAAS config).",
    )


def _untrusted(config: KafkaConfig, exc: ssl.SSLCertVerificationError) -> KafkaAuthError:
    reason = exc.verify_message or _cause(exc, config)
    if "hostname" in reason.lower() or "ip address mismatch" in reason.lower():
        fix = (
            "Connect with a host name (or IP) that the broker's certificate names, as "
            "its advertised listener does."
        )
    else:
        fix = "Set ssl_cafile to the PEM of the CA that signed the broker's certificate " + (
            "(now: the system's CAs)." if not config.ssl_cafile else f"(now: {config.ssl_cafile})."
        )
    return _error(config, f"the broker's TLS certificate is not trusted ({reason})", fix)


def _closed(config: KafkaConfig, exc: Exception) -> KafkaAuthError:
    if config.security_protocol.endswith("SSL"):
        return _error(
            config,
            f"the listener closed the connection after the TLS handshake ({_cause(exc, config)})",
            "It may require a client certificate: set ssl_certfile and ssl_keyfile to one "
            "signed by a CA the broker trusts. Or it wants SASL: use SASL_SSL.",
        )
    return _error(
        config,
        f"the listener closed the connection at the first request ({_cause(exc, config)})",
        "It probably expects TLS or SASL: set security_protocol to the listener's "
        "(SSL, SASL_SSL or SASL_PLAINTEXT), as the broker's listener.security.protocol.map says.",
    )


def _error(config: KafkaConfig, problem: str, fix: str) -> KafkaAuthError:
    return KafkaAuthError(config.listener, problem, fix)


def _cause(exc: BaseException, config: KafkaConfig) -> str:
    text, kind = str(exc), type(exc).__name__
    # aiokafka's errors already name their class ("[Error 58] SaslAuthenticationFailed: ...").
    return scrub(text if kind in text else f"{kind}: {text}" if text else kind, config)
