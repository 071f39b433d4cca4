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
from typing import Generic, TypeVar

from agentlog.crypto._aead import (
    ENVELOPE_VERSION,
    BatchSealer,
    PayloadBinding,
    PayloadKind,
    encode_binding,
    is_sealed,
    open_,
    read_header,
    seal_bound,
)
from agentlog.crypto._keystore import DataKey, KeyStore
from agentlog.errors import KeyStoreMissingError, TamperedPayloadError

__all__ = ["DataKeyCache", "PayloadCipher", "open_payload"]

V = TypeVar("V")


class _ExpiringLru(Generic[V]):
    """A bounded LRU whose entries expire ``max_age`` seconds after they were kept."""

    def __init__(self, max_entries: int, max_age: float, clock: Callable[[], float]) -> None:
        self.max_entries, self.max_age, self._clock = max_entries, max_age, clock
        self._items: OrderedDict[str, tuple[V, float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, run_id: str) -> tuple[V, float] | None:
        """``(value, when it was kept)`` if cached and fresh, else None (a value
        may itself be None)."""
        with self._lock:
            entry = self._items.get(run_id)
            if entry is None:
                return None
            if self._clock() - entry[1] > self.max_age:
                del self._items[run_id]
                return None
            self._items.move_to_end(run_id)
            return entry

    def keep(self, run_id: str, value: V) -> V:
        with self._lock:
            self._items[run_id] = (value, self._clock())
            self._items.move_to_end(run_id)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)
        return value

    def pop(self, run_id: str) -> None:
        with self._lock:
            self._items.pop(run_id, None)


class DataKeyCache:
    """A bounded, expiring LRU of data keys in front of a :class:`KeyStore`. Thread-safe.

    It also remembers, per run, the answer of :meth:`KeyStore.sealed_from`
    (whether the run must be sealed, and from which seq), so that reading a
    run stored in clear asks the key store once, not once per event.
    """

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
        self._keys: _ExpiringLru[DataKey] = _ExpiringLru(max_entries, max_age, clock)
        self._marks: _ExpiringLru[int | None] = _ExpiringLru(max_entries, max_age, clock)
        self._clock = clock
        #: The key a batch of one run's appends keeps asking for, and when it
        #: was kept: answered without the LRU's lock (evicted with it).
        self._last: tuple[DataKey, float] | None = None

    def __len__(self) -> int:
        return len(self._keys)

    def _cached(self, run_id: str) -> DataKey | None:
        hit = self._keys.get(run_id)
        return None if hit is None else hit[0]

    def _kept(self, run_id: str, seq: int) -> tuple[DataKey, float]:
        hit = self._keys.get(run_id)
        if hit is not None:
            return hit
        key = self._keep(self.store.wrap(run_id, seq))
        return key, self._clock()

    def _keep(self, key: DataKey) -> DataKey:
        self._marks.pop(key.run_id)  # the key answers sealed_from from now on
        return self._keys.keep(key.run_id, key)

    def for_seal(self, run_id: str, seq: int = 0) -> DataKey:
        """The run's key for writing; created in the store on the run's first
        payload (``seq``, recorded as :attr:`WrappedKey.sealed_from`)."""
        last = self._last
        if last is None or last[0].run_id != run_id or self._clock() - last[1] > self.max_age:
            last = self._last = self._kept(run_id, seq)  # its age counts from when it was kept
        return last[0]

    def for_open(self, run_id: str) -> DataKey:
        """The run's key for reading. Raises ShreddedError or MissingDataKeyError."""
        return self._cached(run_id) or self._keep(self.store.data_key(run_id))

    def sealed_from(self, run_id: str) -> int | None:
        """The seq from which the run's payloads must be sealed; None: it has no key."""
        key = self._cached(run_id)
        if key is not None:
            return key.sealed_from
        hit = self._marks.get(run_id)
        if hit is not None:
            return hit[0]
        return self._marks.keep(run_id, self.store.sealed_from(run_id))

    def evict(self, run_id: str) -> None:
        """Forget the run's key in this process."""
        self._last = None
        self._keys.pop(run_id)
        self._marks.pop(run_id)

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
        self,
        run_id: str,
        seq: int,
        kind: PayloadKind,
        plaintext: bytes,
        extra: bytes = b"",
        metadata: bytes = b"",
        version: int = ENVELOPE_VERSION,
    ) -> bytes:
        """Encrypt one payload of ``run_id`` at ``seq`` (``extra``, ``metadata``: more to
        bind; ``version``: see :data:`~agentlog.crypto._aead.SEND_INPUTS_VERSION`)."""
        binding = encode_binding(run_id, seq, kind, extra, metadata)
        return seal_bound(self.keys.for_seal(run_id, seq), plaintext, binding, version)

    def sealer(self, run_id: str, seq: int, kind: PayloadKind, count: int) -> BatchSealer:
        """A sealer for ``count`` payloads of ``run_id`` from ``seq`` on (one append):
        the run's key is looked up, or made at ``seq``, once for all of them."""
        return BatchSealer(self.keys.for_seal(run_id, seq), kind, count)

    def open(
        self,
        run_id: str,
        seq: int,
        kind: PayloadKind,
        blob: bytes,
        extra: bytes = b"",
        metadata: bytes = b"",
    ) -> bytes:
        """Decrypt one sealed payload. Raises as :func:`~agentlog.crypto._aead.open_`,
        and ShreddedError or MissingDataKeyError from the key store."""
        binding = PayloadBinding(run_id, seq, kind, extra, metadata)
        read_header(blob, binding)  # a corrupt header is named before any key lookup
        key = self.keys.for_open(run_id)
        return open_(key, blob, binding, where=self.keys.store.description)

    def refuse_clear(self, run_id: str, seq: int, kind: PayloadKind) -> None:
        """Raise if the run's payload at ``seq`` must be sealed but was found in clear.

        Whether a run is encrypted is the key store's answer, never the log's:
        whoever can write the log can strip every mark of encryption from it,
        but cannot make the key store forget the run's key. A command (its seq
        is 0) must be sealed whenever its run has a key.

        Raises:
            TamperedPayloadError: the payload should be sealed.
        """
        sealed_from = self.keys.sealed_from(run_id)
        if sealed_from is None or (kind != "command" and seq < sealed_from):
            return
        raise TamperedPayloadError(
            run_id,
            seq,
            kind,
            reason=(
                f"the {kind} payload is stored in clear, but the run is encrypted (the key "
                f"store {self.keys.store.description} holds its data key, sealing every "
                f"payload from seq {sealed_from}): plain content was put in place of "
                "sealed content. Restore the log from a backup"
            ),
        )

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
    metadata: bytes = b"",
) -> bytes:
    """A stored payload's plaintext: plain payloads pass through, sealed ones are opened.

    A plain payload passes only if its run has no data key (see
    :meth:`PayloadCipher.refuse_clear`); without a cipher nothing can tell.

    Raises:
        KeyStoreMissingError: The payload is sealed and ``cipher`` is None.
        TamperedPayloadError: The payload is plain but its run is encrypted,
            or it is sealed and fails authentication.
    """
    if not is_sealed(blob):
        if cipher is not None:
            cipher.refuse_clear(run_id, seq, kind)
        return blob
    if cipher is None:
        header = read_header(blob, PayloadBinding(run_id, seq, kind, extra, metadata))
        raise KeyStoreMissingError(run_id, seq, header.key_id)
    return cipher.open(run_id, seq, kind, blob, extra, metadata)
