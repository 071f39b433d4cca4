"""AES-256-GCM sealing of one payload, in a self-describing envelope.

A sealed payload is::

    magic 0xC1 'A' 'L' | version (2) | algorithm (1) | key id length (1) | key id
    | nonce (12) | ciphertext | GCM tag (16)

- **Magic.** ``0xC1`` is the one byte msgpack never uses, so a sealed payload
  can never be mistaken for a plain (msgpack) one: encrypted and plain
  payloads coexist in one log, and :func:`is_sealed` tells them apart.
- **Key id.** The id of the run's data key (:attr:`DataKey.data_key_id`), so a
  reader holding another key for the run gets :class:`WrongKeyError`, not a
  tag failure that would look like tampering.
- **Nonce.** 96 random bits per payload. A data key seals one run's payloads
  only, far below the 2**32 messages at which random GCM nonces get risky.
- **Associated data.** The header bytes, then :meth:`PayloadBinding.encode`
  (kind, seq, run id, extra and, from version 2, the payload's clear
  metadata). Neither is stored encrypted, both are authenticated: a
  ciphertext copied to another run, seq or kind, a header edited to name
  another algorithm or version, or (version 2) a step name, task key or
  attempt edited next to it, fails the tag
  (:class:`~agentlog.errors.TamperedPayloadError`).
- **Versions.** :func:`seal` writes version 2. Version 3 binds what
  version 2 binds, and says one more thing a copy must know without the
  key: the payload's ``Send`` inputs are in the sealed content, left out of
  the clear metadata (see :mod:`agentlog.eventlog._sealing`), so a copy
  stores the metadata as it was bound. Version 1 (no metadata in the
  associated data) still opens, with the associated data it was sealed
  with; the version byte is itself authenticated, so no version can be
  passed off as another.
"""

from __future__ import annotations

import functools
import os
import struct
from dataclasses import dataclass
from typing import Literal

from cryptography.exceptions import InvalidTag

from agentlog.crypto._keystore import DataKey
from agentlog.errors import CorruptEventError, TamperedPayloadError, WrongKeyError

__all__ = [
    "ALGORITHM_AES256_GCM",
    "BatchSealer",
    "ENVELOPE_VERSION",
    "MAGIC",
    "PayloadBinding",
    "PayloadKind",
    "READABLE_VERSIONS",
    "SEND_INPUTS_VERSION",
    "SealedHeader",
    "encode_binding",
    "envelope_version",
    "is_sealed",
    "open_",
    "read_header",
    "seal",
    "seal_bound",
]

MAGIC = b"\xc1AL"
#: The version :func:`seal` writes; :data:`READABLE_VERSIONS` still open.
ENVELOPE_VERSION = 2
#: Version 2's binding, with the payload's Send inputs sealed (see the module docstring).
SEND_INPUTS_VERSION = 3
READABLE_VERSIONS = frozenset({1, 2, 3})
ALGORITHM_AES256_GCM = 1
_NONCE = 12
_TAG = 16
_FIXED = len(MAGIC) + 3  # magic, version, algorithm, key id length

#: What a payload is; part of the associated data, so an event payload can
#: never be read back as a snapshot or a command, or the other way round.
PayloadKind = Literal["event", "snapshot", "command"]


@dataclass(frozen=True, slots=True)
class PayloadBinding:
    """Where a payload belongs: authenticated with it, never stored by it."""

    run_id: str
    """The run the payload belongs to."""
    seq: int
    """The event's seq, or the seq a snapshot was taken at."""
    kind: PayloadKind
    """``"event"``, ``"snapshot"`` or ``"command"``."""
    extra: bytes = b""
    """More envelope fields to bind (say, the event type), encoded by the caller."""
    metadata: bytes = b""
    """The payload's fields kept in clear next to it, encoded by the caller
    (bound from envelope version 2 on)."""

    def encode(self, version: int = ENVELOPE_VERSION) -> bytes:
        """The associated-data bytes of envelope ``version``: length-prefixed, so
        no two bindings collide."""
        if version == 1:  # what version 1 bound: no metadata
            run = self.run_id.encode("utf-8")
            kind = self.kind.encode("ascii")
            return b"".join(
                (
                    b"agentlog.payload.v1\x00",
                    len(kind).to_bytes(1, "big"),
                    kind,
                    self.seq.to_bytes(8, "big", signed=True),
                    len(run).to_bytes(4, "big"),
                    run,
                    len(self.extra).to_bytes(4, "big"),
                    self.extra,
                )
            )
        return encode_binding(self.run_id, self.seq, self.kind, self.extra, self.metadata)


