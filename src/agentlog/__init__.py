"""agentlog: a durable, event-sourced runtime for long-running AI agents.

Every step, task result and interrupt of a run is an event appended to a
log keyed by run id; resuming a run replays its events, so it survives
crashes, deploys and approvals that take days.

Start here: a `agentlog.runtime.Workflow` declares the state and the steps,
and `agentlog.runtime.Runtime` opens a log and starts, resumes and reads
runs (`agentlog.runtime.Runtime.open`, `agentlog.runtime.Runtime.start`,
`agentlog.runtime.Runtime.resume`). Steps receive an
`agentlog.runtime.StepContext`; side effects are `agentlog.runtime.task`
functions, run at least once with a stable idempotency key and a recorded
result. The guides are in the repository's ``docs/`` folder.

The modules:

- `agentlog.runtime`: workflows, steps, tasks, interrupts, durability modes,
  workers, streaming: the API an application uses.
- `agentlog.eventlog`: the `agentlog.eventlog.Event` and the
  `agentlog.eventlog.EventLog` seam, with its backends (SQLite, PostgreSQL,
  Redis, Kafka, memory) opened by URL with `agentlog.eventlog.open_log`.
- `agentlog.projector`: the fold of events into a run's state, reducers,
  snapshots, time travel and diffs.
- `agentlog.archive`: finished history as Parquet (a folder or S3),
  retention, and SQL through DuckDB.
- `agentlog.replay`: the debugger's data (runs over hot and archived logs,
  one run's history and timeline) and the replay check behind
  ``agentlog verify``.
- `agentlog.langgraph`: `agentlog.langgraph.AgentlogSaver`, a LangGraph
  checkpointer on any agentlog log (the ``langgraph`` extra).
- `agentlog.pydantic_ai`: `agentlog.pydantic_ai.AgentlogAgent`, a Pydantic AI
  agent whose runs are durable agentlog runs (the ``pydantic-ai`` extra).
- `agentlog.openai_agents`: `agentlog.openai_agents.run_agent`, an OpenAI
  Agents SDK run inside a step, its model and tool calls durable tasks (the
  ``openai-agents`` extra).
- `agentlog.otel`: `agentlog.otel.OpenTelemetry`, traces and metrics of runs
  through OpenTelemetry (the ``otel`` extra; used by default when
  ``opentelemetry-api`` is installed).
- `agentlog.crypto`: per-run data keys, encryption at rest and shredding.
- `agentlog.testing`: the EventLog contract suite, for a backend's own tests
  (the ``testing`` extra).
- `agentlog.errors`: every exception, under one root,
  `agentlog.errors.AgentlogError`.
"""

from agentlog import errors
from agentlog.errors import AgentlogError
from agentlog.eventlog import Event, EventLog, open_log

__all__ = ["AgentlogError", "Event", "EventLog", "errors", "open_log"]
__version__ = "0.1.0"
