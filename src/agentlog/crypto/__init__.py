"""Payload encryption at rest: per-run data keys, AES-256-GCM, crypto-shredding.

A standalone layer below the event log: it imports only :mod:`agentlog.errors`
(and the library logger), so the codec, the backends and the archive can all
use it. See ``docs/security.md`` for the design.

- :class:`KeyStore` (a :class:`KeyWrapper` holding the KEK plus a
  :class:`WrappedKeyTable` of per-run wrapped keys): :class:`LocalKeyStore`
  (one 0600 file, ``AGENTLOG_KEYRING=PATH``) and :class:`KmsKeyStore`
  (AWS KMS, wrapped keys in :class:`S3KeyTable` or :class:`FileKeyTable`).
- :func:`seal` / :func:`open_`: one payload, bound to its run, seq and kind.
- :class:`DataKeyCache` and :class:`PayloadCipher`: what the codec holds.
"""

from __future__ import annotations

from agentlog._renamed import renamed
from agentlog.crypto._aead import PayloadBinding, PayloadKind, is_sealed, open_, read_header, seal
from agentlog.crypto._cache import DataKeyCache, PayloadCipher, open_payload
from agentlog.crypto._keystore import DataKey, KeyStore, KeyWrapper, WrappedKey, WrappedKeyTable
from agentlog.crypto._kms import KmsKek, KmsKeyStore
from agentlog.crypto._local import ENV_VAR, LocalKek, LocalKeyStore
from agentlog.crypto._tables import FileKeyTable, S3KeyTable

__all__ = [
    "ENV_VAR",
    "DataKey",
    "DataKeyCache",
    "FileKeyTable",
    "KeyStore",
    "KeyWrapper",
    "KmsKek",
    "KmsKeyStore",
    "LocalKek",
    "LocalKeyStore",
    "PayloadBinding",
    "PayloadCipher",
    "PayloadKind",
    "S3KeyTable",
    "WrappedKey",
    "WrappedKeyTable",
    "is_sealed",
    "open_",
    "open_payload",
    "read_header",
    "seal",
]

__getattr__ = renamed("agentlog.crypto", {"LocalKeyring": "LocalKeyStore"}, globals())
