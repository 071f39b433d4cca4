"""A URL as it may be shown: every credential in it masked.

Beneath :mod:`agentlog.eventlog._urls` (which opens a log from a URL, and so
imports every backend) so that a backend's connection code can mask the URL
it names in an error without importing the module that imports it.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote_plus, urlsplit

__all__ = ["MASK", "is_secret_name", "redact_url", "shown_param"]

#: Query parameter names (or ``_``/``-``/``.``-separated parts of them) that
#: hold a secret; a part that *contains* one of :data:`_SECRET_WORDS` counts too.
_SECRET_PARTS = frozenset({"key", "apikey", "pass", "sig", "signature", "auth"})
_SECRET_WORDS = ("password", "passwd", "pwd", "secret", "token", "credential")
MASK = "***"


def is_secret_name(name: str) -> bool:
    """True if a URL parameter called ``name`` holds a secret (its value is masked).

    ``password``, ``sslpassword``, ``sasl_password``, ``ssl_key_password``,
    ``api_key``, ``access_token``, ``client_secret``, ``credentials``... A
    name ending in ``_env`` names an environment variable instead (such as
    ``sasl_password_env=KAFKA_PASSWORD``), which is not a secret.
    """
    lowered = name.strip().lower()
    if lowered.endswith("_env"):
        return False
    if any(word in lowered for word in _SECRET_WORDS):
        return True
    return any(part in _SECRET_PARTS for part in re.split(r"[_.\-]", lowered))


def shown_param(name: str, value: str) -> str:
    """``name=value`` of a URL parameter for a message: ``name=***`` if it looks secret."""
    return f"{name}={MASK}" if is_secret_name(name) else f"{name}={value!r}"


def redact_url(url: str) -> str:
    """``url`` as it may be shown: every credential in it replaced by ``***``.

    The one function that makes a URL printable (error messages, logs, the
    UI's header and ``/api/health``, CLI output): the password of its
    ``user:password@`` part, and the value of every query parameter whose
    name looks secret (:func:`is_secret_name`), also inside a URL given as a
    parameter's value. A URL that does not even parse is shown as its scheme
    only.
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a bad port raises here, not later in a message
    except ValueError:
        scheme = url.partition("://")[0] if "://" in url else ""
        return f"{scheme}://{MASK}" if scheme.isalnum() else MASK
    netloc = parts.netloc
    userinfo, at, hosts = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.split(':', 1)[0]}:{MASK}@{hosts}"
    query = "&".join(_redact_param(param) for param in parts.query.split("&"))
    if netloc == parts.netloc and query == parts.query:
        return url  # as given: urlunsplit would drop the empty host of sqlite:///
    shown = f"{parts.scheme}://{netloc}{parts.path}"
    shown += f"?{query}" if query else ""
    return shown + (f"#{parts.fragment}" if parts.fragment else "")


def _redact_param(param: str) -> str:
    name, equals, value = param.partition("=")
    if not equals:
        return param
    if is_secret_name(unquote_plus(name)):
        return f"{name}={MASK}"
    decoded = unquote_plus(value)
    if "://" in decoded and redact_url(decoded) != decoded:  # a URL with a password in it
        return f"{name}={quote(redact_url(decoded), safe=':/@*')}"
    return param
