"""The benchmarks' data is realistic: every payload differs and none compresses to nothing.

Repeated-character payloads once let compressing stores (Parquet's zstd, TOAST)
flatter the figures; these tests pin that every benchmark draws its data from
``benchmarks/payloads.py`` and that the data stays deterministic.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import pytest
from benchmarks import (
    bench_archive,
    bench_eventlog,
    bench_kafka,
    bench_langgraph,
    bench_postgres,
    bench_projector,
    bench_redis,
    bench_runtime,
    payloads,
)

from agentlog.eventlog import StepCompleted, TaskCompleted
from agentlog.eventlog.codec import encode_payload, pack

# What each benchmark stores, as encoded bytes: one item per event or message.
BENCHMARK_DATA: dict[str, Callable[[], list[bytes]]] = {
    "eventlog": lambda: [encode_payload(e.data) for e in bench_eventlog._events("r", 200)],
    "runtime": lambda: [pack(m) for m in bench_runtime.conversation(200)],
    "kafka": lambda: [encode_payload(e.data) for e in bench_kafka._events("r", 1, 200)],
    "projector": lambda: [encode_payload(e.data) for e in bench_projector._events(200)[1:]],
    "archive": lambda: [encode_payload(e.data) for e in bench_archive._run_events("r", 100, 7)],
    "redis": lambda: [encode_payload(e.data) for e in bench_redis._events("r", 1, 200)],
    "postgres": lambda: [encode_payload(e.data) for e in bench_postgres._events("r", 1, 200, 0)],
}


def _results(events: list[Any]) -> list[Any]:
    return [e.data.result for e in events]


def _archive_values() -> list[Any]:
    """What an archived run stores: its tasks' results and its steps' messages."""
    values: list[Any] = []
    for event in bench_archive._run_events("r", 100, 7):
        if isinstance(event.data, TaskCompleted):
            values.append(event.data.result)
        elif isinstance(event.data, StepCompleted):
            values.extend(event.data.writes["messages"])
    return values


# The values each benchmark stores, before encoding: each should be PAYLOAD_BYTES big.
BENCHMARK_VALUES: dict[str, Callable[[], list[Any]]] = {
    "eventlog": lambda: _results(bench_eventlog._events("r", 50)),
    "kafka": lambda: _results(bench_kafka._events("r", 1, 50)),
    "redis": lambda: _results(bench_redis._events("r", 1, 50)),
    "postgres": lambda: _results(bench_postgres._events("r", 1, 50, 0)),
    "runtime": lambda: bench_runtime.conversation(50),
    "langgraph bounded": lambda: bench_langgraph.window_messages(50),
    "projector": lambda: [
        e.data.writes["last"]
        for e in bench_projector._events(100)
        if isinstance(e.data, StepCompleted)
    ],
    "archive": _archive_values,
}


@pytest.mark.parametrize("area", sorted(BENCHMARK_VALUES))
def test_every_benchmark_stores_payloads_of_the_one_size(area: str) -> None:
    values = BENCHMARK_VALUES[area]()
    assert len(values) >= 20, area
    sizes = [payloads.json_size(v) for v in values]
    wrong = [s for s in sizes if abs(s - payloads.PAYLOAD_BYTES) > payloads.PAYLOAD_BYTES // 10]
    assert not wrong, f"{area}: payloads of {wrong} bytes, not ~{payloads.PAYLOAD_BYTES}"


@pytest.mark.parametrize("area", sorted(BENCHMARK_DATA))
def test_benchmark_payloads_do_not_compress_to_nothing(area: str) -> None:
    items = BENCHMARK_DATA[area]()
    raw = b"".join(items)
    # Repeated characters compressed to under 5% of their size; text drawn at
    # random from a vocabulary stays above a fifth, as English prose does.
    assert len(zlib.compress(raw, 9)) / len(raw) > 0.2, area
    assert len(set(items)) == len(items), f"{area}: payloads repeat"


@pytest.mark.parametrize("area", sorted(BENCHMARK_DATA))
def test_benchmark_payloads_are_deterministic(area: str) -> None:
    assert BENCHMARK_DATA[area]() == BENCHMARK_DATA[area]()


@pytest.mark.parametrize("kind", ["user", "assistant", "tool_call", "tool"])
@pytest.mark.parametrize("nbytes", [300, 500, 2000])
def test_messages_come_out_at_the_size_asked(kind: str, nbytes: int) -> None:
    value = payloads.message(payloads.rng("size", kind, nbytes), nbytes, kind)
    assert abs(payloads.json_size(value) - nbytes) <= nbytes // 10, value


@pytest.mark.parametrize("name", payloads.TOOL_NAMES)
@pytest.mark.parametrize("nbytes", [200, 470, 2000])
def test_tool_results_come_out_at_the_size_asked(name: str, nbytes: int) -> None:
    value = payloads.tool_result(payloads.rng("size", name, nbytes), name, nbytes)
    assert abs(payloads.json_size(value) - nbytes) <= nbytes // 10, value


def test_a_label_names_one_stream() -> None:
    assert payloads.text(payloads.rng("a"), 200) == payloads.text(payloads.rng("a"), 200)
    assert payloads.text(payloads.rng("a"), 200) != payloads.text(payloads.rng("b"), 200)


def test_an_unknown_shape_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown tool 'browse'"):
        payloads.tool_result(payloads.rng("x"), "browse", 100)
    with pytest.raises(ValueError, match="unknown message kind 'system'"):
        payloads.message(payloads.rng("x"), 100, "system")
