"""Laws of the batched row writer's packing (issue 23, item 9): faster, never other bytes.

* :func:`pack_each` writes exactly :func:`pack`'s bytes (msgpack's, as every
  stored payload so far), and for a value that cannot be stored raises
  exactly :func:`pack`'s error, naming the same part;
* a batch's rows without a cipher are the rows the old writer made: each
  payload's field map (read by ``dataclasses.fields``) packed by msgpack, its
  checksum :func:`row_checksum` of the other columns;
* the compiled field readers give ``to_dict`` of the dataclass's fields.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections import OrderedDict
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, NamedTuple

import ormsgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.errors import NotSerializableError
from agentlog.eventlog._field_readers import split_reader
from agentlog.eventlog._packing import pack, pack_each
from agentlog.eventlog._row_format import event_rows
from agentlog.eventlog._sealing import CONTENT_FIELDS
from agentlog.eventlog.codec import row_checksum
from agentlog.eventlog.events import Event, EventData
from tests.property.test_codec_laws import any_payload, events, values

LAWS = settings(max_examples=200, deadline=None)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Colour(enum.StrEnum):
    RED = "red"


class Size(enum.IntEnum):
    BIG = 3


class Plain(enum.Enum):
    ONE = 1


class Name(str):
    pass


class Count(int):
    pass


class Point(NamedTuple):
    x: int
    y: int


@dataclasses.dataclass
class Box:
    width: int


def _ordered(pairs: dict[str, Any]) -> OrderedDict[str, Any]:
    """An OrderedDict whose order is not its storage's (msgpack packs it by ``items()``)."""
    out = OrderedDict(pairs)
    if out:
        out.move_to_end(next(iter(out)))
    return out


# Values a faster packer might write otherwise: subclasses of builtin types,
# enums, views (memoryviews too), ints past 64 bits, odd floats, long strings and bins, another
# library's extension values (refused).
odd_scalars = (
    st.sampled_from([Colour.RED, Size.BIG, Plain.ONE, Name("n"), Count(7), Point(1, 2), Box(1)])
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([-0.0, math.inf, float("nan"), True, False])
    | st.text(min_size=30, max_size=300)
    | st.binary(min_size=250, max_size=70_000).map(bytes)
    | st.binary(max_size=8).map(bytearray)
    | st.binary(max_size=8).map(memoryview)  # packed as its bytes
    | st.binary(min_size=3, max_size=8).map(lambda b: memoryview(b)[::2])  # strided: refused
    | st.datetimes(timezones=st.none())  # naive: refused
    | st.builds(lambda d: d.date(), st.datetimes())  # a date: refused
    | st.sets(st.integers(), max_size=2)  # refused
    | st.just(ormsgpack.Ext(5, b"x"))  # refused
)
odd_values = st.recursive(
    values | odd_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4).map(_ordered)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4).map(MappingProxyType)
        | st.dictionaries(st.sampled_from([Name("k"), Colour.RED]), inner, max_size=2)
    ),
    max_leaves=16,
)


def _outcome(fn: Any, value: Any) -> tuple[str, Any]:
    try:
        return "bytes", fn(value)
    except NotSerializableError as exc:
        return "refused", (exc.path, str(exc))


@LAWS
@given(st.lists(odd_values, max_size=5))
def test_pack_each_is_pack_of_each(batch: list[Any]) -> None:
    expected = [_outcome(pack, value) for value in batch]
    refused = [what for kind, what in expected if kind == "refused"]
    if refused:
        with pytest.raises(NotSerializableError) as caught:
            pack_each(batch, ["value"] * len(batch))
        assert (caught.value.path, str(caught.value)) == refused[0]
    else:
        assert pack_each(batch, ["value"] * len(batch)) == [raw for _, raw in expected]


def _fields(data: EventData) -> dict[str, Any]:
    return {f.name: getattr(data, f.name) for f in dataclasses.fields(data)}  # type: ignore[arg-type]


def _old_row(event: Event, epoch: int) -> tuple[Any, ...]:
    """The row session 31's writer made of ``event``."""
    us = (event.ts - _EPOCH) // timedelta(microseconds=1)
    row = (
        event.run_id,
        event.seq,
        event.type,
        us,
        event.schema_v,
        epoch,
        pack(_fields(event.data)),
    )
    return (*row, row_checksum(*row))


@LAWS
@given(st.lists(events, min_size=1, max_size=6), st.integers(min_value=0, max_value=2**31))
def test_a_batch_without_a_cipher_is_the_old_writers_rows(batch: list[Event], epoch: int) -> None:
    assert event_rows(batch, epoch, None) == [_old_row(event, epoch) for event in batch]


@LAWS
@given(
    st.lists(
        st.tuples(events, st.none() | st.integers(min_value=0, max_value=3)), min_size=1, max_size=6
    ),
    st.integers(min_value=0, max_value=2**31),
)
def test_each_rows_checksum_covers_its_own_schema_version(
    pairs: list[tuple[Event, int]], epoch: int
) -> None:
    """The checksum head's last two columns (schema version, epoch) are formatted
    once for a run of events of one schema version (session 33): a batch that
    mixes versions still gets each row's own column and checksum."""
    batch = [dataclasses.replace(event, schema_v=version) for event, version in pairs]
    assert event_rows(batch, epoch, None) == [_old_row(event, epoch) for event in batch]


@LAWS
@given(any_payload)
def test_the_compiled_readers_read_the_dataclass_fields(data: EventData) -> None:
    assert data.to_dict() == _fields(data)
    assert list(data.to_dict()) == [f.name for f in dataclasses.fields(data)]  # type: ignore[arg-type]
    clear, content = split_reader(type(data), CONTENT_FIELDS)(data)
    assert {**clear, **content} == _fields(data)
    assert not clear.keys() & CONTENT_FIELDS and content.keys() <= CONTENT_FIELDS
