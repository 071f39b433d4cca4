"""The canary on the real broker's disk: sealed in the topics' log segments, then shredded.

Kafka appends to its segment files through the page cache at once, so the
files read here hold every record the broker acknowledged.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentlog.crypto import LocalKeyStore
from agentlog.errors import ShreddedError
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import RunStatus
from agentlog.projector import load_state
from agentlog.runtime import Runtime, RuntimeConfig
from tests.support.shred import CANARY, ONE_SHOT, canary_workflow, metadata, shred_record

pytestmark = pytest.mark.kafka


def _segments(data_dir: Path, name: str) -> bytes:
    """The bytes of every log segment of the topics named ``<name>.*``."""
    files = sorted(data_dir.glob(f"{name}.*-*/*.log"))
    assert files, f"no segment files of {name}.* in {data_dir}"
    return b"".join(f.read_bytes() for f in files)


async def _parked_run(url: str, keys: LocalKeyStore | None) -> None:
    wf = canary_workflow()
    async with await Runtime.open(url, workflows=[wf], config=ONE_SHOT, keys=keys) as rt:
        await rt.start(wf, run_id="r1", input={"secret": f"{CANARY}-input"}, durability="sync")
        assert (await rt.wait("r1")).status == RunStatus.WAITING


async def test_the_canary_is_sealed_on_the_brokers_disk_and_shredding_ends_it(
    kafka_bootstrap: str, kafka_name: str, kafka_data_dir: Path, tmp_path: Path
) -> None:
    # The same run in clear, in topics of its own: the check can see a canary.
    await _parked_run(f"kafka://{kafka_bootstrap}/{kafka_name}p", None)
    assert CANARY.encode() in _segments(kafka_data_dir, f"{kafka_name}p")

    url, keys = f"kafka://{kafka_bootstrap}/{kafka_name}", LocalKeyStore(tmp_path / "k.json")
    await _parked_run(url, keys)
    assert CANARY.encode() not in _segments(kafka_data_dir, kafka_name)

    async with await Runtime.open(url, config=ONE_SHOT, keys=keys) as rt:
        state = await rt.get_state("r1")
        assert state.values["found"] == f"{CANARY}-task-result"
        assert state.input == {"secret": f"{CANARY}-input"}
        assert await rt.log.load_snapshot("r1") is not None  # saved on park, sealed
        before = await metadata(rt.log, "r1")
        report = await rt.shred("r1")
        assert report.cancelled and report.recorded_seq is not None

    async with await open_log(url, keys=LocalKeyStore(tmp_path / "k.json")) as log:
        with pytest.raises(ShreddedError):
            await load_state(log, "r1")
        with pytest.raises(ShreddedError):
            await load_state(log, "r1", use_snapshots=False)
        with pytest.raises(ShreddedError):
            await log.load_snapshot("r1")
        info = await log.get_run("r1")
        assert info.status == RunStatus.SHREDDED and info.workflow == "canary"
        assert [i.run_id for i in await log.list_runs()] == ["r1"]
        after = await metadata(log, "r1")
        assert after[: len(before)] == before and after[-1][1] == "RunShredded"
        assert len(await shred_record(log, "r1")) == 1
    assert CANARY.encode() not in _segments(kafka_data_dir, kafka_name)


async def test_a_worker_fleets_run_is_sealed_in_every_topic_and_its_shred_recorded(
    kafka_bootstrap: str, kafka_name: str, kafka_data_dir: Path, tmp_path: Path
) -> None:
    """Partitioned layout: the client's start and answer go as commands, the
    worker owns the run; the shred's RunShredded is recorded by the owner."""
    base = f"kafka://{kafka_bootstrap}/{kafka_name}"
    client_url = f"{base}?layout=partitioned&partitions=2"
    worker_url = f"{base}?group=shredders&partitions=2&session_timeout=6"
    keyring = tmp_path / "k.json"
    wf = canary_workflow()
    worker_config = RuntimeConfig(worker=True, poll_seconds=0.05)
    async with (
        await Runtime.open(
            worker_url, workflows=[wf], config=worker_config, keys=LocalKeyStore(keyring)
        ) as _worker,
        await Runtime.open(
            client_url, workflows=[wf], config=ONE_SHOT, keys=LocalKeyStore(keyring)
        ) as client,
    ):
        await client.start(wf, run_id="f1", input={"secret": f"{CANARY}-input"})
        assert (await client.wait("f1", timeout=120)).status == RunStatus.WAITING
        report = await client.shred("f1")
        assert report.cancelled
        async with asyncio.timeout(120):  # the owner records it from the command
            while not await shred_record(client.log, "f1"):  # noqa: ASYNC110 - reads the log
                await asyncio.sleep(0.1)
        assert (await client.log.get_run("f1")).status == RunStatus.SHREDDED
        with pytest.raises(ShreddedError):
            await client.get_state("f1")
    topics = _segments(kafka_data_dir, kafka_name)  # events, runs and commands topics
    assert CANARY.encode() not in topics
