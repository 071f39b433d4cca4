"""The per-process data key cache: bounded, expiring, evicted by a shred."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentlog.crypto import DataKeyCache, LocalKeyStore, PayloadCipher
from agentlog.errors import MissingDataKeyError, ShreddedError


class Clock:
    """A hand-driven monotonic clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_cached_key_is_not_read_again_and_the_lru_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    keyring = LocalKeyStore(path)
    for run in ("a", "b", "c"):
        keyring.wrap(run)
    cache = DataKeyCache(LocalKeyStore(path), max_entries=2)
    a = cache.for_open("a")
    cache.for_open("b")
    path.unlink()  # from here on only the cache can answer
    assert cache.for_open("a") == a
    with pytest.raises(MissingDataKeyError):
        cache.for_open("c")
    cache.for_open("b")  # still cached: "c" was never added
    assert len(cache) == 2


def test_the_least_recently_used_key_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    cache = DataKeyCache(LocalKeyStore(path), max_entries=2)
    cache.for_seal("a")
    cache.for_seal("b")
    cache.for_open("a")  # "b" is now the least recently used
    cache.for_seal("c")
    path.unlink()
    cache.for_open("a")
    cache.for_open("c")
    with pytest.raises(MissingDataKeyError):
        cache.for_open("b")


def test_shred_through_the_cache_evicts_at_once(tmp_path: Path) -> None:
    cipher = PayloadCipher(DataKeyCache(LocalKeyStore(tmp_path / "keyring.json")))
    blob = cipher.seal("run-1", 1, "event", b"secret")
    assert cipher.open("run-1", 1, "event", blob) == b"secret"
    cipher.shred("run-1")
    assert len(cipher.keys) == 0
    with pytest.raises(ShreddedError):
        cipher.open("run-1", 1, "event", blob)


def test_a_shred_elsewhere_reaches_this_process_within_max_age(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    clock = Clock()
    here = PayloadCipher(DataKeyCache(LocalKeyStore(path), max_age=60.0, clock=clock))
    blob = here.seal("run-1", 1, "event", b"secret")
    PayloadCipher(LocalKeyStore(path)).shred("run-1")  # another process's cipher
    clock.now = 59.0
    assert here.open("run-1", 1, "event", blob) == b"secret"  # the documented window
    clock.now = 61.0
    with pytest.raises(ShreddedError):
        here.open("run-1", 1, "event", blob)


def test_bad_limits_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_entries"):
        DataKeyCache(LocalKeyStore(tmp_path / "k.json"), max_entries=0)
