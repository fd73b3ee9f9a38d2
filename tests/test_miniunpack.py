"""The collector's header reader returns what msgpack returns, and refuses the rest."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from distea.miniunpack import unpackb
from distea.runwriter import RunWriter
from distea.wire import FORMAT_VERSION, WIRE_MAGIC

SCALARS = (st.none() | st.booleans()
           | st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1) | st.text())
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=20), max_leaves=40)


@given(VALUES)
def test_what_msgpack_packs_reads_back_as_msgpack_reads_it(value: object) -> None:
    data = msgpack.packb(value)
    assert unpackb(data) == msgpack.unpackb(data)


@pytest.mark.parametrize("size", [0, 15, 16, 31, 32, 255, 256, 65535, 65536])
def test_every_length_form(size: int) -> None:
    for value in ("é" * size, [7] * size):
        assert unpackb(msgpack.packb(value)) == value


@pytest.mark.parametrize("value", [
    0, 127, 128, 255, 256, 65535, 65536, (1 << 32) - 1, 1 << 32, (1 << 64) - 1,
    -1, -32, -33, -128, -129, -32768, -32769, -(1 << 31), -(1 << 31) - 1, -(1 << 63),
])
def test_integer_boundaries(value: int) -> None:
    assert unpackb(msgpack.packb(value)) == value


@given(st.binary(max_size=40))
def test_any_bytes_are_read_as_msgpack_reads_them_or_refused(data: bytes) -> None:
    """Never a different value, never an error other than ValueError (the collector
    counts a refused header and goes on)."""
    try:
        value = unpackb(data)
    except ValueError:
        return
    assert value == msgpack.unpackb(data)


@pytest.mark.parametrize("data", [
    b"", b"\x94\x02", b"\xa3ab", b"\xcd\x01", b"\x01\x02",  # truncated, or one value too many
    msgpack.packb(1.5), msgpack.packb(b"bin"), msgpack.packb({"k": 1}),  # not in a header
    b"\xa2\xff\xfe",  # not UTF-8
    b"\x91" * 9 + b"\x90",  # nested deeper than any header
])
def test_what_is_not_a_header_value_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        unpackb(data)


def test_the_writer_stores_by_the_header_and_refuses_a_bad_one(tmp_path) -> None:
    writer = RunWriter(tmp_path)
    (tmp_path / "procs").mkdir()
    key = "host:123:456"
    writer._store([WIRE_MAGIC, msgpack.packb([FORMAT_VERSION, key, 0, True]), b"\x90"])
    writer._store([WIRE_MAGIC, msgpack.packb([FORMAT_VERSION, key, 1.5, True]), b"\x90"])
    writer._store([WIRE_MAGIC, b"\x94\x02", b"\x90"])
    assert writer.stats.batches == 1 and writer.stats.rejected == 2
    assert writer.streams[key].final and writer.streams[key].next_seq == 1
    writer._close_logs()
