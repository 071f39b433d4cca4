"""The shipped Hypothesis state machine (agentlog.testing) on a real Kafka 4.0 broker.

Each example gets a log name of its own (fresh topics), so it starts from an
empty log. Creating topics and a transactional producer per example costs
about a second on the broker, so this run is smaller than on the in-process
backends: fewer examples and steps, the same rules and invariants.

One difference is Kafka's by design, and pinned here: a snapshot of a run
that has no index record yet (never claimed, nothing appended) is refused
with UnknownRunError, because a Kafka snapshot stores the events-topic offset
that resume seeks to, and an unknown run has none. The other backends store
such a snapshot. Once the run exists, the shipped rule runs unchanged.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import rule, run_state_machine_as_test

from agentlog.errors import UnknownRunError
from agentlog.eventlog._base import EventLog, Snapshot
from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog
from agentlog.testing import MODEL_SETTINGS, EventLogMachine

pytestmark = pytest.mark.kafka

_T0 = datetime(2026, 1, 1, tzinfo=UTC)
#: Bounded so that the run stays well under two minutes on a busy 2-core machine.
KAFKA_MODEL_SETTINGS = settings(MODEL_SETTINGS, max_examples=12, stateful_step_count=20)


def test_kafka_matches_the_model(kafka_bootstrap: str) -> None:
    class KafkaMachine(EventLogMachine):
        async def open_log(self, tmp: Path) -> EventLog:
            config = KafkaConfig(
                bootstrap_servers=kafka_bootstrap,
                name=f"model{uuid.uuid4().hex[:12]}",
                keep_snapshots=self.keep_snapshots,
                partitions=2,
            )
            return await KafkaEventLog.connect(config)

        @rule(
            run_id=st.sampled_from(["a", "b"]),
            seq=st.integers(1, 12),
            state=st.binary(max_size=16).filter(lambda b: not b.startswith(b"\xc1")),
        )
        def save_snapshot(self, run_id: str, seq: int, state: bytes) -> None:
            model = self.model[run_id]
            if model.epoch == 0 and not model.events:
                with pytest.raises(UnknownRunError):
                    self.run(self.log.save_snapshot(Snapshot(run_id, seq, state, _T0)))
                assert self.run(self.log.load_snapshot(run_id)) is None
                return
            EventLogMachine.save_snapshot(self, run_id, seq, state)

    run_state_machine_as_test(KafkaMachine, settings=KAFKA_MODEL_SETTINGS)
