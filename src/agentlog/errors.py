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
    │   └── RunFailedError          result() of a run that failed or was cancelled
    └── ArchiveError                raised by the archive (see agentlog.archive)

``retryable`` is data on the error: True where the same call may succeed
later without anyone changing anything (a broker that is restarting).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "AgentlogError",
    "ArchiveError",
    "BackendUnavailableError",
    "ChannelNotSerializableError",
    "CheckpointError",
    "ConfigError",
    "InterruptTimeoutError",
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


class AgentlogError(Exception):
    """Root of every error agentlog raises."""

    retryable: bool = False


class ConfigError(AgentlogError):
    """A URL, option or argument that agentlog cannot use."""


class SeqOutOfRangeError(ConfigError):
    """A seq that the run does not have: below 1, or past its last event."""

    def __init__(self, run_id: str, seq: object, last_seq: int) -> None:
        self.run_id, self.seq, self.last_seq = run_id, seq, last_seq
        super().__init__(
            f"run {run_id!r} has no seq {seq!r}: its events are seq 1 to {last_seq}; "
            "pick a seq in that range"
        )


class EventLogError(AgentlogError):
    """An error from the event log or its snapshot store."""


class ConflictError(EventLogError):
    """An append named a seq that is not the run's next one; nothing was written."""

    def __init__(self, run_id: str, expected: int, got: int) -> None:
        self.run_id, self.expected, self.got = run_id, expected, got
        kind = "duplicate" if got < expected else "gap"
        super().__init__(
            f"run {run_id!r}: append at seq {got} conflicts ({kind}); the next seq is "
            f"{expected}. Another writer appended first or the caller's view is stale: "
            "reload the run and retry."
        )


class FencedError(EventLogError):
    """This writer's epoch is older than the run's; a newer writer owns the run."""

    def __init__(self, run_id: str, epoch: int, current: int) -> None:
        self.run_id, self.epoch, self.current = run_id, epoch, current
        super().__init__(
            f"run {run_id!r}: writer epoch {epoch} is fenced by epoch {current}. "
            "Another process took over this run; this writer must stop."
        )


class NotOwnerError(FencedError):
    """This process does not own the run's partition, so it must not write the run.

    On a Kafka log whose runs are owned by a consumer group's members: the
    run's partition is assigned to another member (or was just revoked from
    this one), or this process is not a member at all. Nothing was written.
    A worker stops driving the run (as for any FencedError); a client sends
    a command instead (``EventLog.send_command``).
    """

    def __init__(self, run_id: str, partition: int, why: str, epoch: int = 0) -> None:
        # run_id "": the partition itself (its owner's producer was fenced).
        what = f"run {run_id!r} (partition {partition})" if run_id else f"partition {partition}"
        EventLogError.__init__(
            self,
            f"{what}: {why}; nothing was written. Its partition's owner writes it: stop "
            "driving the run, or send a command.",
        )
        self.run_id, self.partition, self.epoch, self.current = run_id, partition, epoch, epoch


class LeaseHeldError(EventLogError):
    """A live writer still holds the run's lease."""

    retryable = True

    def __init__(self, run_id: str, owner: str, seconds_left: float) -> None:
        self.run_id, self.owner, self.seconds_left = run_id, owner, seconds_left
        super().__init__(
            f"run {run_id!r} is owned by live writer {owner!r} for another "
            f"{seconds_left:.1f}s; wait for its lease to expire or claim with force."
        )


class LeaseExpiredError(EventLogError):
    """This writer's lease ran out by its own clock; it must not begin a side effect.

    The process was paused (SIGSTOP, a long GC, a sleeping laptop) or could
    not renew its lease, so another process may own the run by now.
    """

    def __init__(self, run_id: str, epoch: int, overdue_seconds: float) -> None:
        self.run_id, self.epoch, self.overdue_seconds = run_id, epoch, overdue_seconds
        super().__init__(
            f"run {run_id!r}: writer epoch {epoch} lost its lease {overdue_seconds:.1f}s ago "
            "by its own clock (the process was paused or could not renew it); it stopped "
            "before starting another side effect. The run is unharmed: `agentlog recover` "
            "(or Runtime.recover()) continues it."
        )


