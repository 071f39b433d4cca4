"""Every error agentlog raises, under one root.

Driver errors (sqlite3, aiokafka, botocore, duckdb) are translated at the
seam where they happen, with ``raise X from exc``, so callers only ever catch
these types. Each message says what was wrong and what to do about it.

The hierarchy::

    AgentlogError
    ├── ConfigError                 bad URL, bad option, bad CLI input
    │   └── SeqOutOfRangeError      a seq below 1 or past the run's last event
    ├── EventLogError
    │   ├── ConflictError           append at a seq that is not next (duplicate or gap)
    │   │   └── ThreadConflictError another process wrote the LangGraph thread meanwhile
    │   ├── FencedError             a newer writer claimed the run; this one must stop
    │   │   └── NotOwnerError       this process does not own the run's partition (Kafka group)
    │   ├── LeaseHeldError          the run's writer lease is live in another process
    │   ├── LeaseExpiredError       this writer's own lease ran out; it stops before an effect
    │   ├── UnknownRunError         no event was ever recorded for that run id
    │   │   └── RunArchivedError    the run's events were moved to the archive
    │   ├── CorruptEventError       stored bytes that do not decode; names run and seq
    │   │   └── UnknownEventTypeError
    │   ├── NotSerializableError    a value msgpack cannot carry with builtin types
    │   │   └── ChannelNotSerializableError a LangGraph channel value the serde refuses
    │   ├── ForbiddenTypeError      stored LangGraph bytes that name a class not allowed
    │   ├── BackendUnavailableError unreachable broker, unreadable or read-only file
    │   │   ├── KafkaAuthError      the Kafka listener refused our credentials or TLS
    │   │   └── PostgresAuthError   the PostgreSQL server refused the user, password or database
    │   └── EncryptionError         payload encryption (agentlog.crypto)
    │       ├── ShreddedError       the run's data key was destroyed on purpose
    │       ├── TamperedPayloadError  a sealed payload fails its GCM tag (also a CorruptEventError)
    │       ├── KeyStoreMissingError  an encrypted payload and no key store (also a ConfigError)
    │       │   └── NoKeyStoreError     shred() with no key store configured
    │       ├── NotEncryptedError   shred() of a run recorded in clear (also a ConfigError)
    │       ├── MissingDataKeyError the key store has no data key for the run
    │       ├── WrongKeyError       the key store's data key for the run is not the sealing one
    │       ├── KeyStoreUnavailableError  keyring file or KMS unreachable (also BackendUnavailable)
    │       ├── CorruptKeyringError a keyring file that does not parse
    │       ├── KekDisabledError    the key-encryption key is disabled or pending deletion
    │       └── UnknownKekError     no such key-encryption key (also a ConfigError)
    ├── ReplayError                 events that cannot fold into a state
    ├── CheckpointError             raised by the LangGraph saver (agentlog.langgraph)
    │   ├── MissingThreadIdError    a config without configurable.thread_id
    │   └── UnknownCheckpointError  a checkpoint_id the thread does not have
    ├── WorkflowError               raised by the runtime
    │   ├── WorkflowDefinitionError a workflow or step declared wrongly
    │   ├── UnknownWorkflowError    a run's workflow is not registered in this runtime
    │   ├── RunExistsError          start() of a run id that exists with another workflow
    │   ├── RunNotWaitingError      resume() of a run that is not parked on an interrupt
    │   ├── RunNotFailedError       retry() of a run that has not failed
    │   ├── RunEndedError           send() to a run that has ended
    │   ├── InvalidMessageError     a message topic, key or idempotency key that is not short text
    │   ├── EventNotPublishedError  get_event() with no value: its timeout passed or the run ended
    │   ├── NoLiveWriterError       wait() on a running run that no live writer drives
    │   ├── InvalidTimerError       a negative, non-finite or absurd sleep or timeout
    │   ├── InterruptTimeoutError   an interrupt's timeout passed with no answer (in the step)
    │   ├── InvalidScheduleError    a cron expression that does not parse
    │   ├── InvalidResumeValueError a resume value that does not fit what the interrupt expects
    │   ├── VersionMismatchError    the run was recorded under other code, no migration
    │   ├── UnknownStepError        a step routed to a step the workflow does not have
    │   ├── InvalidRouteError       a step routed to the same step twice
    │   ├── NondeterminismError     a re-executed step asked for another task than recorded
    │   ├── TaskFailedError         a task called again after its retry policy gave up
    │   ├── InvalidWriteError       a step wrote a key the state schema does not have
    │   ├── RunFailedError          result() of a run that failed (or its own class, rebuilt)
    │   └── RunCancelledError       result() of a run that was cancelled
    └── ArchiveError                raised by the archive (see agentlog.archive)

``retryable`` is data on the error: True where the same call may succeed
later without anyone changing anything (a broker that is restarting).

The classes are defined in private modules beside this one, a branch each
(``_root``, ``_eventlog``, ``_encryption``, ``_langgraph``, ``_workflow``),
to keep each module short. Import them from here: each class's
``__module__`` is ``agentlog.errors``, so its qualified name, its pickles and
the API reference stay ``agentlog.errors.X`` wherever it is defined.
"""

