"""StrictSerializer: LangGraph's serde protocol, refusing any class not allowed.

LangGraph's ``JsonPlusSerializer`` stores a class instance as a msgpack
extension that names the class (module and name) and its constructor
arguments, and on load imports that module and calls the class. Bytes that
name ``os.system`` or a module with an import side effect therefore run code
on load (CVE-2026-28277). In its strict mode it skips a class it does not
allow, but silently, handing back the raw arguments instead.

:class:`StrictSerializer` checks first and refuses loudly: before anything
is decoded for real, every extension in the bytes is read as plain data
(never imported) and each class it names is checked against the allow-list.
One that is not allowed raises :class:`~agentlog.errors.ForbiddenTypeError`
and nothing is imported. It checks the same on write, so a value that could
not be read back is refused when it is saved, not discovered at resume.
Pickle is never used.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import ormsgpack
from langchain_core import agents
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from agentlog.errors import ConfigError, ForbiddenTypeError
from agentlog.langgraph._schema import schema_classes

try:  # langgraph-checkpoint >= 3
    from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_METHODS, SAFE_MSGPACK_TYPES
except ImportError:  # pragma: no cover - older releases had no shared list
    SAFE_MSGPACK_TYPES = frozenset()
    SAFE_MSGPACK_METHODS = frozenset()

__all__ = ["DEFAULT_ALLOWED", "StrictSerializer", "serializer"]

#: LangChain's agent steps, which agent graphs keep in their state; data
#: classes like its messages, which LangGraph's safe list has.
_LANGCHAIN_AGENT_TYPES = (
    agents.AgentAction,
    agents.AgentActionMessageLog,
    agents.AgentFinish,
    agents.AgentStep,
)

#: What loads by default: LangGraph's own safe list (datetime, UUID, Decimal,
#: set, deque, paths, LangChain messages and documents, LangGraph's Send,
#: Interrupt, Command, ...) and LangChain's agent steps (AgentAction, ...).
DEFAULT_ALLOWED: frozenset[tuple[str, ...]] = frozenset(SAFE_MSGPACK_TYPES) | frozenset(
    (cls.__module__, cls.__name__) for cls in _LANGCHAIN_AGENT_TYPES
)

# LangGraph's extension codes (langgraph.checkpoint.serde.jsonplus).
_CONSTRUCTORS = (0, 1, 2)  # single arg, positional args, keyword args
_METHOD = 3
_PYDANTIC = (4, 5)
_NUMPY = 6
_DELTA_SNAPSHOT = 7

#: The typed-bytes tags that never name a class.
_PLAIN_TAGS = frozenset({"null", "bytes", "bytearray", "empty"})


def _names(allowed: Iterable[tuple[str, ...] | type]) -> frozenset[tuple[str, ...]]:
    """The allow-list entries for ``allowed``: a pair as it is, a class with
    every class its fields reach (:func:`~agentlog.langgraph._schema.schema_classes`)."""
    items = list(allowed)
    pairs = {tuple(item) for item in items if not isinstance(item, type)}
    return frozenset(pairs | schema_classes(item for item in items if isinstance(item, type)))


class StrictSerializer(JsonPlusSerializer):
    """LangGraph's msgpack serializer with an enforced allow-list.

    Args:
        allowed: extra classes to allow, as classes or ``(module, name)``
            pairs, on top of :data:`DEFAULT_ALLOWED`. A class brings the
            pydantic models, dataclasses and enums its fields name, at any
            depth: pass a graph's state schema and its nested types load too.
    """

    def __init__(self, allowed: Iterable[tuple[str, ...] | type] = ()) -> None:
        self.allowed = DEFAULT_ALLOWED | _names(allowed)
        super().__init__(pickle_fallback=False, allowed_msgpack_modules=tuple(self.allowed))

    def with_msgpack_allowlist(
        self, extra_allowlist: Iterable[tuple[str, ...] | type]
    ) -> StrictSerializer:
        """A copy that also allows ``extra_allowlist``.

        LangGraph calls this when a graph compiles with this saver, with the
        types of the graph's own state schema, so those load without setup.
        """
        extra = _names(extra_allowlist)
        if extra <= self.allowed:
            return self
        return StrictSerializer(self.allowed | extra)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """Encode as LangGraph does; refuse what could not be loaded back."""
        kind, raw = super().dumps_typed(obj)
        self.check(kind, raw)
        return kind, raw

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Decode, after checking that every class the bytes name is allowed."""
        self.check(*data)
        return super().loads_typed(data)

    def check(self, kind: str, raw: bytes) -> None:
        """Raise ForbiddenTypeError if ``raw`` names a class not allowed.

        Reads the bytes with an extension hook that only collects names, so
        nothing is imported or constructed here.
        """
        if kind in _PLAIN_TAGS:
            return
        if kind != "msgpack":
            # "pickle" runs code by design; "json" revives LangChain objects by path.
            raise ForbiddenTypeError(f"the {kind!r} encoding (only msgpack is read)")
        refused: list[ForbiddenTypeError] = []

        def hook(code: int, data: bytes) -> Any:
            try:
                return self._inspect(code, data, hook)
            except ForbiddenTypeError as exc:
                refused.append(exc)  # ormsgpack wraps what a hook raises
                raise

        try:
            ormsgpack.unpackb(raw, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
        except Exception as exc:  # ormsgpack raises several types for bad bytes
            if refused:
                raise refused[0] from None
            raise ForbiddenTypeError(f"bytes that do not decode ({exc})") from exc

    def _inspect(self, code: int, data: bytes, hook: Any) -> Any:
        inner = ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
        if code in _CONSTRUCTORS or code in _PYDANTIC:
            name = (str(inner[0]), str(inner[1]))
            if name not in self.allowed:
                raise ForbiddenTypeError(f"class {name[0]}.{name[1]}")
        elif code == _METHOD:
            method = (str(inner[0]), str(inner[1]), str(inner[3]))
            if method not in SAFE_MSGPACK_METHODS:
                raise ForbiddenTypeError(f"method {'.'.join(method)}")
        elif code == _NUMPY:
            if ("numpy", "ndarray") not in self.allowed:
                raise ForbiddenTypeError("a numpy array (allow ('numpy', 'ndarray'))")
        elif code != _DELTA_SNAPSHOT:
            raise ForbiddenTypeError(f"msgpack extension type {code}")
        return None


def serializer(
    serde: SerializerProtocol | None, allowed: Iterable[type | tuple[str, ...]]
) -> SerializerProtocol:
    """The saver's serializer: ``serde``, or the default one, allowing ``allowed`` too."""
    allowed = list(allowed)
    if serde is None:
        return StrictSerializer(allowed) if allowed else _default()
    if allowed:
        raise ConfigError(
            "give allowed= or serde=, not both: allow the classes on your serializer "
            "(StrictSerializer(allowed=[...]))"
        )
    return serde


@functools.cache
def _default() -> StrictSerializer:
    """The default serializer, built once: it holds no state after construction
    (every allow-list change makes a copy), and building one normalizes the
    whole allow-list (about 0.05 ms of opening a saver, issue 23 item 8)."""
    return StrictSerializer()
