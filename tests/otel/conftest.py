"""Each test's OpenTelemetry back end, on the SDK's in-memory exporters."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.otel import Exported


@pytest.fixture
def exported() -> Iterator[Exported]:
    made = Exported.create()
    yield made
    made.shutdown()
