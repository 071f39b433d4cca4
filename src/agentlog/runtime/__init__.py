"""The durable runtime: workflows of steps, tasks, interrupts, durability modes."""

from agentlog.eventlog.events import RunStatus
from agentlog.runtime._children import ChildHandle
from agentlog.runtime._context import Interrupted, StepContext
from agentlog.runtime._frozen import FrozenDict, FrozenList, thaw
from agentlog.runtime._handles import PendingInterrupt, RecoveryReport, RunHandle
from agentlog.runtime._queues import Queue, Rate
from agentlog.runtime._retry import RetryPolicy
from agentlog.runtime._runtime import VERBS, Runtime, RuntimeConfig
from agentlog.runtime._schedules import Schedule
from agentlog.runtime._shred import ShredReport
from agentlog.runtime._stream import STREAM_MODES, StreamMode, StreamUntil, StreamUpdate, stream
from agentlog.runtime._task_calls import current_idempotency_key, idempotency_key
from agentlog.runtime._task_options import TaskOptions
from agentlog.runtime._tasks import task
from agentlog.runtime._worker import Worker, WorkerConfig
from agentlog.runtime._workflow import Next, Send, Step, Target, Workflow, end, goto
from agentlog.runtime._writer import DURABILITY_MODES, Durability

__all__ = [
    "DURABILITY_MODES",
    "STREAM_MODES",
    "VERBS",
    "ChildHandle",
    "Durability",
    "FrozenDict",
    "FrozenList",
    "Interrupted",
    "Next",
    "PendingInterrupt",
    "Queue",
    "Rate",
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
    "TaskOptions",
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
