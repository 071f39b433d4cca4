"""The UI's run page links to the run's OpenTelemetry trace when a trace
viewer URL is configured (``agentlog ui --trace-url`` / ``AGENTLOG_TRACE_URL``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from agentlog.cli import app
from agentlog.errors import ConfigError
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end
from agentlog.ui import create_app
from tests.support.otel import Exported

JAEGER = "http://jaeger:16686/trace/{trace_id}"

wf = Workflow("traced", state={"x": "replace"})


@wf.step
async def only(ctx: StepContext) -> Any:
    return end(x=1)


async def _run(url: str, run_id: str, exported: Exported | None) -> None:
    telemetry = exported.telemetry if exported is not None else "off"
    config = RuntimeConfig(worker=False, telemetry=telemetry)
    async with await Runtime.open(url, workflows=[wf], config=config) as rt:
        await rt.start(wf, run_id=run_id)
        async with asyncio.timeout(30):
            await rt.wait(run_id)


def test_a_traced_run_links_to_its_trace(tmp_path: Path) -> None:
    url, archive = f"sqlite:///{tmp_path / 'log.db'}", f"file://{tmp_path / 'archive'}"
    exported = Exported.create()
    try:
        asyncio.run(_run(url, "traced-run", exported))
        asyncio.run(_run(url, "plain-run", None))
        (start,) = exported.named("agentlog.start")
    finally:
        exported.shutdown()
    assert start.context is not None
    trace_id = format(start.context.trace_id, "032x")
    with TestClient(create_app(url, archive, trace_url=JAEGER), base_url="http://127.0.0.1") as c:
        traced = c.get("/api/runs/traced-run")
        assert traced.status_code == 200, traced.text
        assert traced.json()["trace_url"] == f"http://jaeger:16686/trace/{trace_id}"
        assert c.get("/api/runs/plain-run").json()["trace_url"] is None  # no trace stored
        assert "id=trace class=info hidden" in c.get("/runs/traced-run").text
    with TestClient(create_app(url, archive), base_url="http://127.0.0.1") as c:
        assert c.get("/api/runs/traced-run").json()["trace_url"] is None  # no viewer
    page = (Path(__file__).parents[2] / "src/agentlog/ui/static/run.js").read_text()
    assert "renderTrace(data.trace_url)" in page  # the run page shows it


@pytest.mark.parametrize("bad", ["http://jaeger/trace/", "javascript:alert(1)//{trace_id}"])
def test_a_trace_url_without_a_trace_id_or_not_http_is_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ConfigError, match="trace_id"):
        create_app(f"sqlite:///{tmp_path / 'log.db'}", f"file://{tmp_path}", trace_url=bad)


def test_agentlog_ui_refuses_a_bad_trace_url_in_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'log.db'}"
    asyncio.run(_run(url, "plain-run", None))  # the UI opens an existing log only
    env = {"AGENTLOG_TRACE_URL": "http://jaeger/trace/"}
    result = CliRunner().invoke(app, ["ui", "--log", url, "--no-browser", "--port", "0"], env=env)
    assert result.exit_code == 2, result.output
    assert "{trace_id}" in result.output and "Traceback" not in result.output
    assert "--trace-url" in CliRunner().invoke(app, ["ui", "--help"]).output
