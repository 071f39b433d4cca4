"""Worker benchmarks on Kafka: a fleet of worker processes in one consumer group.

The Kafka side of ``bench_workers`` (same workflows, ``benchmarks/fleet_app.py``;
same process handling, ``benchmarks/fleet.py``), against a real Apache Kafka 4.0
broker: ``KAFKA_BOOTSTRAP_SERVERS`` when set, else one started from the Maven
jars with ``scripts/kafka_broker.py`` and stopped at the end (as ``bench_kafka``).

Every worker is a real process on ``kafka://HOST/NAME?group=G&partitions=12``:
a member of consumer group ``G``, owning the runs of the partitions the group
assigns it, with one transactional producer per owned partition. The
benchmark process is a client (``?layout=partitioned``): ``submit`` sends a
command that the owning worker applies; it reads the figures back from the log.
Each case uses fresh topics and a fresh group. Before submitting, a case waits
until the group is Stable with every worker in it (the broker's own view,
``DescribeGroups``), so that no run is started by a worker that is about to
lose its partition to a worker still joining.

1. **Scale-out** of I/O-bound agents: N runs of 5 steps, each step one task
   awaiting 100 ms, through 1, 2 and 4 workers (concurrency 50 each), 12
   partitions. runs/s = N / (last RunCompleted ``ts`` - first RunStarted
   ``ts``); the workers are in the group before the first command is sent, so
   the clock starts when the work does. ``submit_s`` is how long the client
   took to send the N commands (it overlaps the work). ``takeovers`` counts
   WriterClaimed events: runs that moved between workers (0 when the group
   stays put). ``vs_linear`` = runs/s with k workers / (k * runs/s with 1).
2. **Failover**: 3 workers (session timeout 10 s) hold 100 runs that loop on
   100 ms steps; the one holding the most (``RunInfo.lease_owner``) is
   SIGKILLed. Each worker's concurrency is the run count, so that a survivor
   never leaves a taken-over run waiting for a slot (on Kafka the partitions,
   not the concurrency, spread the runs). Per victim run, takeover = ``ts`` of
   its first event at a newer writer epoch (the new owner's WriterClaimed,
   appended by another worker) minus the kill; ``stepped`` = the same for the
   first step event after that claim. Target: max <= session timeout + 5 s.
3. **10,000 runs in flight** on one worker (12 partitions, all its own): the
   runs loop on 100 ms steps forever, and the worker's concurrency is the run
   count, so every run is driven at once (none parked: a parked run costs
   nothing, which would flatter the figure). Once every run has stepped (or
   a bound on that ramp has passed: ``in_flight_at_window`` says how many
   had), the log's events are counted over a window: events/s = (sum of ``last_seq``
   at the end - at the start) / the window. The worker is
   ``benchmarks/probe_worker.py`` (``agentlog worker`` plus a stats file): it
   reports its group log's ``transactional_producers`` and
   ``owned_partitions``; peak RSS is the worker's ``VmHWM`` and the broker
   connections are its established TCP sockets to the broker's port
   (``/proc/PID/fd`` and ``/proc/PID/net/tcp``), the highest seen while the
   runs ramp up and run. Target: producers and connections bounded by the
   owned partitions, not by the run count.

Every worker is stopped (SIGTERM, then SIGKILL after a bound) before its case
returns, and the broker this module started is stopped at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import GroupCoordinatorNotAvailableError

from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunCompleted, RunStarted, RunStatus, WriterClaimed, utcnow
from benchmarks import fleet_app, harness, probe_worker
from benchmarks.fleet import (
    CONCURRENCY,
    Fleet,
    fleet,
    history,
    open_client,
    submit_all,
    wait_for,
)
from benchmarks.harness import Row, percentile

AREA = "kafka-workers"
ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 12
#: Commands in flight from the client at once while submitting.
SUBMIT_PARALLEL = 64


# -- the broker, the topics, the group ------------------------------------------------------


@contextlib.contextmanager
def kafka_broker() -> Iterator[str]:
    """``KAFKA_BOOTSTRAP_SERVERS`` if set, else a broker started here and stopped after."""
    with harness.kafka_broker("agentlog-kafka-workers-") as (bootstrap, _data):
        yield bootstrap


class Topics:
    """Fresh topics and a fresh group: the client's URL and the workers'."""

    def __init__(self, bootstrap: str, case: str, *, session_timeout_s: float = 10.0) -> None:
        self.bootstrap = bootstrap
        self.name = f"bench{case}{uuid.uuid4().hex[:6]}"
        self.group = f"{self.name}-workers"
        base = f"kafka://{bootstrap}/{self.name}"
        self.client = f"{base}?layout=partitioned&partitions={PARTITIONS}"
        self.worker = (
            f"{base}?group={self.group}&partitions={PARTITIONS}"
            f"&session_timeout={session_timeout_s:g}"
        )
        self.session_timeout_s = session_timeout_s

    async def wait_stable(self, members: int, timeout_s: float = 120.0) -> float:
        """Wait until the broker says the group is Stable with ``members`` members."""
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        await admin.start()
        try:

            async def stable() -> bool:
                try:
                    responses = await admin.describe_consumer_groups([self.group])
                except GroupCoordinatorNotAvailableError:
                    return False  # a broker just started elects its coordinator first
                for response in responses:
                    for group in response.to_object()["groups"]:
                        if group["state"] == "Stable" and len(group["members"]) == members:
                            return True
                return False

            return await wait_for(stable, timeout_s, f"group {self.group} to be stable", 0.2)
        finally:
            await admin.close()


# -- /proc: what a worker process holds --------------------------------------------------------


def peak_rss_bytes(pid: int) -> int:
    """The process's peak resident set (``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) process ``pid`` has used so far (``/proc/PID/stat``)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def broker_connections(pid: int, port: int) -> int:
    """Established TCP connections of process ``pid`` to remote ``port``."""
    inodes = set()
    with contextlib.suppress(FileNotFoundError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    found = 0
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            remote, state, inode = fields[2], fields[3], fields[9]
            # state 01 = ESTABLISHED; the port is the hex after the colon
            if state == "01" and int(remote.rsplit(":", 1)[1], 16) == port and inode in inodes:
                found += 1
    return found


# -- 1. scale-out -------------------------------------------------------------------------------


async def _takeovers_and_clock(log: EventLog, run_ids: list[str]) -> tuple[int, float]:
    """WriterClaimed events (a run moved between workers), and seconds from the
    first RunStarted to the last RunCompleted."""
    takeovers = 0
    first, last = None, None
    for run_id in run_ids:
        for event in await history(log, run_id):
            if isinstance(event.data, RunStarted):
                first = min(first or event.ts, event.ts)
            elif isinstance(event.data, WriterClaimed):
                takeovers += 1
            elif isinstance(event.data, RunCompleted):
                last = max(last or event.ts, event.ts)
    assert first is not None and last is not None
    return takeovers, (last - first).total_seconds()


async def _completed(log: EventLog, runs: int) -> bool:
    return len(await log.list_runs(status=RunStatus.COMPLETED)) >= runs


async def fleet_throughput(
    bootstrap: str, workers: int, runs: int, steps: int = 5
) -> dict[str, Any]:
    """Drive ``runs`` I/O-bound runs through ``workers`` processes; runs/s and the share."""
    topics = Topics(bootstrap, f"scale{workers}")
    inputs = [(f"io-{i:05d}", {"steps": steps}) for i in range(runs)]
    folder = Path(tempfile.mkdtemp(prefix=f"kscale-{workers}-"))
    client = await open_client(topics.client)
    try:
        with fleet(topics.worker, folder) as fleet_:
            procs = fleet_.start(workers)
            fleet_.wait_ready()
            settle_s = await topics.wait_stable(workers)
            cpu_before = sum(cpu_seconds(p.pid) for p in procs)
            submit_s = await submit_all(client, fleet_app.IO, inputs, SUBMIT_PARALLEL)
            bound = 120 + runs * steps * fleet_app.MODEL_CALL_S / CONCURRENCY * 4
            await wait_for(
                lambda: _completed(client.log, runs), bound, "every run to complete", 1.0
            )
            cpu_s = sum(cpu_seconds(p.pid) for p in procs) - cpu_before
        takeovers, seconds = await _takeovers_and_clock(client.log, [r for r, _ in inputs])
    finally:
        await client.close()
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "runs_per_s": runs / seconds,
        "seconds": seconds,
        "submit_s": submit_s,
        "settle_s": settle_s,
        "takeovers": takeovers,
        "worker_cpu_s": cpu_s,
        "worker_cpu_us_per_step": cpu_s / (runs * steps) * 1e6,
    }


