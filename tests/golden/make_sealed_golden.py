"""Write the golden *sealed* log: ``python -m tests.golden.make_sealed_golden``.

Run it ONLY to add a fixture for a new sealed envelope version, with the
agentlog that writes that version (then commit the new files next to the old
ones). ``test_sealed_golden.py`` never regenerates: it opens the committed
bytes with the committed keyring and compares with the committed state, so a
change that stops old encrypted data from reading fails the test.

``sealed_v1_*`` was written by the agentlog of envelope version 1 (its
associated data binds run, seq, kind and type, not the clear metadata; its
keyring entries record no ``from`` seq): the run ``sealed-main`` of the
golden workflow (tasks, a failing branch, an interrupt, a migration, resume,
completion) through a keyed SQLite log, each event as its Kafka envelope,
and one snapshot blob sealed at the run's last seq.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.eventlog._sealing import seal_blob
from agentlog.eventlog.codec import encode_event, pack
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.projector import fold
from agentlog.runtime import Runtime, RuntimeConfig
from tests.golden.make_golden import build

HERE = Path(__file__).parent
RUN = "sealed-main"


async def generate(folder: Path) -> tuple[list[bytes], bytes, dict[str, Any]]:
    cipher = PayloadCipher(LocalKeyStore(folder / "keyring.json"))
    log = SqliteEventLog(str(folder / "log.db"), cipher=cipher)
    config = RuntimeConfig(owner="golden-host:1", lease_seconds=60)
    async with Runtime(log, workflows=[build("1")], config=config) as rt:
        await rt.start("golden", run_id=RUN, input={"topic": "sealed at rest"}, durability="sync")
        await rt.wait(RUN)
    v2 = build("2")
    v2.migration("1")(lambda values: {**values, "reviewer": "ops"})
    async with Runtime(log, workflows=[v2], config=config) as rt:
        await rt.resume(RUN, {"approved": True})
        await rt.wait(RUN)
    events = [e async for e in log.read(RUN)]
    await log.close()
    assert all(e.unreadable is None for e in events)
    state = fold(events)
    snapshot = seal_blob(cipher, RUN, state.seq, "snapshot", pack(state.values))
    expected = json.loads(json.dumps(state.to_dict(), sort_keys=True))
    return [encode_event(e) for e in events], snapshot, expected


def main() -> None:
    folder = Path(tempfile.mkdtemp())
    try:
        raw, snapshot, expected = asyncio.run(generate(folder))
        (HERE / "sealed_v1_keyring.json").write_bytes((folder / "keyring.json").read_bytes())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    lines = [json.dumps({"event": base64.b64encode(r).decode("ascii")}) for r in raw]
    (HERE / "sealed_v1_run.jsonl").write_text("\n".join(lines) + "\n")
    (HERE / "sealed_v1_expected.json").write_text(
        json.dumps(
            {"state": expected, "snapshot": base64.b64encode(snapshot).decode("ascii")},
            indent=1,
            sort_keys=True,
        )
        + "\n"
    )
    print(f"wrote {len(raw)} events of {RUN}", file=sys.stderr)


if __name__ == "__main__":
    main()
