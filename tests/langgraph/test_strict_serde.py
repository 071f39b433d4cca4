"""CVE-2026-28277: stored bytes that name a class are refused, never imported.

A forged checkpoint stores LangGraph's msgpack "constructor" extension naming
a module and a class (or ``os.system``). LangGraph's permissive serializer
imports the module and calls it on load. The saver's StrictSerializer must
refuse with a typed error before anything is imported: a sentinel module
records its own import.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import ormsgpack
import pytest

from agentlog.errors import ForbiddenTypeError
from agentlog.eventlog import Event
from agentlog.eventlog.events import CheckpointSaved, WritesSaved
from agentlog.langgraph import StrictSerializer
from agentlog.langgraph._convert import build_tuple
from agentlog.langgraph._thread import ThreadModel

REPO = Path(__file__).resolve().parents[2]


def forged(module: str, name: str, argument: object, code: int = 0) -> bytes:
    """LangGraph's msgpack bytes for ``module.name(argument)`` (extension ``code``)."""
    inner = ormsgpack.packb((module, name, argument))
    return ormsgpack.packb({"messages": [ormsgpack.Ext(code, inner)]})


@pytest.mark.parametrize(
    ("module", "name", "code"),
    [
        ("os", "system", 0),
        ("tests.langgraph.sentinel_payload", "Gadget", 0),
        ("tests.langgraph.sentinel_payload", "Gadget", 1),
        ("tests.langgraph.sentinel_payload", "Gadget", 2),
        ("tests.langgraph.sentinel_payload", "Gadget", 5),
    ],
)
def test_a_blob_naming_a_class_is_refused_and_never_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, name: str, code: int
) -> None:
    sentinel = tmp_path / "sentinel"
    monkeypatch.setenv("AGENTLOG_SENTINEL_FILE", str(sentinel))
    argument: object = {"command": "touch pwned"} if code == 2 else "touch pwned"
    with pytest.raises(ForbiddenTypeError, match=f"class {module}.{name}.*nothing was imported"):
        StrictSerializer().loads_typed(("msgpack", forged(module, name, argument, code)))
    assert not sentinel.exists()
    assert "tests.langgraph.sentinel_payload" not in sys.modules


def test_a_refusal_names_where_the_bytes_were_read() -> None:
    """A refused channel value or pending write names the thread, the checkpoint
    or version, and the channel (written only when a refusal is raised)."""
    model = ThreadModel("t1")
    bad = forged("tests.langgraph.sentinel_payload", "Gadget", "touch pwned")
    saved = CheckpointSaved(
        "",
        "c1",
        None,
        {"channel_versions": {"messages": "1"}},
        {},
        [["messages", "1", "msgpack", bad, None]],
    )
    model.apply(Event("t1", 1, saved))
    serde = StrictSerializer()
    with pytest.raises(ForbiddenTypeError, match="in thread 't1' channel 'messages' version '1'"):
        build_tuple(serde, model, {}, saved)
    model.blobs.clear()  # the channel empty: now only the write is read
    model.apply(Event("t1", 2, WritesSaved("", "c1", "task", "", [["out", 0, "msgpack", bad]])))
    with pytest.raises(ForbiddenTypeError, match="in thread 't1' checkpoint 'c1' write to 'out'"):
        build_tuple(serde, model, {}, saved)


@pytest.mark.process
def test_a_forged_checkpoint_in_the_log_is_refused_through_the_saver(tmp_path: Path) -> None:
    """End to end, in a fresh process: a saved checkpoint's blob is overwritten with a
    forged one in the SQLite file; reading the thread raises ForbiddenTypeError
    and the sentinel module is never imported."""
    script = textwrap.dedent(
        f"""
        import os, sqlite3, sys
        import ormsgpack
        from langgraph.checkpoint.base import empty_checkpoint
        from agentlog.errors import ForbiddenTypeError
        from agentlog.eventlog.codec import pack, unpack, row_checksum
        from agentlog.langgraph import AgentlogSaver

        url = "sqlite:///{tmp_path}/log.db"
        cfg = {{"configurable": {{"thread_id": "t1", "checkpoint_ns": ""}}}}
        with AgentlogSaver.from_url(url) as saver:
            cp = empty_checkpoint()
            cp["channel_values"] = {{"messages": ["hello"]}}
            cp["channel_versions"] = {{"messages": "1"}}
            saver.put(cfg, cp, {{"source": "loop", "step": 0}}, {{"messages": "1"}})
        inner = ormsgpack.packb(("tests.langgraph.sentinel_payload", "Gadget", "rm -rf /"))
        evil = ormsgpack.packb([ormsgpack.Ext(0, inner)])
        db = sqlite3.connect("{tmp_path}/log.db")
        (seq, kind, ts, schema_v, epoch, payload) = db.execute(
            "SELECT seq, type, ts, schema_v, writer_epoch, payload FROM events "
            "WHERE run_id = 't1' AND type = 'CheckpointSaved'").fetchone()
        fields = unpack(payload)
        fields["values"][0][3] = evil  # the attacker rewrites the stored bytes
        payload = pack(fields)
        db.execute("UPDATE events SET payload = ?, checksum = ? WHERE run_id = 't1' AND seq = ?",
                   (payload, row_checksum("t1", seq, kind, ts, schema_v, epoch, payload), seq))
        db.commit()
        with AgentlogSaver.from_url(url) as saver:
            try:
                saver.get_tuple(cfg)
            except ForbiddenTypeError as exc:
                print("refused:", exc)
        print("imported" if "tests.langgraph.sentinel_payload" in sys.modules else "not imported")
        """
    )
    sentinel = tmp_path / "sentinel"
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": f"{REPO / 'src'}:{REPO}", "AGENTLOG_SENTINEL_FILE": str(sentinel)},
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout and "sentinel_payload.Gadget" in done.stdout, done.stdout
    assert "thread 't1'" in done.stdout
    assert done.stdout.strip().endswith("not imported")
    assert not sentinel.exists()


@dataclass
class Point:
    """A user type: refused until it is allowed (importable, at module level)."""

    x: int


def test_allowed_types_round_trip_and_the_allow_list_can_grow() -> None:
    serde = StrictSerializer()
    value = {"when": datetime(2026, 1, 2, tzinfo=UTC), "tags": {"a"}, "n": [1, 2.5, None]}
    assert serde.loads_typed(serde.dumps_typed(value)) == value

    with pytest.raises(ForbiddenTypeError, match="Point"):
        serde.dumps_typed(Point(1))
    grown = serde.with_msgpack_allowlist([Point])
    assert grown.loads_typed(grown.dumps_typed(Point(1))) == Point(1)


def test_pickle_and_json_encodings_are_refused() -> None:
    with pytest.raises(ForbiddenTypeError, match="'pickle'"):
        StrictSerializer().loads_typed(("pickle", b"\x80\x04N."))