async def scale_out(bootstrap: str, runs: int, sizes: tuple[int, ...] = (1, 2, 4)) -> list[Row]:
    """One row per fleet size (the first size is 1 worker: the base of ``vs_linear``)."""
    rows: list[Row] = []
    base = None
    for k in sizes:
        result = await fleet_throughput(bootstrap, k, runs)
        base = base or result["runs_per_s"]
        rows.append(
            Row(
                AREA,
                f"scale-out: {runs:,} runs x 5 steps of 100 ms, {k} worker(s), "
                f"{PARTITIONS} partitions (Kafka group)",
                "runs/s",
                result["runs_per_s"],
                None,
                {
                    "vs_linear": round(result["runs_per_s"] / (k * base), 2),
                    "seconds": round(result["seconds"], 2),
                    "submit_s": round(result["submit_s"], 2),
                    "settle_s": round(result["settle_s"], 2),
                    "takeovers": result["takeovers"],
                    "worker_cpu_us_per_step": round(result["worker_cpu_us_per_step"]),
                    "worker_cpu_share": round(result["worker_cpu_s"] / result["seconds"], 2),
                    "target": "vs_linear >= 0.8",
                },
            )
        )
    return rows


# -- 2. failover -------------------------------------------------------------------------------


async def failover(
    bootstrap: str, *, runs: int = 100, workers: int = 3, session_timeout_s: float = 10.0
) -> Row:
    """SIGKILL the worker holding the most of ``runs`` looping runs; time the takeover."""
    topics = Topics(bootstrap, "failover", session_timeout_s=session_timeout_s)
    inputs = [(f"loop-{i:04d}", {"steps": 10_000_000}) for i in range(runs)]
    folder = Path(tempfile.mkdtemp(prefix="kfailover-"))
    client = await open_client(topics.client)
    log = client.log
    try:
        with fleet(topics.worker, folder, concurrency=runs) as fleet_:
            procs = {Fleet.owner(p): p for p in fleet_.start(workers)}
            fleet_.wait_ready()
            await topics.wait_stable(workers)
            await submit_all(client, fleet_app.IO, inputs, SUBMIT_PARALLEL)

            async def all_held() -> bool:
                infos = await log.list_runs(status=RunStatus.RUNNING)
                return sum(i.lease_owner in procs and i.last_seq > 3 for i in infos) >= runs

            await wait_for(all_held, 120, "every run to be held by a worker", 0.2)
            held = {i.run_id: i for i in await log.list_runs(status=RunStatus.RUNNING)}
            shares = Counter(i.lease_owner for i in held.values())
            victim, _ = shares.most_common(1)[0]
            victims = {r: i.writer_epoch for r, i in held.items() if i.lease_owner == victim}
            killed_at = utcnow()
            Fleet.kill(procs[victim])

            async def all_taken() -> bool:
                infos = {i.run_id: i for i in await log.list_runs()}
                return all(
                    infos[r].writer_epoch > epoch and infos[r].lease_owner not in ("", victim)
                    for r, epoch in victims.items()
                )

            await wait_for(all_taken, session_timeout_s + 120, "every victim run to move", 0.2)
            takeover: list[float] = []
            stepped: list[float] = []
            for run_id, epoch in victims.items():
                events = await history(log, run_id)
                moved = [e for e in events if e.writer_epoch > epoch]
                takeover.append((moved[0].ts - killed_at).total_seconds())
                after = [e for e in moved if not isinstance(e.data, WriterClaimed)]
                if after:
                    stepped.append((after[0].ts - killed_at).total_seconds())
    finally:
        await client.close()
        shutil.rmtree(folder, ignore_errors=True)
    return Row(
        AREA,
        f"failover: SIGKILL 1 of {workers} workers holding {runs} runs (Kafka group)",
        "s",
        statistics.median(takeover),
        percentile(takeover, 99),
        {
            "max_s": round(max(takeover), 2),
            "stepped_max_s": round(max(stepped), 2) if stepped else "none yet",
            "victim_runs": len(victims),
            "shares": "/".join(str(n) for _, n in shares.most_common()),
            "session_timeout_s": session_timeout_s,
            "bound_s": session_timeout_s + 5,
            "target": "max <= session timeout + 5 s",
        },
    )