class UnknownRunError(EventLogError):
    """No event was ever recorded for the run id."""

    def __init__(self, run_id: str, where: str = "") -> None:
        self.run_id = run_id
        suffix = f" in {where}" if where else ""
        super().__init__(
            f"unknown run {run_id!r}{suffix}; list the known runs with `agentlog runs`."
        )


class RunArchivedError(UnknownRunError):
    """The run exists, but its events now live only in the archive."""

    def __init__(self, run_id: str, where: str = "", hint: str = "") -> None:
        hint = hint or "Read it with `agentlog show RUN --archive URL` or agentlog.archive"
        EventLogError.__init__(
            self,
            f"run {run_id!r} is archived{f' from {where}' if where else ''}: its events live "
            f"in the archive now. {hint}; its run id stays taken.",
        )
        self.run_id = run_id


class CorruptEventError(EventLogError):
    """Stored bytes that do not decode into an event. They are never skipped."""

    def __init__(self, run_id: str | None, seq: int | None, reason: str, where: str = "") -> None:
        reason = reason.strip() or "the stored bytes do not decode (no detail was given)"
        self.run_id, self.seq, self.reason, self.where = run_id, seq, reason, where
        at = f" ({where})" if where else ""
        super().__init__(
            f"run {run_id!r} seq {seq}{at}: corrupt event: {reason}. The stored bytes "
            "are kept as they are; restore them from a backup or archive, or upgrade "
            "agentlog if they were written by a newer version."
        )


class UnknownEventTypeError(CorruptEventError):
    """An event type this version of agentlog does not know."""


class NotSerializableError(EventLogError):
    """A value that the msgpack codec cannot carry with builtin types."""

    def __init__(self, path: str, value_type: str) -> None:
        self.path, self.value_type = path, value_type
        super().__init__(
            f"cannot serialize {value_type} at {path}: events carry only None, bool, "
            "int, float, str, bytes, list, tuple, dict with str keys, datetime, UUID "
            "and Decimal. Convert it to one of those first."
        )


class BackendUnavailableError(EventLogError):
    """The storage behind the log cannot be reached or written."""

    retryable = True


class EncryptionError(EventLogError):
    """Payload encryption (:mod:`agentlog.crypto`): a key store, a data key or a
    sealed payload that cannot be used. Never answered with wrong plaintext."""


class ShreddedError(EncryptionError):
    """The run was crypto-shredded: its data key is destroyed, on purpose and for good."""

    def __init__(self, run_id: str, shredded_at: str | None = None, where: str = "") -> None:
        self.run_id, self.shredded_at, self.where = run_id, shredded_at, where
        when = f" at {shredded_at}" if shredded_at else ""
        at = f" ({where})" if where else ""
        super().__init__(
            f"run {run_id!r} was shredded{when}{at}: its data key is destroyed, so its "
            "payloads are unreadable in every copy (log, snapshots, Kafka, archive), by "
            "design. Its metadata (types, seqs, times) can still be listed and audited; it "
            "cannot be resumed, and no new data key is ever made for it."
        )


class TamperedPayloadError(CorruptEventError, EncryptionError):
    """A sealed payload failed AES-GCM authentication (altered, or moved from another
    run/seq), or an encrypted run's payload was found in clear (a downgrade)."""

    def __init__(
        self, run_id: str, seq: int, kind: str, where: str = "", *, reason: str = ""
    ) -> None:
        CorruptEventError.__init__(
            self,
            run_id,
            seq,
            reason
            or (
                f"the encrypted {kind} payload fails authentication (AES-GCM tag mismatch): "
                "its bytes or the metadata stored next to them were altered, or they were "
                "copied from another run, seq or kind"
            ),
            where,
        )
        self.kind = kind


class KeyStoreMissingError(EncryptionError, ConfigError):
    """An encrypted payload was read, but no key store is configured."""

    def __init__(self, run_id: str, seq: int, key_id: str) -> None:
        self.run_id, self.seq, self.key_id = run_id, seq, key_id
        super().__init__(
            f"run {run_id!r} seq {seq}: the payload is encrypted (data key {key_id!r}) but no "
            "key store is configured. Set AGENTLOG_KEYRING=PATH to the keyring file that "
            "wrote it (or pass its key store in code); nothing was changed."
        )