def encode_binding(run_id: str, seq: int, kind: str, extra: bytes, metadata: bytes) -> bytes:
    """:meth:`PayloadBinding.encode` of the current version, without the object
    (the per-event path of :class:`~agentlog.crypto.PayloadCipher`)."""
    return _binding(_binding_head(kind, run_id), seq, extra, metadata)


def _binding(head: bytes, seq: int, extra: bytes, metadata: bytes) -> bytes:
    """``head`` (what precedes the seq: the run's head, after the envelope header
    in the associated data) and a version-2 binding's seq, extra and metadata."""
    return b"".join(
        (head, _SEQ_AND_LENGTH.pack(seq, len(extra)), extra, _LENGTH.pack(len(metadata)), metadata)
    )


_SEQ_AND_LENGTH = struct.Struct(">qI")
_LENGTH = struct.Struct(">I")


@functools.lru_cache(maxsize=4096)  # made once per run, not once per payload
def _binding_head(kind: str, run_id: str) -> bytes:
    run = run_id.encode("utf-8")
    kind_bytes = kind.encode("ascii")
    return b"".join(
        (
            b"agentlog.payload.v2\x00",
            len(kind_bytes).to_bytes(1, "big"),
            kind_bytes,
            len(run).to_bytes(4, "big"),
            run,
        )
    )


@dataclass(frozen=True, slots=True)
class SealedHeader:
    """The clear-text header of a sealed payload."""

    version: int
    """Envelope version (:data:`ENVELOPE_VERSION`)."""
    algorithm: int
    """Algorithm id (:data:`ALGORITHM_AES256_GCM`)."""
    key_id: str
    """The data key's id."""
    length: int
    """Header length in bytes, nonce excluded."""


def is_sealed(blob: bytes) -> bool:
    """True if ``blob`` is a sealed payload (plain msgpack never starts with 0xC1)."""
    return blob[: len(MAGIC)] == MAGIC


def envelope_version(blob: bytes) -> int:
    """The envelope version a sealed payload's header names (0: not a sealed payload).

    Read without the key, and not checked here: opening it checks it.
    """
    return blob[len(MAGIC)] if is_sealed(blob) and len(blob) > len(MAGIC) else 0


@functools.lru_cache(maxsize=4096)  # a key id is not a secret; its header never changes
def _header(key_id: str, version: int = ENVELOPE_VERSION) -> bytes:
    kid = key_id.encode("utf-8")
    if not 0 < len(kid) < 256:
        raise ValueError(f"a data key id is 1 to 255 bytes, not {len(kid)}")
    return MAGIC + bytes((version, ALGORITHM_AES256_GCM, len(kid))) + kid


def read_header(blob: bytes, binding: PayloadBinding) -> SealedHeader:
    """Parse a sealed payload's header.

    Raises:
        CorruptEventError: not a sealed payload, truncated, or sealed by an
            envelope version or algorithm this agentlog does not know.
    """

    def corrupt(reason: str) -> CorruptEventError:
        return CorruptEventError(binding.run_id, binding.seq, f"{binding.kind} payload: {reason}")

    if not is_sealed(blob) or len(blob) < _FIXED:
        raise corrupt("not an encrypted payload (no agentlog envelope header)")
    version, algorithm, kid_len = blob[len(MAGIC) : _FIXED]
    if version not in READABLE_VERSIONS or algorithm != ALGORITHM_AES256_GCM:
        raise corrupt(
            f"encrypted with envelope version {version}, algorithm {algorithm}, which this "
            "agentlog does not know (a newer agentlog wrote it)"
        )
    end = _FIXED + kid_len
    if len(blob) < end + _NONCE + _TAG:
        raise corrupt(f"the encrypted payload is truncated ({len(blob)} bytes)")
    try:
        key_id = blob[_FIXED:end].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise corrupt("the data key id in its header is not UTF-8") from exc
    return SealedHeader(version, algorithm, key_id, end)


def seal(key: DataKey, plaintext: bytes, binding: PayloadBinding) -> bytes:
    """Encrypt ``plaintext`` with the run's data key, bound to ``binding``."""
    return seal_bound(key, plaintext, binding.encode(ENVELOPE_VERSION))


