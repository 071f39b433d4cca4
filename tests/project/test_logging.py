"""The library's loggers format nothing that nobody receives (issue 23 item 8).

structlog runs its processors (the default ones render a colored console
line, with every value's repr) before the standard-library logger checks its
level; ``open_log`` paid that for a debug line thrown away. Counted, not
timed: how often a logged value is rendered.
"""

from __future__ import annotations

import logging

import structlog
from structlog.testing import capture_logs

from agentlog._logging import get_logger


class _Counted:
    """A value that counts how often a log line renders it."""

    def __init__(self) -> None:
        self.rendered = 0

    def __repr__(self) -> str:
        self.rendered += 1
        return "counted"

    __str__ = __repr__


def test_a_line_below_the_level_is_not_rendered() -> None:
    value = _Counted()
    log = get_logger("agentlog.test_quiet")
    log.debug("thrown away", value=value)
    log.bind(run_id="r").info("thrown away too", value=value)
    assert value.rendered == 0


def test_a_line_the_application_asked_for_is_rendered(caplog: object) -> None:
    value = _Counted()
    logging.getLogger("agentlog.test_quiet").setLevel(logging.DEBUG)
    try:
        get_logger("agentlog.test_quiet").debug("kept", value=value)
    finally:
        logging.getLogger("agentlog.test_quiet").setLevel(logging.NOTSET)
    assert value.rendered == 1


def test_capture_logs_still_sees_lines_below_the_level() -> None:
    log = get_logger("agentlog.test_quiet")
    with capture_logs() as logs:
        log.debug("captured", n=1)
        log.bind(run_id="r").warning("captured too")
    assert [(line["event"], line["log_level"]) for line in logs] == [
        ("captured", "debug"),
        ("captured too", "warning"),
    ]
    assert logs[1]["run_id"] == "r"


def test_an_application_that_configures_structlog_gets_its_processors() -> None:
    seen: list[str] = []

    def keep(_logger: object, _name: str, event: dict[str, object]) -> dict[str, object]:
        seen.append(str(event["event"]))
        raise structlog.DropEvent

    structlog.configure(processors=[keep])  # the conftest resets it after the test
    get_logger("agentlog.test_quiet").debug("for the application")
    assert seen == ["for the application"]
