"""The one mapping from aiokafka's errors to agentlog's (no broker needed)."""

from __future__ import annotations

import pytest
from aiokafka.errors import (
    InvalidProducerEpoch,
    KafkaConnectionError,
    MessageSizeTooLargeError,
    ProducerFenced,
    UnknownError,
)

from agentlog.errors import (
    BackendUnavailableError,
    ConflictError,
    EventLogError,
    FencedError,
)
from agentlog.eventlog.kafka._errors import is_transient, kafka_errors


@pytest.mark.parametrize("fence", [ProducerFenced, InvalidProducerEpoch])
def test_a_fenced_producer_is_the_blocks_fenced_error(fence: type[Exception]) -> None:
    raised = fence()
    with (
        pytest.raises(FencedError) as caught,
        kafka_errors("committing", fenced=lambda: FencedError("r", 3, 4)),
    ):
        raise raised
    assert (caught.value.run_id, caught.value.epoch, caught.value.current) == ("r", 3, 4)
    assert caught.value.__cause__ is raised


def test_a_fence_where_no_transaction_was_expected_names_no_empty_run() -> None:
    with pytest.raises(EventLogError) as caught, kafka_errors("cannot read topic t"):
        raise ProducerFenced()
    assert not isinstance(caught.value, FencedError)
    assert "cannot read topic t" in str(caught.value) and "run ''" not in str(caught.value)


def test_refused_records_are_not_called_unavailable() -> None:
    with pytest.raises(EventLogError) as caught, kafka_errors("cannot append to run 'r'"):
        raise MessageSizeTooLargeError()
    assert not isinstance(caught.value, BackendUnavailableError)
    assert "cannot append to run 'r'" in str(caught.value)
    assert "Kafka refused it" in str(caught.value)


@pytest.mark.parametrize(
    "error", [KafkaConnectionError("gone"), ConnectionResetError("reset"), TimeoutError()]
)
def test_driver_errors_say_what_failed_and_what_to_do(error: Exception) -> None:
    with pytest.raises(BackendUnavailableError) as caught, kafka_errors("cannot read X", "retry"):
        raise error
    message = str(caught.value)
    assert message.startswith("cannot read X (")
    assert type(error).__name__ in message
    assert message.endswith("; retry")
    assert caught.value.__cause__ is error
    assert caught.value.retryable
    assert is_transient(caught.value)


def test_a_message_that_depends_on_progress_is_asked_only_on_failure() -> None:
    stage = ["connecting"]
    asked: list[str] = []

    def doing() -> str:
        asked.append(stage[0])
        return f"stuck at {stage[0]}"

    with kafka_errors(doing):
        stage[0] = "reading"
    assert asked == []
    with pytest.raises(BackendUnavailableError) as caught, kafka_errors(doing):
        raise KafkaConnectionError()
    assert asked == ["reading"]
    assert str(caught.value).startswith("stuck at reading")


def test_an_error_kafka_calls_final_is_not_transient() -> None:
    with pytest.raises(BackendUnavailableError) as caught, kafka_errors("cannot commit"):
        raise UnknownError()
    assert not is_transient(caught.value)


def test_agentlog_errors_pass_through_untouched() -> None:
    conflict = ConflictError("r", 3, 5)
    with pytest.raises(ConflictError) as caught, kafka_errors("outer"), kafka_errors("inner"):
        raise conflict
    assert caught.value is conflict
