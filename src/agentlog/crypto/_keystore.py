"""The key store: one data key per run, wrapped by a key-encryption key (KEK).

A :class:`KeyStore` is two small seams put together:

- a :class:`KeyWrapper` holds the KEK and wraps or unwraps a data key (the
  local keyring's own KEKs, or AWS KMS);
- a :class:`WrappedKeyTable` keeps each run's *wrapped* data key, and a
  tombstone for each shredded run (the keyring file, or one S3 object per
  run).

Why the wrapped keys live in a table of their own, and not next to the
payloads: the hot log, snapshots, the Kafka topic and the Parquet archive are
immutable copies. A key stored inside them could never be destroyed. Kept in
one small mutable table instead, destroying a run's entry (crypto-shredding)
makes the run's payloads unreadable in every copy at once, and the tombstone
keeps it so forever, in every process.
"""

from __future__ import annotations

import dataclasses
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import UTC, datetime

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from agentlog.errors import MissingDataKeyError, ShreddedError

__all__ = [
    "DATA_KEY_BYTES",
    "DataKey",
    "KeyStore",
    "KeyWrapper",
    "WrappedKey",
    "WrappedKeyTable",
    "new_data_key_id",
    "utc_now",
]

#: AES-256: every data key is 32 random bytes.
DATA_KEY_BYTES = 32


def new_data_key_id() -> str:
    """A fresh random data key id (printed in every sealed payload's header)."""
    return "dk-" + os.urandom(8).hex()


def utc_now() -> str:
    """Now, as the ISO-8601 UTC text written into tombstones."""
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True, slots=True)
class WrappedKey:
    """A run's data key as stored: encrypted under a KEK."""

    run_id: str
    """The run it encrypts."""
    data_key_id: str
    """Its id, written in the header of every payload it seals."""
    kek_id: str
    """The KEK (version) that wrapped it: ``local-2``, or a KMS key ARN."""
    wrapped: bytes
    """The data key, encrypted under the KEK and bound to the run id."""
    sealed_from: int | None = None
    """The seq of the first payload sealed under it: from there on, every
    payload of the run is sealed, and one found in clear is refused as
    tampering. None: a key made before agentlog recorded it (every seq)."""


