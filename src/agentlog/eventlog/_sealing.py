"""Which parts of a payload are encrypted, and how a stored payload carries them.

With a :class:`~agentlog.crypto.PayloadCipher` configured on a log, each
event's *content* fields (:data:`CONTENT_FIELDS`: inputs, writes, task
results, errors, interrupt payloads, answers, outputs, checkpoints) are
packed together and sealed with the run's data key; the *metadata* fields
(step names, seqs, task names and keys, attempts, durations, epochs, due
times) stay in clear, so a shredded run can still be listed, counted and
audited, and SQL can still group tasks by name. A branch started by
``Send`` carries its input in a metadata field (``StepCompleted.goto``,
``SuperstepCommitted.next``): that input is content, so such a list is
sealed whole, and stays in clear with each input left out (the step names
of the branches remain visible). A stored payload is then
``{metadata..., "_sealed": <sealed content>}`` (:func:`store_fields` and
:func:`load_fields`); the seal binds the run id, the seq, the kind
(``event``, ``snapshot`` or ``command``), the event type and the metadata
stored next to it, so a sealed blob moved anywhere else, or a step name,
task key or attempt edited beside it, fails its tag.

Downgrades: a run whose key store holds a data key (or a tombstone) must be
sealed from the seq its key was made at on (:attr:`WrappedKey.sealed_from`).
Its content found in clear there, or a clear snapshot or command, is a
:class:`~agentlog.errors.TamperedPayloadError`: whoever can write the log can
strip every mark of encryption from it, but not the key from the key store.

Reading: a blob whose key this process cannot have (no key store, the run
shredded, a key store that never held the run's key) does not fail the read.
The event comes back with its metadata, its content fields None, the
sealed blob in :attr:`Event.sealed` and the reason in
:attr:`Event.unreadable`; folding it into a state raises that reason
(:func:`~agentlog.projector._fold.apply`). So listing, auditing, SQL and the
archiver work on what they may see, and nothing ever replays into a wrong
state. A tampered blob, or a key store that does not answer, raises at once.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Sequence
from typing import Any

from agentlog.crypto import PayloadCipher, PayloadKind, is_sealed, open_payload
from agentlog.crypto._aead import (
    ENVELOPE_VERSION,
    SEND_INPUTS_VERSION,
    BatchSealer,
    envelope_version,
)
from agentlog.errors import (
    CorruptEventError,
    KeyStoreMissingError,
    MissingDataKeyError,
    ShreddedError,
    WrongKeyError,
)
from agentlog.eventlog._field_readers import FieldReader, SplitReader, fields_reader, split_reader
from agentlog.eventlog._packing import (
    PACK_ERRORS,
    pack,
    pack_pair,
    thread_packer,
    trim_packer,
    unpack,
)
from agentlog.eventlog.events import EVENT_TYPES, Event, EventData

__all__ = [
    "CANNOT_HAVE",
    "CONTENT_FIELDS",
    "SEALED_KEY",
    "load_fields",
    "open_blob",
    "open_payload",
    "seal_blob",
    "store_fields",
    "stored_payload",
    "stored_payloads",
]

#: Payload fields that carry what a run computed or was given (sealed when
#: encryption is on). Every other field is metadata and stays in clear.
CONTENT_FIELDS = frozenset(
    {
        "input",  # RunStarted
        "writes",  # StepCompleted, WritesSaved
        "result",  # TaskCompleted
        "error",  # TaskFailed, StepFailed, RunFailed
        "failure",  # TaskFailed, RunFailed
        "payload",  # InterruptRaised
        "value",  # ResumeReceived, MessageSent, ValuePublished
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

#: Event types with at least one content field: stored sealed whenever their
#: run has a data key. The others carry metadata only and are stored in clear.
_HAS_CONTENT = {
    name: any(f.name in CONTENT_FIELDS for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    for name, cls in EVENT_TYPES.items()
}

#: Per event type: its fields that list branches (:data:`~agentlog.eventlog.events.Branch`),
#: where a branch started by ``Send`` carries its input.
_BRANCH_FIELDS = {
    name: tuple(f.name for f in dataclasses.fields(cls) if str(f.type) == "list[Branch]")  # type: ignore[arg-type]
    for name, cls in EVENT_TYPES.items()
}

#: The stored key of the sealed content (never a field name: fields are identifiers).
SEALED_KEY = "_sealed"

_PACKED_SEALED_KEY = pack(SEALED_KEY)
_BIN8, _BIN16, _BIN32 = struct.Struct(">BB"), struct.Struct(">BH"), struct.Struct(">BI")
#: The first byte of a fixmap of n + 1 entries, by n.
_GROWN_FIXMAP = [bytes((0x80 | (n + 1),)) for n in range(15)]

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


def _sealed_parts(
    cipher: PayloadCipher | None,
    fields: dict[str, Any],
    run_id: str,
    seq: int,
    event_type: str,
    kind: PayloadKind,
    sealed: bytes | None,
) -> tuple[dict[str, Any], bytes, bytes] | None:
    """``(clear fields, their msgpack, sealed blob)``, or None to store ``fields`` as they are.

    The clear fields' msgpack is what the seal binds as metadata.
    """
    if sealed is None and cipher is None:
        return None
    clear: dict[str, Any] = {}
    content: dict[str, Any] = {}
    for name, value in fields.items():
        if name in CONTENT_FIELDS:
            content[name] = value
        else:
            clear[name] = value
    branches = _BRANCH_FIELDS.get(event_type, ())
    version = ENVELOPE_VERSION
    if sealed is None:
        version = _seal_send_inputs(clear, content, branches)
    elif envelope_version(sealed) == SEND_INPUTS_VERSION:  # stored as it was bound
        _seal_send_inputs(clear, content, branches)
    metadata = pack(clear, path=event_type)
    if sealed is None:
        assert cipher is not None
        if not content:
            return None  # metadata only: nothing to seal
        raw = pack(content, path=event_type)
        extra = event_type.encode("utf-8")
        sealed = cipher.seal(run_id, seq, kind, raw, extra, metadata, version)
    return clear, metadata, sealed


def store_fields(
    cipher: PayloadCipher | None,
    fields: dict[str, Any],
    run_id: str,
    seq: int,
    event_type: str,
    *,
    kind: PayloadKind = "event",
    sealed: bytes | None = None,
) -> dict[str, Any]:
    """The fields to store: content sealed under ``_sealed``, metadata in clear.

    The metadata is bound to the seal (see the module docstring). ``sealed``
    is the blob an event was read with: stored again as it is (the archive
    copies ciphertext and never needs the key), next to the same metadata.
    Without a cipher and without ``sealed``: all in clear.
    """
    parts = _sealed_parts(cipher, fields, run_id, seq, event_type, kind, sealed)
    if parts is None:
        return fields
    clear, _, blob = parts
    return {**clear, SEALED_KEY: blob}


def stored_payload(
    cipher: PayloadCipher | None,
    fields: dict[str, Any],
    run_id: str,
    seq: int,
    event_type: str,
    *,
    sealed: bytes | None = None,
) -> bytes:
    """``pack(store_fields(...))`` of an event, built from the metadata's msgpack
    the seal already made (the per-event path of every backend's append)."""
    parts = _sealed_parts(cipher, fields, run_id, seq, event_type, "event", sealed)
    if parts is None:
        return pack(fields, path=event_type)
    clear, metadata, blob = parts
    return _with_sealed(clear, metadata, (blob, b"", b""))


def stored_payloads(cipher: PayloadCipher | None, events: Sequence[Event]) -> list[bytes]:
    """:func:`stored_payload` of each event of one append, in order.

    Why a batch: sealing a payload costs little more than its AES-GCM, so
    what events of a batch share is done once per run, not once per event
    (the run's key, the envelope header, the nonces: see
    :class:`~agentlog.crypto._aead.BatchSealer`), and the content and
    metadata are read straight from the payload object by its class's
    compiled readers (:mod:`~agentlog.eventlog._field_readers`) and packed
    by the thread's msgpack Packer. The bytes are those
    :func:`stored_payload` makes (a fresh nonce each).
    """
    if cipher is None:
        return _plain_payloads(events)
    out: list[bytes] = []
    add = out.append
    sealer: BatchSealer | None = None
    plans = _PLANS
    pack_part = thread_packer().pack  # metadata and content alike
    bin8, bin16, grown_fixmap, sealed_key = (
        _BIN8.pack,
        _BIN16.pack,
        _GROWN_FIXMAP,
        _PACKED_SEALED_KEY,
    )
    largest = 0  # the largest metadata the thread's Packer wrote (see trim_packer)
    for event in events:
        data = event.data
        plan = plans.get(type(data)) or _plan(type(data))
        _, read_apart, branch_names, extra, sealable = plan
        if event.sealed is not None or not sealable:
            # stored as read, or metadata only: the one-event path
            add(
                stored_payload(
                    cipher, data.to_dict(), event.run_id, event.seq, data.type, sealed=event.sealed
                )
            )
            continue
        clear, content = read_apart(data)
        version = ENVELOPE_VERSION
        if branch_names:
            version = _seal_send_inputs(clear, content, branch_names)
            if not content:  # branches without a Send input, and nothing else to seal
                add(pack(clear, path=data.type))
                continue
        try:  # pack_pair, inlined
            metadata = pack_part(clear)
            raw = pack_part(content)
        except PACK_ERRORS:
            metadata, raw = pack_pair(clear, content, path=data.type)  # names the bad part
        if sealer is None or sealer.run_id != event.run_id:
            sealer = cipher.sealer(event.run_id, event.seq, "event", len(events))
        header, nonce, ciphertext = sealer.seal_parts(event.seq, raw, extra, metadata, version)
        size = len(header) + len(nonce) + len(ciphertext)
        if len(clear) < 15 and size < 0x10000:  # _with_sealed's common case, inlined
            bin_head = bin8(0xC4, size) if size < 0x100 else bin16(0xC5, size)
            grown = grown_fixmap[metadata[0] & 0x0F]
            add(b"".join((grown, metadata[1:], sealed_key, bin_head, header, nonce, ciphertext)))
        else:
            add(_with_sealed(clear, metadata, (header, nonce, ciphertext)))
        largest = max(largest, len(metadata), len(raw))
    trim_packer(largest)
    return out


def _plain_payloads(events: Sequence[Event]) -> list[bytes]:
    """:func:`stored_payloads` without a cipher: each payload's map packed (or the
    writer's bytes, when it packed them: :attr:`Event.packed`).

    The field reader is looked up once for each run of events of one class
    (a batch is mostly one class: task results), not once an event.
    """
    out: list[bytes] = []
    add = out.append
    pack_fields = thread_packer().pack
    largest = 0  # the largest payload the thread's Packer wrote (see trim_packer)
    cls: type[EventData] | None = None
    read: FieldReader | None = None
    for event in events:
        data = event.data
        if event.sealed is not None:  # read sealed, stored as it was read
            add(
                stored_payload(
                    None, data.to_dict(), event.run_id, event.seq, data.type, sealed=event.sealed
                )
            )
            continue
        packed = event.packed
        if packed is not None:
            add(packed)
            continue
        if type(data) is not cls:
            cls = type(data)
            read = (_PLANS.get(cls) or _plan(cls))[0]
        fields = read(data)  # type: ignore[misc]  # set with cls
        try:
            raw = pack_fields(fields)
        except PACK_ERRORS:
            raw = pack(fields, path=data.type)  # raises naming the bad part
        add(raw)
        if len(raw) > largest:
            largest = len(raw)
    trim_packer(largest)
    return out


def _seal_send_inputs(
    clear: dict[str, Any], content: dict[str, Any], branch_fields: tuple[str, ...]
) -> int:
    """Move each branch list that holds a ``Send`` input from ``clear`` to ``content``;
    return the envelope version to seal with (:data:`SEND_INPUTS_VERSION` if any moved).

    Why: a Send input is what a run was given, like a step's writes, but it
    rides in a list of branches that is otherwise metadata. The list is
    sealed whole; ``clear`` keeps it with each input left out, so the step
    names stay visible (and authenticated) to a reader without the key.
    Reading merges the sealed list back over the clear one. The version
    tells a copy, which has the blob but not the key, that the clear list
    was stored without its inputs (events sealed before kept them in clear).
    """
    version = ENVELOPE_VERSION
    for name in branch_fields:
        branches = clear.get(name)
        if not isinstance(branches, list) or not any(
            isinstance(branch, dict) and "input" in branch for branch in branches
        ):
            continue
        version = SEND_INPUTS_VERSION
        content[name] = branches
        clear[name] = [
            {k: v for k, v in branch.items() if k != "input"}
            if isinstance(branch, dict)
            else branch
            for branch in branches
        ]
    return version


#: How a batch stores one payload class: its reader of every field, and of its
#: metadata and content apart (:func:`~agentlog.eventlog._field_readers.split_reader`),
#: its branch fields, its type name as bound, and whether it has anything to seal.
_Plan = tuple[FieldReader, SplitReader, tuple[str, ...], bytes, bool]
_PLANS: dict[type[EventData], _Plan] = {}


def _plan(cls: type[EventData]) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        branches = _BRANCH_FIELDS.get(cls.type, ())
        sealable = any(n in CONTENT_FIELDS for n in names) or bool(branches)
        plan = _PLANS[cls] = (
            fields_reader(cls),
            split_reader(cls, CONTENT_FIELDS),
            branches,
            cls.type.encode("utf-8"),
            sealable,
        )
    return plan


def _with_sealed(clear: dict[str, Any], metadata: bytes, blob: tuple[bytes, ...]) -> bytes:
    """``pack({**clear, "_sealed": b"".join(blob)})``, reusing ``metadata``
    (``pack(clear)``) and copying the blob's parts once."""
    if len(clear) >= 15:  # not a fixmap before and after: let msgpack write the header
        return pack({**clear, SEALED_KEY: b"".join(blob)})
    # A fixmap's first byte is 0x80 | its size: one more entry, appended at the end,
    # its value a msgpack bin (0xc4, 0xc5, 0xc6: 1, 2 or 4 length bytes).
    header, nonce, ciphertext = blob
    size = len(header) + len(nonce) + len(ciphertext)
    if size < 0x100:
        head = _BIN8.pack(0xC4, size)
    elif size < 0x10000:
        head = _BIN16.pack(0xC5, size)
    else:
        head = _BIN32.pack(0xC6, size)
    grown = _GROWN_FIXMAP[metadata[0] & 0x0F]
    return b"".join((grown, metadata[1:], _PACKED_SEALED_KEY, head, header, nonce, ciphertext))


def load_fields(
    cipher: PayloadCipher | None,
    fields: dict[str, Any],
    run_id: str | None,
    seq: int | None,
    event_type: str,
    *,
    kind: PayloadKind = "event",
    where: str = "",
) -> tuple[dict[str, Any], bytes | None, Exception | None]:
    """Stored fields opened: ``(fields, the sealed blob or None, why unreadable or None)``.

    Raises:
        CorruptEventError: the sealed content is not a blob or does not decode.
        TamperedPayloadError: it fails its tag (altered, moved from elsewhere,
            or its metadata edited), or it is in clear while its run's key
            store says the run is sealed at this seq.
        KeyStoreUnavailableError: the key store does not answer.
    """
    blob = fields.get(SEALED_KEY)
    if blob is None:
        if (
            cipher is not None
            and run_id is not None
            and seq is not None
            and _HAS_CONTENT.get(event_type, True)
        ):
            cipher.refuse_clear(run_id, seq, kind)
        return fields, None, None
    if not isinstance(blob, bytes) or not is_sealed(blob) or run_id is None or seq is None:
        raise CorruptEventError(run_id, seq, "the sealed content is not an encrypted blob", where)
    clear = {k: v for k, v in fields.items() if k != SEALED_KEY}
    try:
        plain = open_payload(
            cipher,
            run_id,
            seq,
            kind,
            blob,
            event_type.encode("utf-8"),
            pack(clear, path=event_type),  # as stored (upcasters run after this)
        )
    except CANNOT_HAVE as exc:
        return clear, blob, exc
    try:
        content = unpack(plain)
    except ValueError as exc:
        raise CorruptEventError(
            run_id, seq, f"sealed content does not decode: {exc}", where
        ) from exc
    if not isinstance(content, dict):
        raise CorruptEventError(run_id, seq, "sealed content is not a map", where)
    return {**clear, **content}, blob, None
