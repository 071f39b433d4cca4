"""Kafka backend benchmarks, against a real Apache Kafka 4.0 broker.

Uses ``KAFKA_BOOTSTRAP_SERVERS`` when set; otherwise starts a broker from the
Maven jars with ``scripts/kafka_broker.py`` in a temporary folder and stops
it at the end. Rows:

* ``sync append``: one event per step, ``durable=True`` (acks=all, committed
  transaction), p50/p99, against raw aiokafka doing the same transactional
  send + commit of the same bytes, in the same run (target p50 ratio <= 1.5);
* ``throughput``: appends of 50 events across 100 concurrent runs, each
  committed before it returns, on the standalone layout (a transaction per
  append) and as a group member owning 8 partitions (concurrent appends of a
  partition's runs share a transaction; target >= 100,000 events/s, with the
  transactions and this process's CPU per event). There is no
  ``durable=False`` queue on Kafka: the runtime's async mode batches in the
  background itself;
* ``resume``: a fresh process loads the latest snapshot and reads the events
  after it, for a run among 1k / 100k / 1M events on its partition
  (target < 100 ms at 1M); ``records_read`` shows the read is bounded.

Each event is a TaskCompleted whose result is a realistic tool result of
:data:`benchmarks.payloads.PAYLOAD_BYTES`, the size every backend's benchmark
stores (:func:`benchmarks.harness.task_events`: search hits, a fetched page, a
summary, a chat completion or an embedding, in turn), every one different; the
raw aiokafka side sends the very same encoded events. The throughput row's
median and p99 are of each append's latency; its rate is events over the wall
time. Resume is cold: each load is the first on a freshly connected log.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
import uuid
from datetime import UTC, datetime

from aiokafka import AIOKafkaProducer

from agentlog.eventlog import Event, Snapshot, encode_event, pack
from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog
from benchmarks import payloads
from benchmarks.harness import Row, kafka_broker, row_from_samples, task_events

AREA = "kafka"


def _events(run_id: str, first: int, count: int, epoch: int = 0) -> list[Event]:
    """Events ``first`` .. ``first + count - 1`` of a run: the same for the same arguments."""
    return task_events(AREA, run_id, first, count, epoch)


async def _sync_append(bootstrap: str, steps: int) -> list[Row]:
    name = f"bench{uuid.uuid4().hex[:8]}"
    config = KafkaConfig(bootstrap_servers=bootstrap, name=name, partitions=4)
    async with await KafkaEventLog.connect(config) as log:
        epoch = await log.claim_writer("sync")
        ours: list[float] = []
        raw_samples: list[float] = []
        raw = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{name}.raw")
        await raw.start()
        try:
            for event in _events("sync", 1, steps + 10, epoch):
                seq = event.seq
                value = encode_event(event)
                start = time.perf_counter()
                await log.append([event])
                middle = time.perf_counter()
                await raw.begin_transaction()
                await raw.send(f"{name}.events", value, key=b"raw", partition=0)
                await raw.commit_transaction()
                end = time.perf_counter()
                if seq > 10:  # warm-up
                    ours.append(middle - start)
                    raw_samples.append(end - middle)
        finally:
            await raw.stop()
    ratio = statistics.median(ours) / statistics.median(raw_samples)
    return [
        row_from_samples(
            AREA,
            "sync append, 1 event/step",
            ours,
            steps=steps,
            p50_ratio_vs_raw=ratio,
            target="ratio<=1.5",
        ),
        row_from_samples(AREA, "raw aiokafka txn send+commit", raw_samples, steps=steps),
    ]


async def _async_throughput(bootstrap: str, runs: int, per_run: int, *, group: bool) -> Row:
    """``group``: a member of a consumer group owning all 8 partitions (one
    transactional producer per partition, concurrent appends of its runs share
    transactions); else the standalone layout (one producer, and one
    transaction, per run)."""
    name = f"bench{uuid.uuid4().hex[:8]}"
    group_id = f"{name}-workers" if group else ""
    config = KafkaConfig(bootstrap_servers=bootstrap, name=name, partitions=8, group_id=group_id)
    batch = 50
    # Built before connecting: a member must not miss its group's heartbeats meanwhile.
    plans = {
        f"run-{i}": [_events(f"run-{i}", first, batch) for first in range(1, per_run + 1, batch)]
        for i in range(runs)
    }
    # The prebuilt events are the benchmark's input, not the log's work: frozen, so
    # that the collector does not walk them all again during the timed part (a
    # full collection of them was 15% of its CPU; issue 23 item 10).
    gc.collect()
    gc.freeze()
    try:
        return await _timed_throughput(config, plans, runs, per_run, batch, group=group)
    finally:
        gc.unfreeze()


async def _timed_throughput(
    config: KafkaConfig,
    plans: dict[str, list[list[Event]]],
    runs: int,
    per_run: int,
    batch: int,
    *,
    group: bool,
) -> Row:
    async with await KafkaEventLog.connect(config) as log:
        if group:
            await _owning_all(log, config.partitions)
        # Open every run's producer first: that is start-up, not throughput.
        await asyncio.gather(*(log.append(p[0]) for p in plans.values()))

        appends: list[float] = []

        async def drive(batches: list[list[Event]]) -> None:
            for events in batches[1:]:
                began = time.perf_counter()
                await log.append(events)
                appends.append(time.perf_counter() - began)

        commits_before = _commits(log)
        start = time.perf_counter()
        cpu = time.process_time()
        await asyncio.gather(*(drive(p) for p in plans.values()))
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu
        commits = _commits(log) - commits_before
    events = runs * (per_run - batch)
    layout = "group member, 8 owned partitions" if group else "standalone"
    extra: dict[str, object] = {"events": events, "events_per_s": events / elapsed}
    if group:
        extra |= {"transactions": commits, "appends_per_txn": len(appends) / max(commits, 1)}
    extra |= {"cpu_us_per_event": cpu / events * 1e6, "target": "events_per_s>=100000"}
    return row_from_samples(
        AREA,
        f"throughput ({layout}), {runs} concurrent runs, {batch} events/append (time per append)",
        appends,
        **extra,
    )


async def _owning_all(log: KafkaEventLog, partitions: int, bound_s: float = 120.0) -> None:
    """Wait until the group assigned every partition to this member."""
    waited = 0.0
    while len(getattr(log, "owned_partitions", ())) < partitions:
        if waited > bound_s:
            raise RuntimeError(f"the group did not assign all {partitions} partitions")
        await log.wait_for_ownership_change(1.0)  # type: ignore[attr-defined]
        waited += 1.0


def _commits(log: KafkaEventLog) -> int:
    """Transactions the group member's partition owners committed (0 standalone)."""
    member = getattr(log, "member", None)
    return sum(o.commits for o in member.owners.values()) if member is not None else 0