@dataclass(frozen=True, slots=True)
class DataKey:
    """A run's data key in clear, as a process holds it in memory."""

    run_id: str
    """The run it encrypts."""
    data_key_id: str
    """Its id (see :class:`WrappedKey`)."""
    kek_id: str
    """The KEK (version) that wrapped it."""
    plaintext: bytes = field(repr=False)
    """The 32 key bytes. Kept out of ``repr`` so it cannot land in a log line."""
    sealed_from: int = 0
    """From :attr:`WrappedKey.sealed_from` (0 when it recorded none)."""
    aead: AESGCM = field(init=False, repr=False, compare=False)
    """The cipher object for this key, made once (not once per payload)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "aead", AESGCM(self.plaintext))


class KeyWrapper(ABC):
    """Holds a key-encryption key: makes, wraps and unwraps data keys."""

    @property
    @abstractmethod
    def description(self) -> str:
        """Where the KEK lives, for error messages."""

    @abstractmethod
    def new_data_key(self, run_id: str) -> tuple[DataKey, WrappedKey]:
        """A fresh 256-bit data key for ``run_id``, and its wrapped form under the current KEK."""

    @abstractmethod
    def unwrap(self, wrapped: WrappedKey) -> DataKey:
        """The data key in clear. Raises UnknownKekError, KekDisabledError or
        KeyStoreUnavailableError; never returns a wrong key."""

    @abstractmethod
    def rotate(self) -> str:
        """Make a new KEK version current and return its id.

        Data keys made afterwards are wrapped by it; keys wrapped before still
        unwrap, because :attr:`WrappedKey.kek_id` names their version.
        """


class WrappedKeyTable(ABC):
    """The mutable table ``run_id -> wrapped data key | tombstone``."""

    @property
    @abstractmethod
    def description(self) -> str:
        """Where the table lives, for error messages."""

    @abstractmethod
    def get(self, run_id: str) -> WrappedKey | None:
        """The run's wrapped key, or None if it has none.

        Raises:
            ShreddedError: The run was shredded.
        """

    @abstractmethod
    def put_if_absent(self, key: WrappedKey) -> WrappedKey:
        """Store ``key`` unless the run has one: return whichever is stored.

        Atomic against other processes, so two processes that start one run
        agree on its key.

        Raises:
            ShreddedError: The run was shredded (it never gets a new key).
        """

    @abstractmethod
    def destroy(self, run_id: str) -> str:
        """Durably replace the run's wrapped key by a tombstone; return its time.

        Idempotent: shredding a shredded run (or one with no key yet) leaves
        or writes a tombstone.
        """

    @abstractmethod
    def shredded_at(self, run_id: str) -> str | None:
        """When the run was shredded (ISO-8601 UTC), or None."""


class KeyStore:
    """Per-run data keys: created once, unwrapped on demand, destroyed for good.

    Blocking calls (file or network I/O); a process calls them about once per
    run, with :class:`~agentlog.crypto._cache.DataKeyCache` in front.
    """

    def __init__(self, wrapper: KeyWrapper, table: WrappedKeyTable) -> None:
        """Combine a KEK holder with a wrapped-key table."""
        self.wrapper, self.table = wrapper, table

    @property
    def description(self) -> str:
        """Where the keys live, for error messages."""
        return f"{self.wrapper.description} (wrapped keys in {self.table.description})"

    def wrap(self, run_id: str, sealed_from: int = 0) -> DataKey:
        """The run's data key: a new 256-bit key on the run's first call.

        Every later call, from any process, returns the same key, so a run is
        never sealed under two keys. A shredded run never gets a new one.

        Args:
            run_id: The run.
            sealed_from: The seq of the payload about to be sealed, recorded
                with a new key (:attr:`WrappedKey.sealed_from`): a run that
                began in clear keeps its clear events readable.

        Raises:
            ShreddedError: The run was shredded.
        """
        stored = self.table.get(run_id)
        if stored is not None:
            return self.unwrap(stored)
        fresh, wrapped = self.wrapper.new_data_key(run_id)
        wrapped = dataclasses.replace(wrapped, sealed_from=sealed_from)
        winner = self.table.put_if_absent(wrapped)
        if winner == wrapped:
            return dataclasses.replace(fresh, sealed_from=sealed_from)
        return self.unwrap(winner)

    def sealed_from(self, run_id: str) -> int | None:
        """The seq from which the run's payloads must be sealed; None if it has no key.

        A shredded run, and a key that recorded no seq, answer 0: every
        payload. Reads the table only (no KEK call).
        """
        try:
            stored = self.table.get(run_id)
        except ShreddedError:
            return 0
        if stored is None:
            return None
        return stored.sealed_from or 0

    def lookup(self, run_id: str) -> WrappedKey:
        """The run's wrapped data key.

        Raises:
            ShreddedError: The run was shredded.
            MissingDataKeyError: This key store never made a key for the run.
        """
        stored = self.table.get(run_id)
        if stored is None:
            raise MissingDataKeyError(run_id, self.description)
        return stored

    def unwrap(self, wrapped: WrappedKey) -> DataKey:
        """Unwrap a data key from :meth:`lookup` with the KEK version it names."""
        key = self.wrapper.unwrap(wrapped)
        return dataclasses.replace(key, sealed_from=wrapped.sealed_from or 0)

    def data_key(self, run_id: str) -> DataKey:
        """The run's data key, for reading. Raises as :meth:`lookup` does."""
        return self.unwrap(self.lookup(run_id))

    def destroy(self, run_id: str) -> str:
        """Crypto-shred the run: destroy its data key, durably; return the time.

        Afterwards every copy of its payloads is unreadable and :meth:`lookup`
        raises :class:`~agentlog.errors.ShreddedError`, in this process and
        any later one.
        """
        return self.table.destroy(run_id)

    def is_shredded(self, run_id: str) -> bool:
        """True if the run was shredded."""
        return self.table.shredded_at(run_id) is not None

    def rotate(self) -> str:
        """Rotate the KEK (see :meth:`KeyWrapper.rotate`); return the new version's id."""
        return self.wrapper.rotate()


def raise_if_shredded(run_id: str, shredded_at: str | None, where: str) -> None:
    """Raise ShreddedError if ``shredded_at`` says the run was shredded."""
    if shredded_at is not None:
        raise ShreddedError(run_id, shredded_at, where)
