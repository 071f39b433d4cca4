"""The UI's run page names a child run's parent (``/api/runs/<run>/info``)."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from agentlog.ui import create_app
from tests.support.children import child, parent, run_family


def test_the_run_info_of_a_child_names_its_parent(tmp_path: Path) -> None:
    db = tmp_path / "log.db"

    run_family(db)
    app = create_app(f"sqlite:///{db}", f"file://{tmp_path / 'archive'}", workflows=[parent, child])
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        kid = client.get("/api/runs/p~sfan~s0:0:0")
        assert kid.status_code == 200, kid.text
        assert kid.json()["parent"] == "p"
        assert client.get("/api/runs/p").json()["parent"] is None
    page = (Path(__file__).parents[2] / "src/agentlog/ui/static/run.js").read_text()
    assert "renderParent(data.parent)" in page  # the run page shows it
