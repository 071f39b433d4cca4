"""The package installs as users install it, and runs outside the repository.

``python -m build`` makes the sdist and, from the sdist, the wheel. Each is
installed with pip into a fresh virtualenv in a temporary folder (no
PYTHONPATH, no editable install, no checkout on the path) and runs
``agentlog demo`` there; the wheel's ``agentlog ui`` serves the web
debugger's static files, which only exist if the wheel ships them. The
dependencies are downloaded once into a local folder (pip reaches PyPI; its
cache makes later runs quick) and both installs read only that folder.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import agentlog

pytestmark = [pytest.mark.package, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
STATIC = REPO / "src" / "agentlog" / "ui" / "static"


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (
        f"{' '.join(cmd)} exited {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    )
    return done.stdout


def _user_env() -> dict[str, str]:
    """The environment of a user's shell: nothing points into this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOG_")}
    for name in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"):
        env.pop(name, None)
    return env


def _fresh_venv(where: Path, wheelhouse: Path, artifact: Path) -> Path:
    """A new virtualenv with ``artifact`` installed from ``wheelhouse`` alone."""
    _run([sys.executable, "-m", "venv", str(where)], cwd=where.parent, env=_user_env())
    pip = [str(where / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    _run(
        [*pip, "--no-index", "--find-links", str(wheelhouse), str(artifact)],
        cwd=where.parent,
        env=_user_env(),
    )
    return where / "bin"


def _demo(bin_dir: Path, workdir: Path) -> None:
    workdir.mkdir()
    env = _user_env()
    shown = _run([str(bin_dir / "agentlog"), "--version"], cwd=workdir, env=env)
    assert shown.strip() == f"agentlog {agentlog.__version__}"
    where = _run(
        [str(bin_dir / "python"), "-c", "import agentlog; print(agentlog.__file__)"],
        cwd=workdir,
        env=env,
    )
    assert Path(where.strip()).is_relative_to(bin_dir.parent), f"imported from {where}"
    out = _run([str(bin_dir / "agentlog"), "demo"], cwd=workdir, env=env)
    assert re.search(r"completed after \d+ steps", out), out
    assert (workdir / ".agentlog" / "agentlog.db").exists()


def _ui_url(proc: subprocess.Popen[str], deadline: float) -> str:
    """The URL ``agentlog ui --json`` prints on its first stdout line."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if sel.select(timeout=1.0):
                line = proc.stdout.readline()
                assert line, f"agentlog ui exited {proc.poll()} before printing its URL"
                url = json.loads(line)["url"]
                assert isinstance(url, str)
                return url
    raise AssertionError("agentlog ui printed no URL within 120 s")


def _get(url: str, deadline: float) -> bytes:
    """GET ``url``, retrying while the server is not listening yet."""
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy to loopback
    while True:
        try:
            with direct.open(url, timeout=30) as response:
                assert response.status == 200, (url, response.status)
                body: bytes = response.read()
                return body
        except urllib.error.URLError as exc:
            if not isinstance(exc.reason, ConnectionError):
                raise
            if time.monotonic() > deadline:
                raise AssertionError(f"{url}: the server never answered") from None
            time.sleep(0.2)


def _ui_serves_its_static_files(bin_dir: Path, workdir: Path) -> None:
    cmd = [str(bin_dir / "agentlog"), "ui", "--port", "0", "--no-browser", "--json"]
    proc = subprocess.Popen(
        cmd, cwd=workdir, env=_user_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        url = _ui_url(proc, deadline)
        page = _get(url, deadline).decode()
        assets = sorted(set(re.findall(r"/static/([\w.-]+)", page)))
        assert assets, f"the runs page names no static file:\n{page}"
        for name in assets:
            served = _get(f"{url.rstrip('/')}/static/{name}", deadline)
            assert served == (STATIC / name).read_bytes(), f"static/{name} differs"
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


def test_wheel_and_sdist_install_in_fresh_virtualenvs_and_run(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(REPO)], cwd=tmp_path)
    version = agentlog.__version__
    wheel = dist / f"agentlog-{version}-py3-none-any.whl"
    sdist = dist / f"agentlog-{version}.tar.gz"
    assert wheel.exists() and sdist.exists(), sorted(p.name for p in dist.iterdir())

    wheelhouse = tmp_path / "wheelhouse"
    download = [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(wheelhouse)]
    _run([*download, str(wheel), "hatchling>=1.24"], cwd=tmp_path)

    from_wheel = _fresh_venv(tmp_path / "venv-wheel", wheelhouse, wheel)
    _demo(from_wheel, tmp_path / "run-wheel")
    _ui_serves_its_static_files(from_wheel, tmp_path / "run-wheel")

    from_sdist = _fresh_venv(tmp_path / "venv-sdist", wheelhouse, sdist)
    _demo(from_sdist, tmp_path / "run-sdist")
