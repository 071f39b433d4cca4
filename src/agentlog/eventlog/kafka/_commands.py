"""The records of the commands topic (``<name>.commands``, partitioned layout).

A client that does not own a run (any process that is not the group member
assigned the run's partition) asks the owner to act by producing a command:
key = the run id (UTF-8), partition = :func:`~agentlog.eventlog.kafka._admin.partition_for`,
value = a msgpack map ``{run_id, kind, type, schema_v, payload}`` where
``payload`` is the command's :class:`~agentlog.eventlog.events.EventData`
encoded exactly like an event's payload (so upcasters apply to it too; its
content sealed with the run's data key when the log has a cipher).
The owner hands it out as a :class:`~agentlog.eventlog._base.Command` whose
``ref`` is ``(partition, offset)``.

The owner answers each command on the same partition, after it: a *reply*
record, key = the run id, value = a msgpack map ``{reply_to, applied}``
(``reply_to``: the command's offset; ``applied``: False when it was refused;
a queue admitter's reply to an ask also carries ``granted_at`` and
``expires_at``, see :mod:`~agentlog.eventlog.kafka._queue_grants`).
A reply goes in the transaction that records the command's effect (or, for a
refused command, that commits its offset), so a client that reads the reply
(``read_committed``) then reads the effect too. The owners' own consumer
skips replies.
"""

from __future__ import annotations

from typing import Any

from agentlog.crypto import PayloadCipher
from agentlog.errors import ConfigError, CorruptEventError
from agentlog.eventlog._base import COMMAND_KINDS, Command, check_run_id
from agentlog.eventlog.codec import decode_stored_payload, pack, store_fields, unpack
from agentlog.eventlog.events import SCHEMA_V

__all__ = [
    "command_ref",
    "decode_answer",
    "decode_command",
    "decode_reply",
    "encode_command",
    "encode_reply",
]


def encode_command(command: Command, cipher: PayloadCipher | None = None) -> bytes:
    """The commands-topic value of ``command``.

    Raises:
        ConfigError: an unknown kind or a bad run id.
        NotSerializableError: a payload msgpack cannot carry.
    """
    check_run_id(command.run_id)
    if command.kind not in COMMAND_KINDS:
        raise ConfigError(f"command kind must be one of {COMMAND_KINDS}, not {command.kind!r}")
    return pack(
        {
            "run_id": command.run_id,
            "kind": command.kind,
            "type": command.data.type,
            "schema_v": SCHEMA_V,
            "payload": pack(
                store_fields(
                    cipher,
                    command.data.to_dict(),
                    command.run_id,
                    0,
                    command.data.type,
                    kind="command",
                ),
                path="command",
            ),
        },
        path="command",
    )


def decode_command(
    raw: bytes, ref: tuple[int, int], where: str, cipher: PayloadCipher | None = None
) -> Command:
    """Rebuild a command record (its sealed content opened with ``cipher``).

    Raises:
        CorruptEventError: bytes that do not decode into a command; names where.
        EncryptionError: sealed content this process cannot open: a command
            must be read whole to be applied.
    """
    try:
        value = unpack(raw)
    except ValueError as exc:
        raise CorruptEventError(None, None, f"command does not decode: {exc}", where) from exc
    if not isinstance(value, dict):
        raise CorruptEventError(None, None, "command is not a map", where)
    run_id, kind, event_type = value.get("run_id"), value.get("kind"), value.get("type")
    schema_v, payload = value.get("schema_v"), value.get("payload")
    if not (
        isinstance(run_id, str)
        and kind in COMMAND_KINDS
        and isinstance(event_type, str)
        and isinstance(schema_v, int)
        and isinstance(payload, bytes)
    ):
        raise CorruptEventError(
            run_id if isinstance(run_id, str) else None, None, "command fields do not fit", where
        )
    data, _, unreadable = decode_stored_payload(
        event_type, schema_v, payload, cipher, run_id=run_id, seq=0, kind="command", where=where
    )
    if unreadable is not None:
        raise unreadable
    return Command(run_id, str(kind), data, ref)


def encode_reply(offset: int, applied: bool) -> bytes:
    """The commands-topic value of the owner's answer to the command at ``offset``."""
    return pack({"reply_to": offset, "applied": applied}, path="reply")


def decode_reply(raw: bytes | None) -> tuple[int, bool] | None:
    """``(offset of the command, applied)`` if ``raw`` is a reply, else None (a command)."""
    answer = decode_answer(raw)
    return None if answer is None else (answer[0], answer[1])


def decode_answer(raw: bytes | None) -> tuple[int, bool, dict[str, Any]] | None:
    """As :func:`decode_reply`, with the reply's whole map (a queue grant's times)."""
    try:
        value = unpack(raw or b"")
    except ValueError:
        return None
    if not isinstance(value, dict) or "reply_to" not in value:
        return None
    offset, applied = value.get("reply_to"), value.get("applied")
    if not isinstance(offset, int) or not isinstance(applied, bool):
        return None
    return offset, applied, value


def command_ref(command: Command) -> tuple[int, int]:
    """The ``(partition, offset)`` of a command this log sent or handed out.

    Raises:
        ConfigError: the command did not come from this Kafka log.
    """
    ref = command.ref
    if not (isinstance(ref, tuple) and len(ref) == 2 and all(isinstance(x, int) for x in ref)):
        raise ConfigError(f"command {command!r} was not sent or taken by a Kafka log")
    return ref[0], ref[1]
