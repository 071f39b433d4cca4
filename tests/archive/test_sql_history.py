"""SQL views, the Parquet rows, read-only history, and bad input."""

from __future__ import annotations

import json
from datetime import timedelta

import pyarrow.parquet as pq
import pytest

from agentlog.archive import (
    ArchiveCorruptError,
    ArchivedEventReader,
    ArchiveQueryError,
    Archiver,
    LocalArchiveStore,
    open_archive,
    open_sql,
)
from agentlog.archive._errors import ArchiveConfigError
from agentlog.archive._parquet import (
    Manifest,
    ManifestEntry,
    Segment,
    events_to_table,
    file_key,
    table_to_events,
)
from agentlog.archive._retention import parse_duration, parse_policy
from agentlog.errors import CorruptEventError
from agentlog.eventlog import EventLog, EventReader, MemoryEventLog
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.archive.helpers import T0, as_events, read_all, record_run, run_payloads
from tests.support.archive import NOW


def test_rows_round_trip_losslessly_and_render_json() -> None:
    events = as_events("r", run_payloads(4, end="failed", tag=7))
    table = events_to_table(events)
    assert table.num_rows == len(events)
    assert table_to_events(table) == events
    first = json.loads(table.column("payload_json")[0].as_py())
    assert first["input"]["blob"] == "AP8Q"  # base64 of the bytes
    assert first["input"]["id"] == "00000000-0000-0000-0000-000000000007"
    assert first["input"]["price"] == "19.99"
    assert first["input"]["when"] == T0.isoformat()
    steps = table.column("step").to_pylist()
    assert steps[0] is None and steps[1] == "step0"
    names = [n for n in table.column("task_name").to_pylist() if n]
    assert names[:3] == ["search", "search", "fetch"]  # started, completed, started


def test_file_names_are_deterministic() -> None:
    segs = [Segment("a", 1, 10), Segment("b", 1, 5)]
    assert file_key("wf", "2024-03-01", segs) == file_key("wf", "2024-03-01", list(segs))
    assert file_key("wf", "2024-03-01", segs) != file_key("wf", "2024-03-01", segs[:1])
    assert file_key("a/b=c", "2024-03-01", segs).startswith("workflow=a%2Fb%3Dc/day=2024-03-01/")


def test_corrupt_payload_row_names_run_and_seq() -> None:
    table = events_to_table(as_events("r", run_payloads(1)))
    raw = table.column("payload").to_pylist()
    raw[2] = b"\xc1"  # never valid msgpack
    import pyarrow as pa

    broken = table.set_column(table.schema.get_field_index("payload"), "payload", pa.array(raw))
    with pytest.raises(CorruptEventError, match="seq 3"):
        table_to_events(broken)


async def test_views_answer_questions(hot: SqliteEventLog, store: LocalArchiveStore) -> None:
    await record_run(hot, "ok", tag=1, steps=3)
    await record_run(hot, "bad", end="failed", tag=2, steps=2)
    await Archiver(hot, store).run(now=NOW)
    await record_run(hot, "hot", end=None, start=NOW, tag=3, steps=2)
    with await open_sql(store, hot) as db:
        assert db.hot_events > 0 and db.archived_files == 1
        runs = {
            r[0]: r[1:]
            for r in db.sql(
                "SELECT run_id, workflow, status, steps, error, duration FROM runs"
            ).fetchall()
        }
        assert runs["ok"] == ("research", "completed", 3, None, runs["ok"][4])
        # seconds as a DOUBLE, not a DuckDB interval (CSV and Parquet carry it)
        assert runs["ok"][4] == float(
            len(await read_all(ArchivedEventReader(hot, store), "ok")) - 1
        )
        assert runs["bad"][1:4] == ("failed", 2, "RuntimeError: gave up")
        assert runs["hot"][1] == "running" and runs["hot"][4] is None
        tasks = db.sql(
            "SELECT run_id, name, attempts, status, duration_ms FROM tasks "
            "WHERE run_id = 'ok' ORDER BY started"
        ).fetchall()
        assert tasks == [
            ("ok", "search", 1, "completed", 10.0),
            ("ok", "fetch", 2, "completed", 20.0),
            ("ok", "search", 1, "completed", 30.0),
        ]
        interrupts = db.sql(
            "SELECT run_id, step, asked ->> 'ask', answer ->> 'approved', waited "
            "FROM interrupts WHERE run_id = 'bad'"
        ).fetchall()
        assert interrupts == [("bad", "review", "approve?", "true", 1.0)]
        table = db.arrow("SELECT type, count(*) AS n FROM events GROUP BY type ORDER BY type")
        assert dict(zip(*table.to_pydict().values(), strict=True))["RunStarted"] == 3