class NoKeyStoreError(KeyStoreMissingError):
    """A run is to be shredded, but no key store is configured here."""

    def __init__(self, run_id: str) -> None:
        self.run_id, self.seq, self.key_id = run_id, 0, ""
        EncryptionError.__init__(
            self,
            f"cannot shred run {run_id!r}: no key store is configured, and shredding destroys "
            "the run's data key in the key store that encrypted it. Set AGENTLOG_KEYRING=PATH "
            "to that keyring file (or pass keys= to Runtime.open); nothing was changed.",
        )


class NotEncryptedError(EncryptionError, ConfigError):
    """A run recorded without encryption cannot be crypto-shredded."""

    def __init__(self, run_id: str, where: str) -> None:
        self.run_id, self.where = run_id, where
        super().__init__(
            f"cannot shred run {run_id!r}: it was recorded without encryption in {where}, so "
            "its payloads are stored in clear and destroying a key cannot erase them. Nothing "
            "was changed. Erase it by deleting its data from the log and the archive (or let "
            "retention drop it); runs started with a key store (AGENTLOG_KEYRING=PATH, or "
            "keys= in code) can be shredded."
        )


class MissingDataKeyError(EncryptionError):
    """The key store holds no data key for the run (and was never told to shred it)."""

    def __init__(self, run_id: str, where: str) -> None:
        self.run_id, self.where = run_id, where
        super().__init__(
            f"run {run_id!r} has no data key in {where}: that key store did not encrypt this "
            "run. Point AGENTLOG_KEYRING (or the KMS key store's table) at the key store "
            "that wrote the log; nothing was changed."
        )


class WrongKeyError(EncryptionError):
    """The key store's data key for the run is not the one the payload was sealed with."""

    def __init__(self, run_id: str, seq: int, sealed_with: str, have: str, where: str) -> None:
        self.run_id, self.seq, self.sealed_with, self.have = run_id, seq, sealed_with, have
        super().__init__(
            f"run {run_id!r} seq {seq} was sealed with data key {sealed_with!r}, but {where} "
            f"holds data key {have!r} for this run: another key store wrote this log (run "
            "ids can repeat across keyrings). Use the key store that wrote it; nothing was "
            "changed."
        )


class KeyStoreUnavailableError(EncryptionError, BackendUnavailableError):
    """The keyring file or KMS cannot be reached, read or written right now."""


class CorruptKeyringError(EncryptionError):
    """A keyring file that does not parse."""

    def __init__(self, path: str, reason: str) -> None:
        self.path, self.reason = path, reason
        super().__init__(
            f"keyring {path}: {reason}. Restore it from a backup and do not delete it: "
            "without it every run it encrypted is unreadable."
        )


class KekDisabledError(EncryptionError):
    """The key-encryption key is disabled or pending deletion in KMS."""

    def __init__(self, key_id: str, state: str) -> None:
        self.key_id, self.state = key_id, state
        super().__init__(
            f"the key-encryption key {key_id!r} is {state} in KMS, so no data key can be "
            f"wrapped or unwrapped. Enable it (aws kms enable-key --key-id {key_id}) or "
            "cancel its deletion; nothing was written."
        )


class UnknownKekError(EncryptionError, ConfigError):
    """No key-encryption key by that id (a KMS key, or a KEK version of a keyring)."""

    def __init__(self, key_id: str, where: str) -> None:
        self.key_id, self.where = key_id, where
        super().__init__(
            f"{where} has no key-encryption key {key_id!r}. Check the key id (KMS: key id, "
            "ARN or alias, and the region), or use the keyring file that wrapped this run's "
            "key; nothing was written."
        )


class KafkaAuthError(BackendUnavailableError):
    """A Kafka listener refused this client: credentials, certificate or protocol.

    Wrong SASL credentials, a broker certificate the client does not trust, a
    client certificate the listener wants and did not get, or a security
    protocol that is not the listener's (plaintext on a TLS port). Retrying
    does not help until the configuration changes.

    Attributes:
        listener: the bootstrap address, security protocol and SASL
            mechanism, as the message names them (never the password).
    """

    retryable = False

    def __init__(self, listener: str, problem: str, fix: str) -> None:
        self.listener = listener
        super().__init__(f"Kafka listener {listener}: {problem}. {fix}")


class PostgresAuthError(BackendUnavailableError):
    """The PostgreSQL server refused the connection: wrong password, unknown
    user or database, or no ``pg_hba.conf`` entry for this client. Retrying
    does not help until the URL (or the server's configuration) changes."""

    retryable = False


