"""A batch's payloads packed at a batch's cost (issue 23, item 9).

:func:`agentlog.eventlog._packing.pack_each` is :func:`pack` of each value:
the same bytes, the same error naming the bad part, and the same rule that a
Packer which grew past the kept buffer is dropped. A batched append of events
built by hand packs their payloads so, with one Python call an event (two
sealed): see ``tests/property/test_fast_packing_laws.py`` for the bytes.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

import ormsgpack
import pytest

from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.errors import NotSerializableError
from agentlog.eventlog import Event, TaskCompleted, _packing
from agentlog.eventlog._packing import pack, pack_each
from agentlog.eventlog._row_format import event_rows
from agentlog.eventlog.sqlite import SqliteEventLog

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_each_value_packs_to_packs_bytes() -> None:
    values = [{"a": 1}, {"b": [b"x", 2.5, None]}, {"c": T0}]
    assert pack_each(values, ["A", "B", "C"]) == [pack(v) for v in values]


def test_a_bad_value_is_named_by_its_path() -> None:
    with pytest.raises(NotSerializableError) as caught:
        pack_each([{"ok": 1}, {"r": {3}}, {"ok": 2}], ["first", "TaskCompleted", "third"])
    assert caught.value.path == "TaskCompleted['r']"


def test_a_packer_grown_past_the_kept_buffer_is_dropped() -> None:
    pack({"small": 1})
    assert _packing._PACKERS.packer is not None
    pack({"big": b"\0" * (_packing._KEEP_BUFFER + 1)})
    assert _packing._PACKERS.packer is None


def test_a_sealed_batch_drops_a_packer_grown_past_the_kept_buffer(tmp_path: Path) -> None:
    cipher = PayloadCipher(LocalKeyStore(tmp_path / "keyring.json"))
    huge_key = "k" * (_packing._KEEP_BUFFER + 1)  # metadata: packed by the thread's Packer
    events = [Event("r", 1, TaskCompleted(huge_key, {"n": 1}), T0, 1)]
    pack({"small": 1})
    assert _packing._PACKERS.packer is not None
    event_rows(events, 1, cipher)
    assert _packing._PACKERS.packer is None


def _python_calls(fn: Callable[[], object]) -> Counter[str]:
    """The Python functions ``fn`` runs, by name, with how many times each ran."""
    calls: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            calls[frame.f_code.co_name] += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
def test_a_batch_runs_one_python_function_an_event_or_two_sealed(
    tmp_path: Path, sealed: bool
) -> None:
    """Issue 23, item 9: a row is built by C calls but for the payload class's
    compiled field reader (and, sealed, the batch sealer's ``seal_parts``): no
    ``to_dict``, no comprehension, no checksum function, no framing function
    per event. The count is exact, not timed."""
    cipher = PayloadCipher(LocalKeyStore(tmp_path / "keyring.json")) if sealed else None
    events = [
        Event("r", seq, TaskCompleted(f"k{seq}", {"hits": [seq, "x"]}), T0, 1)
        for seq in range(1, 201)
    ]
    event_rows(events, 1, cipher)  # the classes' readers compiled, the run's key made
    calls = _python_calls(lambda: event_rows(events, 1, cipher))
    per_event = {name: n for name, n in calls.items() if n >= len(events)}
    assert per_event == ({"read": 200, "seal_parts": 200} if sealed else {"read": 200})
    assert sum(calls.values()) - sum(per_event.values()) < 20, calls


async def test_a_batch_with_one_bad_payload_writes_nothing(tmp_path: Path) -> None:
    async with SqliteEventLog(tmp_path / "log.db") as log:
        epoch = await log.claim_writer("r")
        results = [{"n": 1}, {"n": {2}}, {"n": 3}]
        events = [
            Event("r", seq, TaskCompleted(f"k{seq}", result), T0, epoch)
            for seq, result in enumerate(results, start=1)
        ]
        with pytest.raises(NotSerializableError) as caught:
            await log.append(events)
        assert caught.value.path == "TaskCompleted['result']['n']"
        assert [e async for e in log.read("r")] == []


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
def test_another_librarys_extension_value_is_refused_not_stored(
    tmp_path: Path, sealed: bool
) -> None:
    """An ``ormsgpack.Ext`` in a payload is not a value the codec stores: the
    batch is refused naming it, as by :func:`pack`, rather than written as an
    extension the reader cannot read (or reads as a UUID or a Decimal)."""
    cipher = PayloadCipher(LocalKeyStore(tmp_path / "keyring.json")) if sealed else None
    for code in (1, 5):
        events = [Event("r", 1, TaskCompleted("k", {"v": ormsgpack.Ext(code, b"x" * 16)}), T0, 1)]
        with pytest.raises(NotSerializableError, match="Ext"):
            event_rows(events, 1, cipher)