async def test_failing_sql_names_duckdb_message_and_views(store: LocalArchiveStore) -> None:
    with await open_sql(store, MemoryEventLog()) as db:
        with pytest.raises(ArchiveQueryError, match="evnts") as caught:
            db.sql("SELECT * FROM evnts")
        assert "events, runs, tasks, interrupts" in str(caught.value)
        with pytest.raises(ArchiveQueryError, match="Parser Error"):
            db.sql("SELEKT 1")
        assert db.sql("SELECT count(*) FROM events").fetchone() == (0,)


async def test_corrupt_parquet_is_a_typed_error(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    events = await record_run(hot, "a", tag=1)
    await record_run(hot, "later", tag=2, end=None, start=NOW)
    await Archiver(hot, store).run(now=NOW)
    [key] = [k for k in store.list() if k.endswith(".parquet") and ".tasks." not in k]
    (store.root / key).write_bytes(b"PAR1 this is not a parquet file")
    with pytest.raises(ArchiveCorruptError, match="corrupt"):
        await read_all(ArchivedEventReader(hot, store), "a")
    with pytest.raises(ArchiveCorruptError, match=key.rsplit("/", 1)[-1]):
        await open_sql(store, hot)
    # The next pass must not be fooled into pruning anything it did not confirm.
    summary = await Archiver(hot, store).run(now=NOW)
    assert summary.pruned == 0
    assert await read_all(hot, "later") == [e async for e in hot.read("later")]
    assert len(events) == 19


async def test_corrupt_manifest_is_a_typed_error(store: LocalArchiveStore) -> None:
    store.put("_manifest/x.json", b"{not json")
    with pytest.raises(ArchiveCorruptError, match="manifest"):
        Manifest.load(store)


async def test_history_is_read_only(hot: SqliteEventLog, store: LocalArchiveStore) -> None:
    """The archive's history is the read side of the seam alone: no write method to stub."""
    history = ArchivedEventReader(hot, store)
    events = await record_run(hot, "a")
    assert isinstance(history, EventReader) and not isinstance(history, EventLog)
    for write in ("append", "claim_writer", "renew_lease", "release_lease", "save_snapshot"):
        assert not hasattr(history, write), write
    assert not hasattr(history, "prune")
    assert await read_all(history, "a") == events  # hot-only runs read through too
    await history.close()


def test_bad_urls_and_policies() -> None:
    for url in ("ftp://x", "s3:///nobucket", "file://", "s3://b/p?colour=red"):
        with pytest.raises(ArchiveConfigError, match="bad archive URL"):
            open_archive(url)
    assert open_archive("file://.agentlog/archive").location("k").endswith(".agentlog/archive/k")
    assert parse_duration("2w") == timedelta(weeks=2)
    with pytest.raises(ArchiveConfigError, match="bad duration"):
        parse_duration("forever")
    with pytest.raises(ArchiveConfigError, match="needs a positive ttl"):
        parse_policy("wf=ttl")
    with pytest.raises(ArchiveConfigError, match="bad retention mode"):
        parse_policy("wf=forever")
    assert parse_policy("*=ttl:30d")[1].ttl == timedelta(days=30)


def test_manifest_entry_round_trip() -> None:
    entry = ManifestEntry(
        "f.parquet",
        3,
        100,
        "wf",
        "2024-03-01",
        NOW.isoformat(),
        (Segment("a", 1, 3, "wf", "1", "completed", 1),),
    )
    assert ManifestEntry.from_json(entry.to_json(), "x") == entry
    manifest = Manifest([entry])
    assert manifest.archived_upto("a") == 3 and manifest.files_of("a") == ["f.parquet"]
    manifest.remove("f.parquet")
    assert manifest.archived_upto("a") == 0


def test_parquet_has_row_group_statistics(tmp_path: object) -> None:
    table = events_to_table(as_events("r", run_payloads(2)))
    from agentlog.archive._parquet import encode_parquet

    raw = encode_parquet(table, row_group_size=4)
    import pyarrow as pa

    meta = pq.ParquetFile(pa.BufferReader(raw)).metadata
    assert meta.num_row_groups == (table.num_rows + 3) // 4
    stats = meta.row_group(0).column(0).statistics
    assert stats.has_min_max and stats.min == "r"
