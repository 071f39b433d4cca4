"""``agentlog shred`` and the commands' key store (``AGENTLOG_KEYRING``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentlog.cli import app
from agentlog.crypto import LocalKeyStore
from agentlog.demo import run_demo
from agentlog.errors import ConfigError
from agentlog.runtime import Runtime
from tests.support.shred import CANARY, ONE_SHOT, canary_workflow, raw_bytes, sqlite_files

runner = CliRunner()


def _encrypted_log(tmp_path: Path) -> tuple[str, dict[str, str]]:
    """A log with run ``r1`` of the canary workflow, parked, sealed with a keyring;
    and the environment that names the keyring."""
    db, keyring = tmp_path / "log.db", tmp_path / "keyring.json"

    async def build() -> None:
        wf = canary_workflow()
        keys = LocalKeyStore(keyring)
        async with await Runtime.open(
            f"sqlite:///{db}", workflows=[wf], config=ONE_SHOT, keys=keys
        ) as rt:
            await rt.start(wf, run_id="r1", input={"secret": CANARY}, durability="sync")
            await rt.wait("r1")

    asyncio.run(build())
    return f"sqlite:///{db}", {"AGENTLOG_KEYRING": str(keyring)}


def test_read_commands_open_sealed_content_with_the_keyring(tmp_path: Path) -> None:
    url, env = _encrypted_log(tmp_path)
    state = runner.invoke(app, ["state", "r1", "--log", url, "--json"], env=env)
    assert state.exit_code == 0, state.output
    assert json.loads(state.stdout)["values"]["secret"] == f"{CANARY}-state"
    # Without the keyring: the timeline shows metadata and says the key is missing.
    show = runner.invoke(app, ["show", "r1", "--log", url], env={"AGENTLOG_KEYRING": ""})
    assert show.exit_code == 0, show.output
    assert "encrypted: no key" in show.stdout and CANARY not in show.stdout
    shown = runner.invoke(app, ["show", "r1", "--log", url, "--json"], env={"AGENTLOG_KEYRING": ""})
    rows = json.loads(shown.stdout)
    assert [r["payload"]["name"] for r in rows if r["type"] == "TaskStarted"] == ["lookup"]
    completed = next(r for r in rows if r["type"] == "TaskCompleted")
    assert completed["payload"]["result"] == completed["unreadable"] == "«encrypted: no key»"
    no_key = runner.invoke(app, ["state", "r1", "--log", url], env={"AGENTLOG_KEYRING": ""})
    assert no_key.exit_code == 2 and "AGENTLOG_KEYRING" in no_key.output


def test_shred_asks_then_shreds_and_the_read_commands_say_shredded(tmp_path: Path) -> None:
    url, env = _encrypted_log(tmp_path)
    declined = runner.invoke(app, ["shred", "r1", "--log", url], env=env, input="n\n")
    assert declined.exit_code == 1  # aborted: nothing done
    assert not LocalKeyStore(env["AGENTLOG_KEYRING"]).is_shredded("r1")

    done = runner.invoke(app, ["shred", "r1", "--log", url], env=env, input="y\n")
    assert done.exit_code == 0, done.output
    assert "shredded at" in done.stdout and "data key was destroyed" in done.stdout
    assert "cancelled first" in done.stdout

    show = runner.invoke(app, ["show", "r1", "--log", url], env=env)
    assert show.exit_code == 0, show.output
    assert "shredded" in show.stdout and CANARY not in show.stdout
    rows = json.loads(runner.invoke(app, ["show", "r1", "--log", url, "--json"], env=env).stdout)
    assert rows[-1]["type"] == "RunShredded"
    assert {r.get("unreadable") for r in rows if r["type"] == "TaskCompleted"} == {"«shredded»"}
    assert [r["payload"]["name"] for r in rows if r["type"] == "TaskStarted"] == ["lookup"]

    state = runner.invoke(app, ["state", "r1", "--log", url], env=env)
    assert state.exit_code == 2 and "was shredded" in state.output
    resume = runner.invoke(app, ["resume", "r1", "--value", '"yes"', "--log", url], env=env)
    assert resume.exit_code == 2 and "was shredded" in resume.output
    listed = json.loads(runner.invoke(app, ["runs", "--log", url, "--json"], env=env).stdout)
    assert [(r["run_id"], r["status"]) for r in listed] == [("r1", "shredded")]
    only = runner.invoke(app, ["runs", "--status", "shredded", "--log", url, "--json"], env=env)
    assert [r["run_id"] for r in json.loads(only.stdout)] == ["r1"]

    again = runner.invoke(app, ["shred", "r1", "--yes", "--log", url, "--json"], env=env)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["already"] is True
    assert CANARY.encode() not in raw_bytes(*sqlite_files(Path(url[len("sqlite:///") :])))


def test_shred_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    url, env = _encrypted_log(tmp_path)
    no_keys = runner.invoke(
        app, ["shred", "r1", "--yes", "--log", url], env={"AGENTLOG_KEYRING": ""}
    )
    assert no_keys.exit_code == 2 and "Set AGENTLOG_KEYRING=PATH" in no_keys.output
    unknown = runner.invoke(app, ["shred", "nobody", "--yes", "--log", url], env=env)
    assert unknown.exit_code == 2 and "nobody" in unknown.output
    plain_db = tmp_path / "plain.db"

    async def plain() -> None:
        wf = canary_workflow()
        async with await Runtime.open(
            f"sqlite:///{plain_db}", workflows=[wf], config=ONE_SHOT
        ) as rt:
            await rt.start(wf, run_id="p1", input={}, durability="sync")
            await rt.wait("p1")

    asyncio.run(plain())
    cleartext = runner.invoke(app, ["shred", "p1", "--log", f"sqlite:///{plain_db}"], env=env)
    assert cleartext.exit_code == 2 and "stored in clear" in cleartext.output
    assert "Shred run" not in cleartext.output  # refused before asking


async def test_the_demo_never_prints_a_urls_password() -> None:
    from rich.console import Console

    console = Console(record=True)
    with pytest.raises(ConfigError) as caught:
        await run_demo("memory://alice:s3cret@somewhere/x", "d1", console)
    assert "s3cret" not in str(caught.value) and "alice:***@" in str(caught.value)
