"""The event log's errors: conflicts, fencing, leases, unknown or corrupt runs,
values the codec cannot carry, and storage that cannot be reached.
"""

from __future__ import annotations

from agentlog.errors._root import EventLogError


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