from __future__ import annotations

from agentlog.errors._encryption import (
    CorruptKeyringError,
    EncryptionError,
    KekDisabledError,
    KeyStoreMissingError,
    KeyStoreUnavailableError,
    MissingDataKeyError,
    NoKeyStoreError,
    NotEncryptedError,
    ShreddedError,
    TamperedPayloadError,
    UnknownKekError,
    WrongKeyError,
)
from agentlog.errors._eventlog import (
    BackendUnavailableError,
    ConflictError,
    CorruptEventError,
    FencedError,
    KafkaAuthError,
    LeaseExpiredError,
    LeaseHeldError,
    NotOwnerError,
    NotSerializableError,
    PostgresAuthError,
    RunArchivedError,
    UnknownEventTypeError,
    UnknownRunError,
)
from agentlog.errors._langgraph import (
    ChannelNotSerializableError,
    ForbiddenTypeError,
    MissingThreadIdError,
    ThreadConflictError,
    UnknownCheckpointError,
)
from agentlog.errors._root import (
    AgentlogError,
    ArchiveError,
    CheckpointError,
    ConfigError,
    EventLogError,
    ReplayError,
    SeqOutOfRangeError,
    WorkflowError,
)
from agentlog.errors._workflow import (
    EventNotPublishedError,
    InterruptTimeoutError,
    InvalidMessageError,
    InvalidResumeValueError,
    InvalidRouteError,
    InvalidScheduleError,
    InvalidTimerError,
    InvalidWriteError,
    NoLiveWriterError,
    NondeterminismError,
    RunCancelledError,
    RunEndedError,
    RunExistsError,
    RunFailedError,
    RunNotFailedError,
    RunNotWaitingError,
    TaskFailedError,
    UnknownStepError,
    UnknownWorkflowError,
    VersionMismatchError,
    WorkflowDefinitionError,
)

__all__ = [
    "AgentlogError",
    "ArchiveError",
    "BackendUnavailableError",
    "ChannelNotSerializableError",
    "CheckpointError",
    "ConfigError",
    "InterruptTimeoutError",
    "InvalidMessageError",
    "InvalidResumeValueError",
    "InvalidScheduleError",
    "InvalidTimerError",
    "InvalidRouteError",
    "InvalidWriteError",
    "KafkaAuthError",
    "PostgresAuthError",
    "ConflictError",
    "CorruptEventError",
    "CorruptKeyringError",
    "EncryptionError",
    "KekDisabledError",
    "KeyStoreMissingError",
    "KeyStoreUnavailableError",
    "MissingDataKeyError",
    "NoKeyStoreError",
    "NotEncryptedError",
    "ShreddedError",
    "TaskFailedError",
    "TamperedPayloadError",
    "UnknownKekError",
    "WrongKeyError",
    "EventLogError",
    "EventNotPublishedError",
    "FencedError",
    "ForbiddenTypeError",
    "LeaseExpiredError",
    "LeaseHeldError",
    "MissingThreadIdError",
    "NotSerializableError",
    "NoLiveWriterError",
    "NotOwnerError",
    "NondeterminismError",
    "ReplayError",
    "RunArchivedError",
    "RunCancelledError",
    "RunEndedError",
    "RunExistsError",
    "RunFailedError",
    "RunNotFailedError",
    "RunNotWaitingError",
    "SeqOutOfRangeError",
    "ThreadConflictError",
    "UnknownCheckpointError",
    "UnknownEventTypeError",
    "UnknownRunError",
    "UnknownStepError",
    "UnknownWorkflowError",
    "VersionMismatchError",
    "WorkflowDefinitionError",
    "WorkflowError",
]


for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