class ThreadConflictError(ConflictError):
    """Another process wrote the LangGraph thread since this saver last read it.

    Nothing was written: the thread's history does not fork. The other
    process's checkpoints stand; this saver refuses further writes to the
    thread until LangGraph reads it again (the next ``invoke`` does), and then
    goes on from them.
    """

    def __init__(self, thread_id: str, why: str) -> None:
        EventLogError.__init__(
            self,
            f"thread {thread_id!r}: {why}; nothing was written. Another process writes this "
            "thread: stop writing it here, or invoke the graph again on the thread to "
            "continue from that process's latest checkpoint (one writer per thread).",
        )
        self.run_id, self.thread_id = thread_id, thread_id
        self.expected, self.got = 0, 0


class ChannelNotSerializableError(NotSerializableError):
    """A channel value (or a pending write) that the saver's serializer refuses."""

    def __init__(self, thread_id: str, channel: str, value_type: str, why: str) -> None:
        EventLogError.__init__(
            self,
            f"thread {thread_id!r}: cannot store channel {channel!r}: a {value_type} "
            f"({why}). Nothing of this checkpoint was written. Store builtin values, or "
            "allow its class: AgentlogSaver.from_url(url, allowed=[YourStateClass]) allows "
            "your graph's state class and the classes its fields name; see docs/langgraph.md.",
        )
        self.thread_id, self.path, self.value_type = thread_id, channel, value_type


class ForbiddenTypeError(EventLogError):
    """Stored LangGraph bytes name a class the saver's serializer does not allow.

    Decoding stopped before anything was imported or constructed (the
    attack in CVE-2026-28277 stores such a class path). The bytes stay as
    they are.
    """

    def __init__(self, what: str, where: str = "") -> None:
        at = f" in {where}" if where else ""
        super().__init__(
            f"refused to decode stored bytes{at}: they name {what}, which is not on the "
            "serializer's allow-list, so nothing was imported. If you stored that type "
            "yourself, allow it: AgentlogSaver.from_url(url, allowed=[YourStateClass]) "
            "or StrictSerializer(allowed=[(module, name)]); see docs/langgraph.md."
        )
        self.what, self.where = what, where


class ReplayError(AgentlogError):
    """Events that cannot be folded into a run state."""


class WorkflowError(AgentlogError):
    """An error raised by the durable runtime."""


class WorkflowDefinitionError(WorkflowError):
    """A workflow or step declared wrongly (caught when it is defined)."""


class UnknownWorkflowError(WorkflowError):
    """A run's workflow is not registered with this runtime.

    Attributes:
        workflow: the name the run was recorded under.
        registered: the names this runtime knows, sorted.
    """

    def __init__(self, workflow: str, registered: Iterable[str], fix: str) -> None:
        self.workflow, self.registered = workflow, sorted(registered)
        super().__init__(
            f"workflow {workflow!r} is not registered with this runtime (registered: "
            f"{self.registered}); {fix}"
        )


class RunExistsError(WorkflowError):
    """A run with this id exists and belongs to another workflow."""


class RunNotWaitingError(WorkflowError):
    """resume() of a run that is not parked on an interrupt."""


class RunNotFailedError(WorkflowError):
    """retry() of a run that has not failed."""


class NoLiveWriterError(WorkflowError):
    """wait() on a running run whose writer is gone: nothing is driving it.

    Call ``Runtime.recover()`` (or ``agentlog recover``) to continue it here.
    """

    retryable = True


class InvalidTimerError(WorkflowError, ValueError):
    """A sleep or interrupt timeout that is negative, not finite, or absurdly long.

    Raised in the step at the call; nothing is recorded for the timer.
    """


class InterruptTimeoutError(WorkflowError):
    """Raised in a step by ``ctx.interrupt(..., timeout=...)`` when no answer came.

    Catch it in the step to take another path, or pass ``default=``.
    """

    def __init__(self, run_id: str, interrupt: str, payload: object) -> None:
        super().__init__(
            f"run {run_id!r}: interrupt {interrupt} ({payload!r}) timed out with no answer"
        )
        self.run_id, self.interrupt, self.payload = run_id, interrupt, payload