async def _resume(bootstrap: str, total: int, repeat: int = 3) -> Row:
    """A run holding a tenth of ``total`` events, interleaved with 9 other runs."""
    name = f"bench{uuid.uuid4().hex[:8]}"
    config = KafkaConfig(bootstrap_servers=bootstrap, name=name, partitions=1)
    others, batch, snap_every = 9, 100, 1000
    per_run = max(batch, total // (others + 1))
    # the snapshot holds a state like an agent's: the last 20 messages of its conversation
    r = payloads.rng("kafka-snapshot")
    state = pack(
        {
            "messages": [
                payloads.conversation_message(r, i, payloads.PAYLOAD_BYTES) for i in range(20)
            ]
        }
    )
    async with await KafkaEventLog.connect(config) as log:
        for first in range(1, per_run + 1, batch):
            runs = [*(f"other-{i}" for i in range(others)), "target"]
            # One round of the ten runs commits concurrently, as a runtime's runs do.
            await asyncio.gather(*(log.append(_events(run, first, batch)) for run in runs))
            last = first + batch - 1
            if last % snap_every == 0:
                await log.save_snapshot(Snapshot("target", last, state, datetime.now(UTC)))
    samples, records = [], []
    for _ in range(repeat):
        async with await KafkaEventLog.connect(config) as fresh:
            start = time.perf_counter()
            snapshot = await fresh.load_snapshot("target")
            after = snapshot.seq if snapshot else 0
            tail = [e async for e in fresh.read("target", after_seq=after)]
            samples.append(time.perf_counter() - start)
            records.append(fresh.last_read_records)
            assert len(tail) == per_run - after
    return row_from_samples(
        AREA,
        f"resume, cold (fresh log), {per_run * (others + 1):,} events in partition",
        samples,
        records_read=statistics.median(records),
        target="<100ms at 1M",
    )


async def _all(bootstrap: str, quick: bool) -> list[Row]:
    rows = await _sync_append(bootstrap, 30 if quick else 300)
    for group in (False, True):
        rows.append(await _async_throughput(bootstrap, 100, 200 if quick else 2000, group=group))
    for total in (1_000, 10_000) if quick else (1_000, 100_000, 1_000_000):
        rows.append(await _resume(bootstrap, total))
    return rows


def collect(quick: bool) -> list[Row]:
    """Run the Kafka benchmarks; start a broker unless KAFKA_BOOTSTRAP_SERVERS is set."""
    with kafka_broker("agentlog-kafka-bench-") as (bootstrap, _data):
        return asyncio.run(_all(bootstrap, quick))
