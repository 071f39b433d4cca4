"""The committed schema-v1 log must keep replaying to the committed state.

Never regenerated here: ``v1_run.jsonl`` holds the encoded bytes of three
runs written with schema_v 1 and ``v1_expected.json`` the state each folds
to. A codec, upcaster or fold change that alters how an old log replays
fails this test.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from agentlog.eventlog.codec import decode_event
from agentlog.eventlog.events import EVENT_TYPES, Event
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.projector import diff_states, fold, load_state

HERE = Path(__file__).parent


def committed_events() -> dict[str, list[Event]]:
    runs: dict[str, list[Event]] = {}
    for line in (HERE / "v1_run.jsonl").read_text().splitlines():
        event = decode_event(base64.b64decode(json.loads(line)["event"]))
        runs.setdefault(event.run_id, []).append(event)
    return runs


def committed_state() -> dict[str, Any]:
    return json.loads((HERE / "v1_expected.json").read_text())  # type: ignore[no-any-return]


def as_json(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True))


def test_the_fixture_covers_every_event_type_at_schema_v1() -> None:
    events = [e for run in committed_events().values() for e in run]
    assert {e.type for e in events} == set(EVENT_TYPES)
    assert {e.schema_v for e in events} == {1}


def test_golden_log_replays_to_the_committed_state() -> None:
    expected = committed_state()
    runs = committed_events()
    assert sorted(runs) == sorted(expected)
    for run_id, events in runs.items():
        state = fold(events)
        assert as_json(state.to_dict()) == expected[run_id], run_id
        assert diff_states(state, fold(events)) == []
    main = expected["golden-main"]
    assert main["status"] == "completed" and main["version"] == "2"
    assert main["values"]["sent"] == "msg-0001" and main["values"]["reviewer"] == "ops"


async def test_golden_log_loads_from_a_log_with_snapshots_and_time_travel() -> None:
    expected = committed_state()
    async with MemoryEventLog() as log:
        for run_id, events in committed_events().items():
            for event in events:  # the fixture's epochs, claimed as they were written
                info = await log.find_run(run_id)
                while info is None or info.writer_epoch < event.writer_epoch:
                    await log.claim_writer(run_id)
                    info = await log.find_run(run_id)
                await log.append([event])
            state = await load_state(log, run_id)
            assert as_json(state.to_dict()) == expected[run_id]
            for seq in range(1, len(events) + 1):
                at = await load_state(log, run_id, at_seq=seq)
                assert at.to_dict() == fold(events[:seq]).to_dict()
