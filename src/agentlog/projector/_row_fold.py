"""Folding a SQL log's stored rows without building the events the fold only skims.

A full fold of a long run is mostly ``StepCompleted``,
``SuperstepCommitted`` and ``TaskCompleted`` events, and the fold reads a
few fields of each (a step's branch, step, writes and goto; a commit's
superstep and next steps; a task's key, result and duration), never the
envelope's datetime. Decoding them into payload objects and events
first cost about a third of a full fold's CPU (issue 23 item 8).
:func:`fold_rows` folds those three types straight from each payload's
unpacked map, and decodes every other row as the read path does
(:func:`~agentlog.eventlog._row_format.event_from_row`) and folds it with
:func:`~agentlog.projector._fold.apply`.

It is only a shortcut, never a second set of rules. The rows come from
:meth:`~agentlog.eventlog._indexed.IndexedEventLog.read_rows`, which has
verified each row's checksum and that no seq is missing. A row takes the
shortcut only where decoding it could not have failed: a clear payload at
the current schema version, on a log without a cipher, whose map holds
exactly the class's fields (the optional ``goto`` may be absent) with values
of exactly the types msgpack decodes them to (a branch as a plain string).
Anything else (a ``Send`` branch, a field of the wrong type, a sealed or
corrupt payload) is decoded the slow way, which raises the same typed
``CorruptEventError`` it always did; a fold error is the same ``ReplayError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentlog.crypto import PayloadCipher
from agentlog.errors import ReplayError
from agentlog.eventlog._batch_decode import batch_unpacker
from agentlog.eventlog._row_format import event_from_row
from agentlog.eventlog.events import SCHEMA_V
from agentlog.projector._fold import apply
from agentlog.projector._reducers import REDUCERS, Reducer, replace
from agentlog.projector._state import RunState

__all__ = ["fold_rows"]

_STEP = "StepCompleted"
_COMMIT = "SuperstepCommitted"
_STEP_FIELDS = frozenset({"step", "superstep", "branch", "writes", "goto"})
_COMMIT_FIELDS = frozenset({"superstep", "next"})
_TASK = "TaskCompleted"
_TASK_FIELDS = frozenset({"key", "result", "duration_ms"})


def _str_list(value: Any) -> bool:
    if type(value) is not list:
        return False
    for item in value:  # noqa: SIM110 - a loop: all() and a generator cost two calls a list
        if type(item) is not str:
            return False
    return True


def _commit(state: RunState, fields: Any, table: Mapping[str, Reducer]) -> bool:
    """Fold a SuperstepCommitted from its map; False (nothing changed) if it does not fit."""
    if type(fields) is not dict or fields.keys() != _COMMIT_FIELDS:
        return False
    superstep, next_steps = fields["superstep"], fields["next"]
    if type(superstep) is not int or not (
        # one string, the common next, told without a call
        (type(next_steps) is list and len(next_steps) == 1 and type(next_steps[0]) is str)
        or _str_list(next_steps)
    ):
        return False
    pending, values, names = state.pending, state.values, state.reducers
    for branch in sorted(pending) if len(pending) > 1 else pending:
        _writes(values, names, pending[branch]["writes"], table)
    state.superstep = superstep + 1
    state.next_steps = next_steps  # the map's own list: nothing else holds it
    state.pending = {}
    # the containers a superstep's events fill start empty again; one still
    # empty is kept (a state shares none with another: RunState.copy is deep)
    if state.attempts:
        state.attempts = {}
    if state.resume_values:
        state.resume_values = {}
    if state.branch_tasks:
        state.branch_tasks = {}
    if state.received:
        state.received = {}
    if state.published_calls:
        state.published_calls = []
    return True


def _task(state: RunState, fields: Any) -> bool:
    """Fold a TaskCompleted from its map; False (nothing changed) if it does not fit."""
    if type(fields) is not dict or not fields.keys() <= _TASK_FIELDS:
        return False
    key, duration_ms = fields.get("key"), fields.get("duration_ms", 0.0)
    if type(key) is not str or "result" not in fields or type(duration_ms) not in (float, int):
        return False
    task = state.tasks.setdefault(key, {"name": "", "step": "", "attempts": 1})
    task.update(status="completed", result=fields["result"], duration_ms=duration_ms)
    return True


def _writes(
    values: dict[str, Any], names: dict[str, str], writes: dict[str, Any], table: Any
) -> None:
    """:func:`~agentlog.projector._fold.apply_writes`, with no call for a ``replace``."""
    for key, update in writes.items():
        reducer = table.get(names.get(key, "replace"), replace)
        values[key] = update if reducer is replace else reducer(values.get(key), update)


def fold_rows(
    state: RunState,
    run_id: str,
    rows: Sequence[Any],
    reducers: Mapping[str, Reducer] | None,
    where: str,
    cipher: PayloadCipher | None,
) -> None:
    """Fold the stored rows of ``run_id`` (``seq, type, ts, schema_v,
    writer_epoch, payload, checksum``, checksums verified, seqs in order) into
    ``state`` in place, as ``apply`` of each decoded event would.

    The two commonest types, a step and a commit, are folded in the loop
    itself (no call for either; a full fold is half of each).

    Raises:
        CorruptEventError: a row does not decode (as the read path names it).
        ReplayError: as :func:`~agentlog.projector._fold.apply`.
    """
    table = reducers or REDUCERS
    unpacker = batch_unpacker(rows) if cipher is None else None
    offset, schema, step_fields = 0, SCHEMA_V, _STEP_FIELDS
    for row in rows:
        seq, event_type, _ts, schema_v, _epoch, payload, _sum = row
        if unpacker is not None:
            try:
                fields = unpacker.unpack()
            except Exception:
                unpacker = None
            else:
                offset += len(payload)
                if unpacker.tell() != offset:
                    unpacker = None  # out of step with the rows: the rest go slowly
                elif (
                    schema_v == schema
                    and type(fields) is dict
                    and seq == state.seq + 1
                    and (state.run_id == run_id or not state.run_id)
                ):
                    try:
                        if event_type == _STEP:  # _step, inline
                            size = len(fields)
                            # the step's fields and no other: all five, or all but goto
                            if fields.keys() <= step_fields and (
                                size == 5 or (size == 4 and "goto" not in fields)
                            ):
                                step, superstep = fields["step"], fields["superstep"]
                                branch, writes = fields["branch"], fields["writes"]
                                goto = fields["goto"] if size == 5 else []  # []: its default
                                if (
                                    size == 5
                                    and (  # one string, the common goto, told without a call
                                        type(goto) is not list
                                        or len(goto) != 1
                                        or type(goto[0]) is not str
                                    )
                                    and not _str_list(goto)
                                ):
                                    goto = None
                                if (
                                    goto is not None
                                    and type(step) is str
                                    and type(superstep) is int
                                    and type(branch) is int
                                    and type(writes) is dict
                                ):
                                    state.steps += 1
                                    state.pending[branch] = {
                                        "step": step,
                                        "writes": writes,
                                        "goto": goto,
                                    }
                                    state.run_id, state.seq = run_id, seq
                                    continue
                        elif event_type == _COMMIT:
                            if _commit(state, fields, table):
                                state.run_id, state.seq = run_id, seq
                                continue
                        elif event_type == _TASK and _task(state, fields):
                            state.run_id, state.seq = run_id, seq
                            continue
                    except (TypeError, ValueError, KeyError, AttributeError) as exc:
                        raise ReplayError(
                            f"run {run_id!r} seq {seq}: cannot fold {event_type}: {exc}"
                        ) from exc
        apply(state, event_from_row(run_id, row, where, cipher), reducers)
