"""The records of the commands topic (``<name>.commands``, partitioned layout).

A client that does not own a run (any process that is not the group member
assigned the run's partition) asks the owner to act by producing a command:
key = the run id (UTF-8), partition = :func:`~agentlog.eventlog.kafka.admin.partition_for`,
value = a msgpack map ``{run_id, kind, type, schema_v, payload}`` where
``payload`` is the command's :class:`~agentlog.eventlog.events.EventData`
encoded exactly like an event's payload (so upcasters apply to it too; its
content sealed with the run's data key when the log has a cipher).
The owner hands it out as a :class:`~agentlog.eventlog.base.Command` whose
``ref`` is ``(partition, offset)``.
"""

from __future__ import annotations

from agentlog.crypto import PayloadCipher
from agentlog.errors import ConfigError, CorruptEventError
from agentlog.eventlog.base import COMMAND_KINDS, Command, check_run_id
from agentlog.eventlog.codec import decode_stored_payload, pack, store_fields, unpack
from agentlog.eventlog.events import SCHEMA_V

__all__ = ["decode_command", "encode_command"]


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
