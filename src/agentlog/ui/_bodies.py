"""Reading a request's JSON body with bounds, before anything decodes it.

Every endpoint that takes a JSON body (the actions) reads it through
:func:`json_object`. The body is read up to :data:`MAX_BODY_BYTES` and no
further, and its nesting is measured by a linear scan before the JSON
decoder (which recurses once per level) sees it: a 100,000-deep ``[[[...``
would otherwise end in a ``RecursionError`` and a 500.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.requests import Request

from agentlog.ui._errors import BodyTooLargeError, RequestBodyError

__all__ = ["MAX_BODY_BYTES", "MAX_BODY_DEPTH", "json_object"]

#: The most bytes a body may have: an answer, a reason or a fork's updates.
MAX_BODY_BYTES = 1_000_000

#: The most levels of lists and objects a body may nest.
MAX_BODY_DEPTH = 100

# A JSON string (escapes included), and what opens or closes a level.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


async def json_object(request: Request) -> dict[str, Any]:
    """The request's body as a JSON object (``{}`` when empty).

    Raises:
        BodyTooLargeError: the body is longer than :data:`MAX_BODY_BYTES` (a 413).
        RequestBodyError: it is not JSON, not an object, or nests deeper than
            :data:`MAX_BODY_DEPTH` (a 400).
    """
    raw = await _read(request)
    if not raw:
        return {}
    _check_depth(raw)
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RequestBodyError(f"the request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise RequestBodyError("the request body must be a JSON object")
    return body


async def _read(request: Request) -> bytes:
    """The body, refused as soon as it (or its declared length) passes the bound."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise BodyTooLargeError(MAX_BODY_BYTES)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise BodyTooLargeError(MAX_BODY_BYTES)
        chunks.append(chunk)
    return b"".join(chunks)


def _check_depth(raw: bytes) -> None:
    """Refuse ``raw`` if its lists and objects nest deeper than :data:`MAX_BODY_DEPTH`.

    Strings are blanked first, so a bracket inside one does not count; the
    scan stops at the first level too deep.
    """
    depth = 0
    for found in _BRACKET.finditer(_STRING.sub(b'""', raw)):
        if found.group() in (b"[", b"{"):
            depth += 1
            if depth > MAX_BODY_DEPTH:
                raise RequestBodyError(
                    f"the request body nests lists or objects deeper than {MAX_BODY_DEPTH} "
                    "levels; send a flatter value"
                )
        else:
            depth -= 1