# -- 3. many runs in flight on one worker ----------------------------------------------------------


async def in_flight(bootstrap: str, runs: int, window_s: float, ramp_bound_s: float) -> Row:
    """One worker drives ``runs`` looping runs at once; events/s, RSS, producers, sockets."""
    topics = Topics(bootstrap, "inflight")
    port = int(bootstrap.split(",")[0].rsplit(":", 1)[1])
    inputs = [(f"fly-{i:05d}", {"steps": 10_000_000}) for i in range(runs)]
    folder = Path(tempfile.mkdtemp(prefix="kinflight-"))
    stats_file = folder / "stats.json"
    client = await open_client(topics.client)
    log = client.log
    command = ("-m", "benchmarks.probe_worker")
    env = {probe_worker.STATS_ENV: str(stats_file)}
    connections: list[int] = []
    try:
        with fleet(topics.worker, folder, concurrency=runs, env=env, command=command) as fleet_:
            (proc,) = fleet_.start(1)
            fleet_.wait_ready()
            await topics.wait_stable(1)
            idle_connections = broker_connections(proc.pid, port)

            async def sample() -> None:
                while True:
                    connections.append(broker_connections(proc.pid, port))
                    await asyncio.sleep(1.0)

            sampler = asyncio.create_task(sample())
            try:
                submit_s = await submit_all(client, fleet_app.IO, inputs, SUBMIT_PARALLEL)

                async def stepping() -> int:
                    infos = await log.list_runs(status=RunStatus.RUNNING)
                    return sum(i.last_seq > 3 for i in infos)

                ramp_started = time.monotonic()
                while (flying := await stepping()) < runs:
                    if time.monotonic() - ramp_started > ramp_bound_s:
                        break  # measured with the runs in flight by then (reported)
                    await asyncio.sleep(2.0)
                ramp_s = time.monotonic() - ramp_started
                started = time.monotonic()
                before = sum(i.last_seq for i in await log.list_runs())
                read_s = time.monotonic() - started
                await asyncio.sleep(window_s)
                ended = time.monotonic()
                after = sum(i.last_seq for i in await log.list_runs())
                # Each count is of a moment within its read: take the midpoints.
                seconds = (ended + (time.monotonic() - ended) / 2) - (started + read_s / 2)
                rss = peak_rss_bytes(proc.pid)
                stats = json.loads(stats_file.read_text())
                still_running = len(await log.list_runs(status=RunStatus.RUNNING))
            finally:
                sampler.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sampler
            stop_started = time.monotonic()
            fleet_.close(grace_s=120)
            handover_s = time.monotonic() - stop_started
    finally:
        await client.close()
        shutil.rmtree(folder, ignore_errors=True)
    return Row(
        AREA,
        f"{runs:,} runs in flight on 1 worker, {PARTITIONS} partitions (Kafka group)",
        "events/s",
        (after - before) / seconds,
        None,
        {
            "window_s": round(seconds, 1),
            "peak_rss_mb": round(rss / 2**20, 1),
            "producers": stats["producers"],
            "peak_producers": stats["peak_producers"],
            "owned_partitions": len(stats["owned_partitions"]),
            "broker_connections_max": max(connections, default=0),
            "broker_connections_idle": idle_connections,
            "in_flight_at_window": flying,
            "running_at_end": still_running,
            "submit_s": round(submit_s, 1),
            "ramp_s": round(ramp_s, 1),
            "sigterm_handover_s": round(handover_s, 1),
            "target": "producers, connections bounded by partitions",
        },
    )


# -- the suite -----------------------------------------------------------------------------------


async def _all(bootstrap: str, quick: bool) -> list[Row]:
    rows = await scale_out(bootstrap, 200 if quick else 2_000)
    rows.append(
        await failover(bootstrap, runs=30 if quick else 100, session_timeout_s=6 if quick else 10)
    )
    runs, window, ramp = (1_000, 10, 180) if quick else (10_000, 30, 600)
    rows.append(await in_flight(bootstrap, runs, window, ramp))
    return rows


def collect(quick: bool) -> list[Row]:
    """Run the Kafka worker benchmarks (see the module docstring)."""
    with kafka_broker() as bootstrap:
        return asyncio.run(_all(bootstrap, quick))


if __name__ == "__main__":  # python -m benchmarks.bench_kafka_workers [RUNS]: scale-out only
    import sys

    with kafka_broker() as _bootstrap:
        _runs = int(sys.argv[1]) if sys.argv[1:] else 300
        for _row in asyncio.run(scale_out(_bootstrap, _runs)):
            print(json.dumps({"name": _row.name, "median": _row.median, "extra": _row.extra}))
