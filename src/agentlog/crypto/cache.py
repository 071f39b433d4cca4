"""Per-process cache of unwrapped data keys, and the payload cipher on top.

Unwrapping is a file read or a KMS round trip, so a process unwraps each
run's key once and keeps it in a bounded LRU. Entries also expire after
``max_age`` seconds: a shred in *another* process cannot reach this one's
memory, so ``max_age`` bounds how long a live process may still read a run
shredded elsewhere. A shred through this cache evicts at once.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from agentlog.crypto.aead import PayloadBinding, PayloadKind, is_sealed, open_, read_header, seal
from agentlog.crypto.keystore import DataKey, KeyStore
from agentlog.errors import KeyStoreMissingError

__all__ = ["DataKeyCache", "PayloadCipher", "open_payload"]


class DataKeyCache:
    """A bounded, expiring LRU of data keys in front of a :class:`KeyStore`. Thread-safe."""

    def __init__(
        self,
        store: KeyStore,
        *,
        max_entries: int = 4096,
        max_age: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Cache up to ``max_entries`` keys, each for at most ``max_age`` seconds."""
        if max_entries < 1 or max_age <= 0:
            raise ValueError("max_entries must be >= 1 and max_age > 0")
        self.store, self.max_entries, self.max_age = store, max_entries, max_age
        self._clock = clock
        self._keys: OrderedDict[str, tuple[DataKey, float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._keys)

    def _cached(self, run_id: str) -> DataKey | None:
        with self._lock:
            entry = self._keys.get(run_id)
            if entry is None:
                return None
            if self._clock() - entry[1] > self.max_age:
                del self._keys[run_id]
                return None
            self._keys.move_to_end(run_id)
            return entry[0]

    def _keep(self, key: DataKey) -> DataKey:
        with self._lock:
            self._keys[key.run_id] = (key, self._clock())
            self._keys.move_to_end(key.run_id)
            while len(self._keys) > self.max_entries:
                self._keys.popitem(last=False)
        return key

    def for_seal(self, run_id: str) -> DataKey:
        """The run's key for writing; created in the store on the run's first payload."""
        return self._cached(run_id) or self._keep(self.store.wrap(run_id))

    def for_open(self, run_id: str) -> DataKey:
        """The run's key for reading. Raises ShreddedError or MissingDataKeyError."""
        return self._cached(run_id) or self._keep(self.store.data_key(run_id))

    def evict(self, run_id: str) -> None:
        """Forget the run's key in this process."""
        with self._lock:
            self._keys.pop(run_id, None)

    def shred(self, run_id: str) -> str:
        """Destroy the run's key in the store and forget it here; return the time."""
        self.evict(run_id)
        try:
            return self.store.destroy(run_id)
        finally:
            self.evict(run_id)  # a reader may have cached it again meanwhile


class PayloadCipher:
    """Seals and opens event and snapshot payloads with their runs' data keys."""

    def __init__(self, keys: DataKeyCache | KeyStore) -> None:
        """Use ``keys`` (a bare KeyStore gets a default :class:`DataKeyCache`)."""
        self.keys = keys if isinstance(keys, DataKeyCache) else DataKeyCache(keys)

    def seal(
        self, run_id: str, seq: int, kind: PayloadKind, plaintext: bytes, extra: bytes = b""
    ) -> bytes:
        """Encrypt one payload of ``run_id`` at ``seq`` (``extra``: more to bind)."""
        binding = PayloadBinding(run_id, seq, kind, extra)
        return seal(self.keys.for_seal(run_id), plaintext, binding)

    def open(
        self, run_id: str, seq: int, kind: PayloadKind, blob: bytes, extra: bytes = b""
    ) -> bytes:
        """Decrypt one sealed payload. Raises as :func:`~agentlog.crypto.aead.open_`,
        and ShreddedError or MissingDataKeyError from the key store."""
        binding = PayloadBinding(run_id, seq, kind, extra)
        read_header(blob, binding)  # a corrupt header is named before any key lookup
        key = self.keys.for_open(run_id)
        return open_(key, blob, binding, where=self.keys.store.description)

    def shred(self, run_id: str) -> str:
        """Crypto-shred the run (see :meth:`DataKeyCache.shred`)."""
        return self.keys.shred(run_id)


def open_payload(
    cipher: PayloadCipher | None,
    run_id: str,
    seq: int,
    kind: PayloadKind,
    blob: bytes,
    extra: bytes = b"",
) -> bytes:
    """A stored payload's plaintext: plain payloads pass through, sealed ones are opened.

    Raises:
        KeyStoreMissingError: The payload is sealed and ``cipher`` is None.
    """
    if not is_sealed(blob):
        return blob
    if cipher is None:
        header = read_header(blob, PayloadBinding(run_id, seq, kind, extra))
        raise KeyStoreMissingError(run_id, seq, header.key_id)
    return cipher.open(run_id, seq, kind, blob, extra)
