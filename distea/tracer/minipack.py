"""A small msgpack packer in plain Python, for a process's first few batches.

Importing ``msgpack`` (its C extension, with ``datetime``, ``struct`` and
``collections``) is the largest single cost of a traced process's start-up:
about 3 ms on a quiet machine, 8 ms of CPU on a loaded one. Most processes
of a spawn pool, a test suite or a short job send only a handful of small
batches (their header, the receive of their creation, their last clocks,
stats and end). This packer writes exactly the bytes ``msgpack.packb``
writes for the types those records hold, so the collector cannot tell the
difference; the emitter uses it only for those first small batches, and
the C packer (imported then) for everything after, so nothing on the hot
path of a process that keeps sending gets slower.

What it cannot pack (floats, objects of other types, integers beyond 64
bits) raises :class:`Unpackable`: the caller packs with ``msgpack`` instead.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any


class Unpackable(TypeError):
    """A value this packer does not handle; ``msgpack`` does."""


def packb(value: Any) -> bytes:
    """``msgpack.packb(value)`` for None, bools, ints, str, bytes, lists, tuples, dicts."""
    out = bytearray()
    _pack(value, out)
    return bytes(out)


def _sized(out: bytearray, size: int, fix: int | None, fix_limit: int,
           codes: tuple[int, int, int]) -> None:
    """The header of a str, bin, array or map of ``size`` items or bytes."""
    if fix is not None and size < fix_limit:
        out.append(fix | size)
    elif size < 1 << 8 and codes[0]:
        out.append(codes[0])
        out.append(size)
    elif size < 1 << 16:
        out.append(codes[1])
        out += size.to_bytes(2, "big")
    elif size < 1 << 32:
        out.append(codes[2])
        out += size.to_bytes(4, "big")
    else:
        raise Unpackable("too long for msgpack")


STR_CODES = (0xD9, 0xDA, 0xDB)
BIN_CODES = (0xC4, 0xC5, 0xC6)
ARRAY_CODES = (0, 0xDC, 0xDD)
MAP_CODES = (0, 0xDE, 0xDF)


def _pack_int(value: int, out: bytearray) -> None:
    if 0 <= value < 0x80 or -0x20 <= value < 0:
        out += value.to_bytes(1, "big", signed=True)
    elif value >= 0:
        for code, size in ((0xCC, 1), (0xCD, 2), (0xCE, 4), (0xCF, 8)):
            if value < 1 << (8 * size):
                out.append(code)
                out += value.to_bytes(size, "big")
                return
        raise Unpackable("integer beyond 64 bits")
    else:
        for code, size in ((0xD0, 1), (0xD1, 2), (0xD2, 4), (0xD3, 8)):
            if value >= -(1 << (8 * size - 1)):
                out.append(code)
                out += value.to_bytes(size, "big", signed=True)
                return
        raise Unpackable("integer beyond 64 bits")


def _pack(value: Any, out: bytearray) -> None:
    if value is None:
        out.append(0xC0)
    elif value is True:
        out.append(0xC3)
    elif value is False:
        out.append(0xC2)
    elif isinstance(value, int):
        _pack_int(value, out)
    elif isinstance(value, str):
        data = value.encode("utf-8")
        _sized(out, len(data), 0xA0, 32, STR_CODES)
        out += data
    elif isinstance(value, (bytes, bytearray)):
        _sized(out, len(value), None, 0, BIN_CODES)
        out += value
    elif isinstance(value, (list, tuple)):
        _sized(out, len(value), 0x90, 16, ARRAY_CODES)
        for item in value:
            _pack(item, out)
    elif isinstance(value, dict):
        _sized(out, len(value), 0x80, 16, MAP_CODES)
        for key, item in value.items():
            _pack(key, out)
            _pack(item, out)
    else:
        raise Unpackable(f"cannot pack {type(value).__name__}")
