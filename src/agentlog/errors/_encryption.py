"""Payload encryption's errors (:mod:`agentlog.crypto`): a key store, a data key
or a sealed payload that cannot be used. Never answered with wrong plaintext.
"""

from __future__ import annotations

from agentlog.errors._eventlog import BackendUnavailableError, CorruptEventError
from agentlog.errors._root import ConfigError, EventLogError


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
