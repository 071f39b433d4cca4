"""``agentlog ui`` binds before it prints its URL (issue 21 item 5)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from typer.testing import CliRunner

from agentlog.cli import app

#: How long the server may take to answer on the loaded CI machine (polled, not slept).
START_SECONDS = 120


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port on 127.0.0.1 that another server listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


def test_a_taken_port_is_one_line_naming_it_and_exit_2(log_url: str, taken_port: int) -> None:
    result = CliRunner().invoke(
        app, ["ui", "--log", log_url, "--no-browser", "--port", str(taken_port)]
    )
    assert result.exit_code == 2, result.output
    assert "http://" not in result.stdout  # no URL of a server that never started
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: cannot listen on ")
    assert f"127.0.0.1:{taken_port}" in lines[0] and "already in use" in lines[0]
    assert "--port 0" in lines[0]


@pytest.mark.process
def test_port_0_prints_the_port_it_listens_on(log_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "agentlog", "ui", "--log", log_url]
    command += ["--no-browser", "--port", "0", "--json"]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as proc:
        try:
            assert proc.stdout is not None
            url = json.loads(proc.stdout.readline())["url"]
            port = int(url.rsplit(":", 1)[1].strip("/"))
            assert port != 0
            _until_answers(proc, f"{url}api/runs")
        finally:
            proc.terminate()
            proc.communicate(timeout=60)


def _until_answers(proc: subprocess.Popen[str], url: str) -> None:
    """Poll ``url`` until it answers 200, failing if the server died or never answered."""
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            httpx.get(url, timeout=5).raise_for_status()
            return
        except httpx.HTTPError as exc:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                died = proc.communicate()
                raise AssertionError(f"{url} never answered ({exc}): {died}") from None
            time.sleep(0.05)
