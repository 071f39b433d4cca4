"""aiokafka is configured per client, never patched for the whole process."""

from __future__ import annotations

import asyncio
import gc
import random
import subprocess
import sys
import textwrap

import aiokafka.producer.sender as aiokafka_sender
import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import ConcurrentTransactions, CoordinatorLoadInProgressError
from aiokafka.producer.sender import AddPartitionsToTxnHandler
from aiokafka.protocol.transaction import AddPartitionsToTxnResponse_v0

from agentlog.eventlog.kafka._clients import (
    QUICK_TXN_RETRY_S,
    start_client,
    stop_quietly,
    transactional_producer,
)

#: Every module of the package, imported and its writer path built, in a fresh process.
_LOAD_THE_BACKEND = """
import aiokafka.producer.sender as sender
before = {k: v for k, v in vars(sender).items() if k.isupper()}
import agentlog.eventlog.kafka
import agentlog.eventlog.kafka._writer_pool, agentlog.eventlog.kafka._txn
import agentlog.eventlog.kafka._clients
after = {k: v for k, v in vars(sender).items() if k.isupper()}
print(repr(sorted(k for k in before if before[k] != after.get(k))))
"""


@pytest.mark.process
def test_importing_the_backend_patches_nothing_in_aiokafka() -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_LOAD_THE_BACKEND)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def _concurrent_transactions(topic: str) -> AddPartitionsToTxnResponse_v0:
    """The broker's answer while it still writes the previous transaction's markers."""
    return AddPartitionsToTxnResponse_v0(0, [(topic, [(0, ConcurrentTransactions.errno)])])


async def test_only_our_transactional_producers_retry_a_finishing_transaction_quickly() -> None:
    tp = TopicPartition("t", 0)
    ours = transactional_producer(bootstrap_servers="127.0.0.1:9", transactional_id="ours")
    plain = AIOKafkaProducer(bootstrap_servers="127.0.0.1:9", transactional_id="plain")
    try:
        quick = ours._sender.add_partitions_handler([tp])
        assert quick.handle_response(_concurrent_transactions("t")) == QUICK_TXN_RETRY_S
        default = AddPartitionsToTxnHandler(plain._sender, [tp])
        backoff = default.handle_response(_concurrent_transactions("t"))
        assert backoff == aiokafka_sender.BACKOFF_OVERRIDE != QUICK_TXN_RETRY_S
        # Any other answer gets aiokafka's own wait.
        loading = AddPartitionsToTxnResponse_v0(
            0, [("t", [(0, CoordinatorLoadInProgressError.errno)])]
        )
        assert quick.handle_response(loading) == default.handle_response(loading) is not None
    finally:
        await ours.stop()
        await plain.stop()


@pytest.mark.kafka
async def test_a_start_cut_short_at_any_point_leaves_no_socket_open(kafka_bootstrap: str) -> None:
    """aiokafka's bootstrap holds its first connection in a local variable while
    it waits for metadata: a start cancelled there leaked it (found by the
    garbage collector in some later test). Cut starts short at random points."""
    leaked: list[str] = []
    previous = sys.unraisablehook
    sys.unraisablehook = lambda u: leaked.append(f"{u.exc_value!r} in {u.object!r}")
    try:
        rng = random.Random(7)
        for _ in range(30):
            producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
            try:
                async with asyncio.timeout(rng.uniform(0.0, 0.03)):
                    await start_client(producer)
            except TimeoutError:
                pass
            await stop_quietly(producer, 5.0)
            del producer
            gc.collect()
    finally:
        sys.unraisablehook = previous
    assert leaked == []