class InvalidScheduleError(WorkflowError, ValueError):
    """A schedule's cron expression does not parse."""


class InvalidResumeValueError(WorkflowError):
    """A resume value that does not fit what the interrupt said it expects."""


class VersionMismatchError(WorkflowError):
    """The run was recorded under another workflow version or state schema."""


class UnknownStepError(WorkflowError):
    """A step routed to a step name the workflow does not have."""


class NondeterminismError(WorkflowError):
    """A re-executed step asked for a different task than its history records.

    Typically a task was renamed, reordered or removed under a running run.
    Running the new task would repeat work the old one already did (a charge,
    an email), and handing it the recorded result of another task would be
    wrong, so nothing runs; the run stays resumable once the code matches again.

    Attributes:
        run_id, step: where.
        position: the step's task call, from 0, in the order the step makes them.
        recorded: the task the history has there (its name).
        requested: the task the code asked for (its name).
    """

    def __init__(
        self, run_id: str, step: str, position: int, recorded: str, requested: str
    ) -> None:
        self.run_id, self.step, self.position = run_id, step, position
        self.recorded, self.requested = recorded, requested
        super().__init__(
            f"run {run_id!r}, step {step!r}: task call #{position + 1} is {requested!r}, but "
            f"the run's history has {recorded!r} there (it may already have run). The code "
            "changed under a running run: restore the recorded task names and order, then "
            "recover or resume the run; or ship the change as a new workflow version (a run "
            "recorded by the old one then needs a registered migration). `agentlog verify` "
            "lists the runs a change breaks before it ships. Nothing was run or recorded."
        )


class TaskFailedError(WorkflowError):
    """A task whose retry policy gave up is called again in the same run attempt.

    Raised in the step, in place of running the task: a retry of the step (or
    its re-execution after an interrupt) never runs a task whose failure is
    recorded as final (a ``non_retryable`` error, or its ``max_attempts``
    used). The original exception is not kept across processes, so this error
    carries its recorded type and message. ``Runtime.retry`` gives the task a
    fresh set of attempts.

    Attributes:
        run_id, step, task, key: which call (``key`` is its idempotency key).
        error: the recorded failure, ``"Type: message"``.
        attempts: how often the task ran in this run attempt.
    """

    def __init__(
        self, run_id: str, step: str, task: str, key: str, error: str, attempts: int
    ) -> None:
        self.run_id, self.step, self.task, self.key = run_id, step, task, key
        self.error, self.attempts = error, attempts
        super().__init__(
            f"run {run_id!r}, step {step!r}: task {task!r} failed for good after {attempts} "
            f"attempt(s) ({error}); its retry policy gave up, so it is not run again in this "
            f"run attempt. Fix the cause, then retry the run (`agentlog retry {run_id}`), "
            "which gives the task a fresh set of attempts."
        )


class InvalidRouteError(WorkflowError):
    """A step routed to the same step more than once in one superstep."""


class InvalidWriteError(WorkflowError):
    """A step wrote a state key the workflow's schema does not declare."""


class RunFailedError(WorkflowError):
    """result() of a run that failed or was cancelled."""


class CheckpointError(AgentlogError):
    """An error raised by the LangGraph saver (:mod:`agentlog.langgraph`)."""


class MissingThreadIdError(CheckpointError, ConfigError):
    """A LangGraph config without ``configurable.thread_id``."""

    def __init__(self, method: str) -> None:
        super().__init__(
            f"{method}: the config has no configurable.thread_id; pass "
            '{"configurable": {"thread_id": "..."}} (one thread id per conversation).'
        )


class UnknownCheckpointError(CheckpointError):
    """A checkpoint_id that the thread (in that namespace) does not have."""

    def __init__(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, doing: str) -> None:
        ns = f" namespace {checkpoint_ns!r}" if checkpoint_ns else ""
        super().__init__(
            f"thread {thread_id!r}{ns} has no checkpoint {checkpoint_id!r} ({doing}); "
            "nothing was written. List its checkpoints with saver.list(config) or "
            "`agentlog show THREAD`, and pass one of those ids (or none for the latest)."
        )
        self.thread_id, self.checkpoint_ns, self.checkpoint_id = (
            thread_id,
            checkpoint_ns,
            checkpoint_id,
        )


class ArchiveError(AgentlogError):
    """An error raised by the archive."""
