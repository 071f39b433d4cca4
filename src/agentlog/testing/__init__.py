"""The EventLog contract suite and model, shipped for any backend to run.

Install with ``pip install agentlog[testing]`` (pytest, pytest-asyncio and
Hypothesis). Import this package from tests only: ``import agentlog`` never
imports it, nor pytest or Hypothesis.

* :class:`EventLogContract`: the contract every backend passes; a backend's
  test class subclasses it and provides the ``log`` and ``log_url`` fixtures.
* :class:`EventLogMachine`: a Hypothesis state machine that checks a backend
  against a plain model; a subclass defines ``open_log`` and takes its test
  case from ``EventLogMachine.test_case()``.
* Builders for a backend's own tests: :func:`ev`, :func:`seed`,
  :func:`started`, :func:`every_event_type`, :func:`read_all`, and the racing
  writers :func:`race` and :func:`race_in_processes`.

docs/backends.md shows a backend's whole test file (ten lines).
"""

from agentlog.testing._contract import EventLogContract
from agentlog.testing._events import T0, ev, every_event_type, read_all, seed, started
from agentlog.testing._model import MODEL_SETTINGS, EventLogMachine, RunModel
from agentlog.testing._race import race, race_in_processes

__all__ = [
    "MODEL_SETTINGS",
    "T0",
    "EventLogContract",
    "EventLogMachine",
    "RunModel",
    "ev",
    "every_event_type",
    "race",
    "race_in_processes",
    "read_all",
    "seed",
    "started",
]
