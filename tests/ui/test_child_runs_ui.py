"""The UI's run page names a child run's parent (``/api/runs/<run>/info``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from starlette.testclient import TestClient

from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime
from agentlog.ui import create_app
from tests.cli.test_runs_children import child, parent
from tests.support.runtime import config


def test_the_run_info_of_a_child_names_its_parent(tmp_path: Path) -> None:
    db = tmp_path / "log.db"

    async def run_family() -> None:
        async with (
            SqliteEventLog(db) as log,
            Runtime(log, workflows=[parent, child], config=config()) as rt,
        ):
            await rt.start(parent, run_id="p")
            async with asyncio.timeout(30):  # bounded: a hang fails here
                while not (await rt.get_state("p")).is_terminal:  # noqa: ASYNC110 - polls the log
                    await asyncio.sleep(0.05)

    asyncio.run(run_family())
    app = create_app(f"sqlite:///{db}", f"file://{tmp_path / 'archive'}", workflows=[parent, child])
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        kid = client.get("/api/runs/p~sfan~s0:0:0")
        assert kid.status_code == 200, kid.text
        assert kid.json()["parent"] == "p"
        assert client.get("/api/runs/p").json()["parent"] is None
    page = (Path(__file__).parents[2] / "src/agentlog/ui/static/run.js").read_text()
    assert "renderParent(data.parent)" in page  # the run page shows it
