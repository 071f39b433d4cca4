"""The local keyring: KEKs and wrapped per-run keys in one 0600 JSON file.

For the embedded default, tests, and one machine. The file holds::

    {"format": "agentlog-keyring/1",
     "keks": {"local-1": "<base64 32 bytes>", ...}, "current_kek": "local-1",
     "runs": {"<run id>": {"id": "dk-...", "kek": "local-1", "wrapped": "<base64>"}},
     "shredded": {"<run id>": "2025-01-01T00:00:00+00:00"}}

A data key is wrapped with AES-256-GCM under the current KEK, with the run
id, data key id and KEK id as associated data, so a wrapped key copied to
another run's entry does not unwrap.

What shredding does and does not do here: the entry is gone from the file,
atomically and durably, so agentlog can never read the run again. The file
system may still hold the old file's freed blocks (the KEK is in the same
file), so against someone who images the disk afterwards, use KMS, where the
KEK never leaves AWS.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from agentlog.crypto._keyfile import KeyFile, b64, unb64
from agentlog.crypto._keystore import (
    DATA_KEY_BYTES,
    DataKey,
    KeyStore,
    KeyWrapper,
    WrappedKey,
    new_data_key_id,
)
from agentlog.crypto._tables import FileKeyTable
from agentlog.errors import CorruptKeyringError, UnknownKekError

__all__ = ["ENV_VAR", "LocalKek", "LocalKeyStore"]

#: The environment variable that names the keyring file (read by the CLI).
ENV_VAR = "AGENTLOG_KEYRING"
_NONCE = 12


def _wrap_aad(run_id: str, data_key_id: str, kek_id: str) -> bytes:
    parts = [p.encode("utf-8") for p in (run_id, data_key_id, kek_id)]
    return b"agentlog.datakey.v1\x00" + b"".join(struct.pack(">I", len(p)) + p for p in parts)


class LocalKek(KeyWrapper):
    """KEK versions kept in the keyring file; the first is made on first use."""

    def __init__(self, key_file: KeyFile) -> None:
        """Use the KEKs of ``key_file``."""
        self.file = key_file

    @property
    def description(self) -> str:
        """``keyring file PATH``."""
        return f"keyring file {self.file.path}"

    def _kek(self, doc: Mapping[str, Any], kek_id: str) -> bytes:
        encoded = doc.get("keks", {}).get(kek_id)
        if encoded is None:
            raise UnknownKekError(kek_id, self.description)
        try:
            kek = unb64(encoded)
        except (TypeError, ValueError) as exc:
            raise CorruptKeyringError(str(self.file.path), f"KEK {kek_id!r} is not base64") from exc
        if len(kek) != DATA_KEY_BYTES:
            raise CorruptKeyringError(str(self.file.path), f"KEK {kek_id!r} is not 32 bytes")
        return kek

    def _current(self) -> tuple[str, bytes]:
        doc = self.file.read()
        if "current_kek" not in doc:
            self.file.update(_ensure_kek)
            doc = self.file.read()
        kek_id = str(doc["current_kek"])
        return kek_id, self._kek(doc, kek_id)

    def new_data_key(self, run_id: str) -> tuple[DataKey, WrappedKey]:
        """A random data key, wrapped under the current KEK."""
        kek_id, kek = self._current()
        plaintext, data_key_id = os.urandom(DATA_KEY_BYTES), new_data_key_id()
        nonce = os.urandom(_NONCE)
        sealed = AESGCM(kek).encrypt(nonce, plaintext, _wrap_aad(run_id, data_key_id, kek_id))
        return (
            DataKey(run_id, data_key_id, kek_id, plaintext),
            WrappedKey(run_id, data_key_id, kek_id, nonce + sealed),
        )

    def unwrap(self, wrapped: WrappedKey) -> DataKey:
        """Unwrap with the KEK version the key names."""
        kek = self._kek(self.file.read(), wrapped.kek_id)
        aad = _wrap_aad(wrapped.run_id, wrapped.data_key_id, wrapped.kek_id)
        try:
            plaintext = AESGCM(kek).decrypt(wrapped.wrapped[:_NONCE], wrapped.wrapped[_NONCE:], aad)
        except InvalidTag as exc:
            raise CorruptKeyringError(
                str(self.file.path),
                f"the data key of run {wrapped.run_id!r} does not unwrap under KEK "
                f"{wrapped.kek_id!r} (its entry was altered or copied from another run)",
            ) from exc
        return DataKey(wrapped.run_id, wrapped.data_key_id, wrapped.kek_id, plaintext)

    def rotate(self) -> str:
        """Add a new KEK version and make it current; older ones stay for unwrapping."""

        def change(doc: dict[str, Any]) -> tuple[str, bool]:
            keks = doc.setdefault("keks", {})
            kek_id = f"local-{len(keks) + 1}"
            while kek_id in keks:  # never reuse a version id, even after hand edits
                kek_id = f"local-{os.urandom(4).hex()}"
            keks[kek_id] = b64(os.urandom(DATA_KEY_BYTES))
            doc["current_kek"] = kek_id
            return kek_id, True

        return self.file.update(change)


def _ensure_kek(doc: dict[str, Any]) -> tuple[None, bool]:
    if "current_kek" in doc:
        return None, False  # another process made it first
    doc.setdefault("keks", {})["local-1"] = b64(os.urandom(DATA_KEY_BYTES))
    doc["current_kek"] = "local-1"
    return None, True


class LocalKeyStore(KeyStore):
    """A :class:`KeyStore` in one local file, created (0600) on first use."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Use the keyring file at ``path``; it is created by the first key or rotation."""
        key_file = KeyFile(path)
        super().__init__(LocalKek(key_file), FileKeyTable(key_file))
        self.path = key_file.path
        key_file.warn_if_readable_by_others()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LocalKeyStore | None:
        """The keyring named by ``AGENTLOG_KEYRING=PATH``, or None when it is unset.

        For the CLI, the demo and workers; library code passes a key store in.
        """
        path = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
        return cls(os.path.expanduser(path)) if path else None
