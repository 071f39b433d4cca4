"""Which parts of a payload are encrypted, and how a stored payload carries them.

With a :class:`~agentlog.crypto.PayloadCipher` configured on a log, each
event's *content* fields (:data:`CONTENT_FIELDS`: inputs, writes, task
results, errors, interrupt payloads, answers, outputs, checkpoints) are
packed together and sealed with the run's data key; the *metadata* fields
(step names, seqs, task names and keys, attempts, durations, epochs, due
times) stay in clear, so a shredded run can still be listed, counted and
audited, and SQL can still group tasks by name. A stored payload is then
``{metadata..., "_sealed": <sealed content>}`` (the codec's ``store_fields``
and ``load_fields``); the seal binds the run id,
the seq, the kind (``event``, ``snapshot`` or ``command``) and the event
type, so a sealed blob moved anywhere else fails its tag.

Reading: a blob whose key this process cannot have (no key store, the run
shredded, a key store that never held the run's key) does not fail the read.
The event comes back with its metadata, its content fields None, the
sealed blob in :attr:`Event.sealed` and the reason in
:attr:`Event.unreadable`; folding it into a state raises that reason
(:func:`~agentlog.projector.fold.apply`). So listing, auditing, SQL and the
archiver work on what they may see, and nothing ever replays into a wrong
state. A tampered blob, or a key store that does not answer, raises at once.
"""

from __future__ import annotations

from agentlog.crypto import PayloadCipher, PayloadKind, open_payload
from agentlog.errors import (
    KeyStoreMissingError,
    MissingDataKeyError,
    ShreddedError,
    WrongKeyError,
)

__all__ = ["CANNOT_HAVE", "CONTENT_FIELDS", "SEALED_KEY", "open_blob", "open_payload", "seal_blob"]

#: Payload fields that carry what a run computed or was given (sealed when
#: encryption is on). Every other field is metadata and stays in clear.
CONTENT_FIELDS = frozenset(
    {
        "input",  # RunStarted
        "writes",  # StepCompleted, WritesSaved
        "result",  # TaskCompleted
        "error",  # TaskFailed, StepFailed, RunFailed
        "payload",  # InterruptRaised
        "value",  # ResumeReceived
        "answers",  # ResumeReceived
        "data",  # ProgressReported
        "output",  # RunCompleted
        "reason",  # RunCancelled, RunRetried, CheckpointsRemoved
        "values",  # RunMigrated, CheckpointSaved
        "checkpoint",  # CheckpointSaved
        "metadata",  # CheckpointSaved
        "metadata_blob",  # CheckpointSaved
        "extra",  # CheckpointSaved
    }
)

#: The stored key of the sealed content (never a field name: fields are identifiers).
SEALED_KEY = "_sealed"

#: What a reader may lack without the read failing (see the module docstring).
CANNOT_HAVE = (KeyStoreMissingError, ShreddedError, MissingDataKeyError, WrongKeyError)


def seal_blob(
    cipher: PayloadCipher | None, run_id: str, seq: int, kind: PayloadKind, raw: bytes
) -> bytes:
    """``raw`` sealed whole (a snapshot), or as it is without a cipher."""
    return raw if cipher is None else cipher.seal(run_id, seq, kind, raw)


def open_blob(
    cipher: PayloadCipher | None, run_id: str, seq: int, kind: PayloadKind, raw: bytes
) -> bytes:
    """The plaintext of a blob sealed by :func:`seal_blob` (plain blobs pass through).

    Raises:
        EncryptionError: ShreddedError, KeyStoreMissingError and the others.
    """
    return open_payload(cipher, run_id, seq, kind, raw)
