"""A SQL hot log's rows go to Parquet without payload objects (issue 23, item 9).

The archiver reads the lifted columns, ``payload_json`` and the run's
status from each stored payload's map instead of decoding an Event. These
tests pin that the cells are exactly those the decoded path
(:func:`events_to_table` over the events the log reads, and
:meth:`Segment.of`) gives, on every event type of the golden log, on
events sealed with a key the archiver lacks (old and current envelope
versions, ``Send`` inputs included), and on a log with the cipher; and that
a run recorded today is archived without decoding a single row.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sqlite3
from collections.abc import Sequence
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agentlog.archive import Archiver, ArchiverConfig, ArchiveWriteError, LocalArchiveStore
from agentlog.archive._parquet import Manifest, Segment, events_to_table
from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.errors import CorruptEventError
from agentlog.eventlog import Event, EventLog
from agentlog.eventlog import _row_format as row_format
from agentlog.eventlog.codec import decode_event, pack, row_checksum, unpack
from agentlog.eventlog.events import (
    EVENT_TYPES,
    InterruptRaised,
    MessageSent,
    RunCompleted,
    RunStarted,
    RunStatus,
    StepCompleted,
    SuperstepCommitted,
    TaskCompleted,
    TaskStarted,
)
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.archive.helpers import T0, record_run
from tests.golden.test_golden import committed_events
from tests.support.archive import NOW
from tests.support.tamper import sealed_run

#: Late enough that every golden run is finished or idle past its window.
LATER = NOW + timedelta(days=36_500)

GOLDEN = Path(__file__).parents[1] / "golden"


def _sealed_v1_events() -> list[Event]:
    """The committed run sealed by envelope version 1, read without its key."""
    lines = (GOLDEN / "sealed_v1_run.jsonl").read_text().splitlines()
    return [decode_event(base64.b64decode(json.loads(line)["event"])) for line in lines]


async def _append_as_written(log: EventLog, events: list[Event]) -> None:
    """Append events at the writer epochs they were written with."""
    for event in events:
        info = await log.find_run(event.run_id)
        while info is None or info.writer_epoch < event.writer_epoch:
            await log.claim_writer(event.run_id)
            info = await log.find_run(event.run_id)
        await log.append([event])


def _send_run(run_id: str, epoch: int) -> list[Event]:
    """A run whose branches carry ``Send`` inputs (sealed as a whole list)."""
    events = sealed_run(run_id, epoch)
    goto = ["plan", {"step": "fan", "input": {"doc": "secret-send-input"}}]
    events[3] = Event(
        run_id, 4, StepCompleted("plan", 0, 0, {"notes": "n"}, goto), events[3].ts, epoch
    )
    events[4] = Event(run_id, 5, SuperstepCommitted(0, goto), events[4].ts, epoch)
    return events


async def _fill(path: Path, keyring: Path) -> None:
    """Every golden event type in clear, plus runs sealed by two envelope versions."""
    async with SqliteEventLog(path, cipher=PayloadCipher(LocalKeyStore(keyring))) as sealed:
        for run_id in ("sealed-a", "sealed-send"):
            epoch = await sealed.claim_writer(run_id)
            make = _send_run if run_id == "sealed-send" else sealed_run
            await sealed.append(make(run_id, epoch))
    async with SqliteEventLog(path) as log:
        for events in committed_events().values():
            await _append_as_written(log, events)
        await _append_as_written(log, _sealed_v1_events())
        epoch = await log.claim_writer("woken")
        parked = [
            RunStarted("wf", "1", {}, "sync", "fp"),
            InterruptRaised("ask", 0, 0, 0, {"q": "?"}),
            MessageSent(topic="answers", value="yes", key="m-1", wakes="answers"),
        ]
        await log.append(
            [
                Event("woken", seq, d, T0 + timedelta(seconds=seq), epoch)
                for seq, d in enumerate(parked, 1)
            ]
        )
    with sqlite3.connect(path) as raw:  # an index row that no longer names RunStarted's version
        raw.execute("UPDATE runs SET version = 'v-index' WHERE run_id = 'golden-cancelled'")


def _archived(store: LocalArchiveStore) -> tuple[pa.Table, dict[str, Segment]]:
    manifest = Manifest.load(store)
    tables = [pq.read_table(store.root / e.file) for e in manifest.entries.values()]
    table = pa.concat_tables(tables).sort_by([("run_id", "ascending"), ("seq", "ascending")])
    segments = {s.run_id: s for e in manifest.entries.values() for s in e.segments}
    return table, segments


async def _decoded_path(log: SqliteEventLog) -> tuple[pa.Table, dict[str, Segment]]:
    """What the archiver wrote before it read stored rows: decoded events."""
    parts, segments = [], {}
    for info in sorted(await log.list_runs(), key=lambda i: i.run_id):
        events: list[Event] = []
        stored: list[Any] = []
        async for batch, payloads in log.read_stored(info.run_id):
            events += batch
            stored += payloads
        parts.append(
            events_to_table(events, workflow=info.workflow, version=info.version, stored=stored)
        )
        segments[info.run_id] = Segment.of(
            events,
            workflow=info.workflow,
            version=info.version,
            status=RunStatus.RUNNING,
            steps=0,
            started_at=info.started_at,
        )
    return pa.concat_tables(parts), segments


def _assert_same_cells(actual: pa.Table, expected: pa.Table) -> None:
    assert actual.schema == expected.schema
    keys = list(zip(expected["run_id"].to_pylist(), expected["seq"].to_pylist(), strict=True))
    for name in expected.column_names:
        got, want = actual[name].to_pylist(), expected[name].to_pylist()
        wrong = [keys[i] for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w]
        assert not wrong, f"column {name!r} differs from the decoded path at {wrong[:5]}"


@pytest.mark.parametrize("with_cipher", [False, True], ids=["no-key", "cipher"])
async def test_every_event_type_archives_as_the_decoded_path_renders_it(
    tmp_path: Path, with_cipher: bool
) -> None:
    path, keyring = tmp_path / "hot.db", tmp_path / "keyring.json"
    await _fill(path, keyring)
    cipher = PayloadCipher(LocalKeyStore(keyring)) if with_cipher else None
    async with SqliteEventLog(path, cipher=cipher) as log:
        expected, expected_segments = await _decoded_path(log)
        types = set(expected["type"].to_pylist())
        sealed = sum('"_sealed":true' in t for t in expected["payload_json"].to_pylist())
        assert len(types) > 15 and sealed >= 12, "the set covers every type and sealed rows"
        store = LocalArchiveStore(tmp_path / "archive")
        summary = await Archiver(log, store).run(now=LATER)
    archived = set(summary.run_ids)
    assert set(
        expected.filter(pa.array([r in archived for r in expected["run_id"].to_pylist()]))[
            "type"
        ].to_pylist()
    ) == set(EVENT_TYPES)
    expected = expected.filter(pa.array([r in archived for r in expected["run_id"].to_pylist()]))
    expected_segments = {r: s for r, s in expected_segments.items() if r in archived}
    assert summary.events == len(expected)
    actual, segments = _archived(store)
    _assert_same_cells(actual, expected)
    assert {
        run_id: (s.first_seq, s.last_seq, s.status, s.steps, s.workflow, s.updated_at)
        for run_id, s in segments.items()
    } == {
        run_id: (s.first_seq, s.last_seq, s.status, s.steps, s.workflow, s.updated_at)
        for run_id, s in expected_segments.items()
    }


async def test_sealed_rows_render_their_metadata_only(tmp_path: Path) -> None:
    """Independent of the decoded path: no content field, the marker, the blob kept."""
    path, keyring = tmp_path / "hot.db", tmp_path / "keyring.json"
    await _fill(path, keyring)
    async with SqliteEventLog(path) as log:
        store = LocalArchiveStore(tmp_path / "archive")
        await Archiver(log, store).run(now=LATER)
    table, _ = _archived(store)
    seen = 0
    for run_id, kind, payload, text in zip(
        *(table[c].to_pylist() for c in ("run_id", "type", "payload", "payload_json")),
        strict=True,
    ):
        stored = unpack(payload)
        if "_sealed" not in stored:
            continue
        seen += 1
        rendered = json.loads(text)
        assert rendered.pop("_sealed") is True, (run_id, kind)
        assert rendered == json.loads(
            json.dumps({k: v for k, v in stored.items() if k != "_sealed"})
        )
        assert "secret" not in text and "input" not in json.dumps(rendered.get("goto", []))
    assert seen >= 12


async def test_a_recorded_run_is_archived_without_decoding_a_row(
    hot: SqliteEventLog, store: LocalArchiveStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, run_id in enumerate(["r1", "r2"], start=1):
        await record_run(hot, run_id, tag=k)
    built = [0]
    real = row_format.build_event

    def counting(*args: Any) -> Event:
        built[0] += 1
        return real(*args)

    monkeypatch.setattr(row_format, "build_event", counting)
    summary = await Archiver(hot, store).run(now=NOW)
    assert summary.events > 0
    assert built[0] == 0, f"the archiver decoded {built[0]} events the log stores as rows"


async def test_a_lifted_field_of_the_wrong_type_names_its_run_and_seq(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    """A well-checksummed row whose ``step`` is not a string is corrupt, not archived."""
    await record_run(hot, "bad", steps=1)
    with sqlite3.connect(hot.path) as raw:
        seq, kind, ts, schema_v, epoch, payload = raw.execute(
            "SELECT seq, type, ts, schema_v, writer_epoch, payload FROM events "
            "WHERE run_id = 'bad' AND type = ?",
            (TaskStarted.type,),
        ).fetchone()
        fields = unpack(payload)
        fields["step"] = 12345
        payload = pack(fields)
        checksum = row_checksum("bad", seq, kind, ts, schema_v, epoch, payload)
        raw.execute(
            "UPDATE events SET payload = ?, checksum = ? WHERE run_id = 'bad' AND seq = ?",
            (payload, checksum, seq),
        )
    with pytest.raises(CorruptEventError, match=rf"'bad'.*seq {seq}|run bad.*{seq}"):
        await Archiver(hot, store).run(now=NOW)
    assert Manifest.load(store).entries == {}


class _FailingOnFile(LocalArchiveStore):
    """A local folder whose ``n``-th Parquet write fails (the disk fills up)."""

    def __init__(self, root: Path, n: int) -> None:
        super().__init__(root)
        self.left = n

    def put(self, key: str, data: bytes) -> None:
        if key.endswith(".parquet") and not key.endswith(".tasks.parquet"):
            self.left -= 1
            if self.left == 0:
                raise ArchiveWriteError(f"{key}: disk full")
        super().put(key, data)


class _SlowPruning(SqliteEventLog):
    """A real SQLite log whose prunes are still under way when the next file fails."""

    async def prune_many(
        self, run_ids: Sequence[str], *, keep_latest_snapshot: bool = False
    ) -> None:
        await asyncio.sleep(0.2)
        await super().prune_many(run_ids, keep_latest_snapshot=keep_latest_snapshot)


async def test_a_failed_file_leaves_its_runs_hot_and_the_confirmed_ones_pruned(
    tmp_path: Path,
) -> None:
    """A file's runs are pruned while the next file is written; when that write
    fails, the confirmed file's prunes still finish and the failed one's runs stay."""
    async with _SlowPruning(tmp_path / "hot.db") as hot:
        await _fail_the_third_file(hot, tmp_path)


async def _fail_the_third_file(hot: SqliteEventLog, tmp_path: Path) -> None:
    for i in range(6):
        await record_run(hot, f"r{i}", start=T0 + timedelta(days=i % 3), tag=i)
    store = _FailingOnFile(tmp_path / "archive", n=3)
    config = ArchiverConfig(max_events_per_file=1_000)  # one file a day: three files
    with pytest.raises(ArchiveWriteError):
        await Archiver(hot, store, config).run(now=NOW + timedelta(days=3))
    manifest = Manifest.load(store)
    confirmed = {s.run_id for e in manifest.entries.values() for s in e.segments}
    assert len(manifest.entries) == 2 and len(confirmed) == 4
    for i in range(6):
        info = await hot.get_run(f"r{i}")
        assert info.archived == (f"r{i}" in confirmed), f"r{i}"
    summary = await Archiver(hot, LocalArchiveStore(tmp_path / "archive")).run(
        now=NOW + timedelta(days=3)
    )
    assert summary.runs == 2 and summary.pruned == 2


@pytest.mark.parametrize("damage", ["flipped byte", "deleted row"])
async def test_a_damaged_hot_row_stops_the_pass_naming_its_run_and_seq(
    hot: SqliteEventLog, store: LocalArchiveStore, damage: str
) -> None:
    """Stored rows are checked as a read checks them: checksum and gaps."""
    await record_run(hot, "good", tag=1)
    events = await record_run(hot, "hurt", tag=2)
    seq = len(events) // 2
    with sqlite3.connect(hot.path) as raw:
        if damage == "deleted row":
            raw.execute("DELETE FROM events WHERE run_id = 'hurt' AND seq = ?", (seq,))
        else:
            (payload,) = raw.execute(
                "SELECT payload FROM events WHERE run_id = 'hurt' AND seq = ?", (seq,)
            ).fetchone()
            # the last byte: the map still unpacks, to the same keys, with a wrong value
            flipped = bytes([*payload[:-1], payload[-1] ^ 0x01])
            raw.execute(
                "UPDATE events SET payload = ? WHERE run_id = 'hurt' AND seq = ?", (flipped, seq)
            )
    with pytest.raises(CorruptEventError) as caught:
        await Archiver(hot, store).run(now=NOW)
    assert (caught.value.run_id, caught.value.seq) == ("hurt", seq)
    assert (await hot.get_run("hurt")).archived is False


async def test_payload_values_of_every_codec_kind_render_as_the_decoded_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stored maps are read by a faster msgpack reader where it can; values it does
    not read (datetimes, UUIDs, Decimals: ext types; int keys) take the codec's
    reading, and every cell is the decoded path's, still with no event built."""
    values: dict[str, Any] = {
        "when": T0 + timedelta(microseconds=123_456),
        "id": UUID("12345678-1234-5678-1234-567812345678"),
        "price": Decimal("12.50"),
        "blob": b"\x00\xffbytes",
        "by_int": {1: "one", 2: ["two"]},
        "big": 2**64 - 1,
        "small": -(2**63),
        "float": 0.1,
        "text": "naïve ☃ \u2028",
        "nested": [{"a": None, "b": True}, [1.5, "x"]],
    }
    events = [
        RunStarted("wf", "1", {"q": "?"}, "sync", "fp"),
        TaskStarted("k1", "tool", "s0", 0, 0, 0),
        TaskCompleted("k1", values, 12.5),
        StepCompleted("s0", 0, 0, {"out": values["when"]}),
        RunCompleted({"answer": values["id"]}),
    ]
    async with SqliteEventLog(tmp_path / "hot.db") as log:
        epoch = await log.claim_writer("kinds")
        await log.append(
            [
                Event("kinds", seq, d, T0 + timedelta(seconds=seq), epoch)
                for seq, d in enumerate(events, 1)
            ]
        )
        expected, _ = await _decoded_path(log)
        built = [0]
        real = row_format.build_event

        def counting(*args: Any) -> Event:
            built[0] += 1
            return real(*args)

        monkeypatch.setattr(row_format, "build_event", counting)
        store = LocalArchiveStore(tmp_path / "archive")
        await Archiver(log, store).run(now=LATER)
    actual, _ = _archived(store)
    _assert_same_cells(actual, expected)
    assert built[0] == 0
    rendered = json.loads(actual["payload_json"].to_pylist()[2])
    assert rendered["result"]["id"] == "12345678-1234-5678-1234-567812345678"
