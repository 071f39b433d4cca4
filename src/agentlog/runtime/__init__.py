"""The durable runtime: workflows of steps, tasks, interrupts, durability modes."""

from agentlog.eventlog.events import RunStatus
from agentlog.runtime.context import Interrupted, StepContext
from agentlog.runtime.frozen import FrozenDict, FrozenList, thaw
from agentlog.runtime.handles import PendingInterrupt, RecoveryReport, RunHandle
from agentlog.runtime.retry import RetryPolicy
from agentlog.runtime.runtime import VERBS, Runtime, RuntimeConfig
from agentlog.runtime.schedules import Schedule
from agentlog.runtime.shredding import ShredReport
from agentlog.runtime.stream import STREAM_MODES, StreamMode, StreamUntil, StreamUpdate, stream
from agentlog.runtime.task_calls import current_idempotency_key, idempotency_key
from agentlog.runtime.tasks import task
from agentlog.runtime.worker import Worker, WorkerConfig
from agentlog.runtime.workflow import Next, Send, Step, Target, Workflow, end, goto
from agentlog.runtime.writer import DURABILITY_MODES, Durability

__all__ = [
    "DURABILITY_MODES",
    "STREAM_MODES",
    "VERBS",
    "Durability",
    "FrozenDict",
    "FrozenList",
    "Interrupted",
    "Next",
    "PendingInterrupt",
    "RecoveryReport",
    "RetryPolicy",
    "RunHandle",
    "RunStatus",
    "Runtime",
    "RuntimeConfig",
    "Schedule",
    "Send",
    "ShredReport",
    "Step",
    "StepContext",
    "StreamMode",
    "StreamUntil",
    "StreamUpdate",
    "Target",
    "Worker",
    "WorkerConfig",
    "Workflow",
    "current_idempotency_key",
    "end",
    "goto",
    "idempotency_key",
    "stream",
    "task",
    "thaw",
]
