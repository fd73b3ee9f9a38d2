"""The plain-Python packer writes exactly what msgpack writes, and refuses what it cannot."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from distea.tracer.minipack import Unpackable, packb

SCALARS = (st.none() | st.booleans()
           | st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1)
           | st.text() | st.binary())
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner) | st.tuples(inner, inner)
    | st.dictionaries(st.text() | st.integers(min_value=-5, max_value=5), inner),
    max_leaves=40,
)


@given(VALUES)
def test_same_bytes_as_msgpack(value: object) -> None:
    assert packb(value) == msgpack.packb(value)


@pytest.mark.parametrize("size", [0, 1, 15, 16, 31, 32, 255, 256, 65535, 65536])
def test_every_length_form(size: int) -> None:
    for value in ("x" * size, b"x" * size, [0] * size, {i: None for i in range(size)}):
        assert packb(value) == msgpack.packb(value)


@pytest.mark.parametrize("value", [
    0, 127, 128, 255, 256, 65535, 65536, (1 << 32) - 1, 1 << 32, (1 << 64) - 1,
    -1, -32, -33, -128, -129, -32768, -32769, -(1 << 31), -(1 << 31) - 1, -(1 << 63),
])
def test_integer_boundaries(value: int) -> None:
    assert packb(value) == msgpack.packb(value)


@pytest.mark.parametrize("value", [1.5, 1 << 64, -(1 << 63) - 1, object(), [1, {2: 0.5}]])
def test_what_it_cannot_pack_is_refused(value: object) -> None:
    with pytest.raises(Unpackable):
        packb(value)
