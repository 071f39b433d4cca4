"""How the UI reads a request's parameters: whole numbers and run ids.

Every number a route takes (a seq, a page's offset and limit, a timeline
window) is parsed by :func:`whole_number`: ASCII digits only, so ``²`` or
Arabic-Indic digits, which :func:`int` would take or choke on, are a 400.

A run id may be any text (:func:`agentlog.eventlog._base.check_run_id`),
``/``, ``.`` and ``..`` included, so it cannot go into a URL path as it is:
a ``/`` would split it into segments that routes match (``x/events``), and
a browser resolves a ``.`` or ``..`` segment (even as ``%2E``) before
sending the request. :func:`encode_run_id` makes it one segment that
survives both; ``static/common.js`` (``runSegment``) is the same rule:

* ``~`` becomes ``~~`` and ``/`` becomes ``~s``;
* a leading ``.`` becomes ``~d`` (so no segment is all dots);
* the empty id is ``~e``;

then the segment is percent-encoded as usual. An id without ``~``, ``/``
or a leading dot (most ids) reads the same in the URL.
"""

from __future__ import annotations

import re

from starlette.requests import Request

from agentlog.errors import ConfigError

__all__ = ["decode_run_id", "encode_run_id", "int_param", "run_id_param", "whole_number"]

_DIGITS = re.compile(r"-?[0-9]{1,19}")
_UNESCAPE = {"~": "~", "s": "/", "d": ".", "e": ""}


def whole_number(name: str, raw: str, *, low: int, high: int) -> int:
    """``raw`` as an int in [low, high]; ConfigError (a 400) otherwise.

    Only ASCII digits (and a leading minus) count: :func:`int` also takes
    ``"٣"``, ``" 3"``, ``"+3"`` and ``"1_0"``, which no page sends.
    """
    if not _DIGITS.fullmatch(raw):
        raise ConfigError(f"{name}={raw!r} is not a whole number; write it with the digits 0-9")
    value = int(raw)
    if not low <= value <= high:
        raise ConfigError(f"{name}={value} is out of range: give a number from {low} to {high}")
    return value


def int_param(request: Request, name: str, default: int, *, low: int, high: int) -> int:
    """The query parameter ``name`` as an int in [low, high] (``default`` when absent)."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    return whole_number(name, raw, low=low, high=high)


def encode_run_id(run_id: str) -> str:
    """The path segment (before percent-encoding) that names ``run_id``."""
    if run_id == "":
        return "~e"
    segment = run_id.replace("~", "~~").replace("/", "~s")
    return "~d" + segment[1:] if segment.startswith(".") else segment


def decode_run_id(segment: str) -> str:
    """The run id :func:`encode_run_id` made ``segment`` from.

    Raises:
        ConfigError: a ``~`` not followed by ``~``, ``s``, ``d`` or ``e``.
    """
    if "~" not in segment:
        return segment
    out: list[str] = []
    i = 0
    while i < len(segment):
        if segment[i] != "~":
            out.append(segment[i])
            i += 1
            continue
        escape = segment[i + 1 : i + 2]
        if escape not in _UNESCAPE:
            raise ConfigError(
                f"{segment!r} is not a run id as the UI writes it in a URL: a '~' must be "
                "followed by ~, s (/), d (.) or e (the empty id); follow the links of the runs page"
            )
        out.append(_UNESCAPE[escape])
        i += 2
    return "".join(out)


def run_id_param(request: Request) -> str:
    """The run id of a ``/runs/{run}`` or ``/api/runs/{run}/...`` route."""
    segment: str = request.path_params["run"]
    return decode_run_id(segment)