def seal_bound(
    key: DataKey, plaintext: bytes, binding: bytes, version: int = ENVELOPE_VERSION
) -> bytes:
    """:func:`seal` with the binding already encoded (:func:`encode_binding`), under
    envelope ``version`` (2, or :data:`SEND_INPUTS_VERSION`)."""
    header = _header(key.data_key_id, version)
    nonce = os.urandom(_NONCE)
    return header + nonce + key.aead.encrypt(nonce, plaintext, header + binding)


class BatchSealer:
    """Seals the payloads of one append of one run, of one kind, under its data key.

    Why: a backend's append seals every event of a batch under the same key,
    so what they share is worked out once per batch, not once per payload:
    the envelope header, the run's part of the binding, and the nonces, drawn
    from the OS in one call. Each payload still gets 96 random bits of its
    own, used once (a payload past ``count`` draws its own), and binds its
    own seq, extra and metadata exactly as :func:`seal_bound` does. Not
    thread-safe: one append uses it, then drops it (nothing outlives the
    batch, so a fork can never reuse its nonces).
    """

    __slots__ = ("_aead", "_head", "_header", "_key_id", "_next", "_nonces", "_prefix", "run_id")

    def __init__(self, key: DataKey, kind: PayloadKind, count: int) -> None:
        """Seal up to ``count`` payloads of ``kind`` of ``key``'s run with nonces drawn now."""
        self.run_id = key.run_id
        self._aead = key.aead
        self._key_id = key.data_key_id
        self._head = _binding_head(kind, key.run_id)
        self._header = _header(key.data_key_id)
        self._prefix = self._header + self._head
        self._nonces = os.urandom(_NONCE * max(count, 1))
        self._next = 0

    def seal_parts(
        self,
        seq: int,
        plaintext: bytes,
        extra: bytes = b"",
        metadata: bytes = b"",
        version: int = ENVELOPE_VERSION,
    ) -> tuple[bytes, bytes, bytes]:
        """``plaintext`` sealed as :func:`seal` seals it, bound to this run, ``seq``,
        ``extra`` and ``metadata``, under envelope ``version`` (2, or
        :data:`SEND_INPUTS_VERSION`), in its three parts: ``(header, nonce,
        ciphertext + tag)``, which joined are the blob, for a caller that copies
        them into a bigger buffer once."""
        at = self._next
        self._next = end = at + _NONCE
        nonce = self._nonces[at:end]
        if len(nonce) < _NONCE:  # more payloads than announced: never reuse one
            nonce = os.urandom(_NONCE)
        header, prefix = self._header, self._prefix
        if version != ENVELOPE_VERSION:
            header = _header(self._key_id, version)
            prefix = header + self._head
        # the header, then _binding(head, seq, extra, metadata), inlined: once per payload
        aad = b"".join(
            (
                prefix,
                _SEQ_AND_LENGTH.pack(seq, len(extra)),
                extra,
                _LENGTH.pack(len(metadata)),
                metadata,
            )
        )
        return header, nonce, self._aead.encrypt(nonce, plaintext, aad)


def open_(key: DataKey, blob: bytes, binding: PayloadBinding, *, where: str = "") -> bytes:
    """Decrypt a payload sealed by :func:`seal` under the same key and binding.

    Args:
        key: The run's data key.
        blob: The sealed payload.
        binding: Where the payload was read from (run, seq, kind, extra, metadata).
        where: The key store, named in a :class:`WrongKeyError`.

    Raises:
        WrongKeyError: The payload was sealed with another data key than ``key``.
        TamperedPayloadError: The GCM tag does not verify (bytes altered, or
            the payload belongs to another run, seq or kind, or its clear
            metadata was edited).
        CorruptEventError: The header does not parse.
    """
    header = read_header(blob, binding)
    if header.key_id != key.data_key_id:
        raise WrongKeyError(
            binding.run_id, binding.seq, header.key_id, key.data_key_id, where or "the key store"
        )
    nonce = blob[header.length : header.length + _NONCE]
    aad = blob[: header.length] + binding.encode(header.version)
    try:
        return key.aead.decrypt(nonce, blob[header.length + _NONCE :], aad)
    except InvalidTag as exc:
        raise TamperedPayloadError(binding.run_id, binding.seq, binding.kind) from exc
