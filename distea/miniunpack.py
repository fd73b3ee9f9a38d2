"""``msgpack.unpackb`` for a batch's header, in plain Python, for the local collector.

Every batch a tracer sends starts with a small header, ``[format,
process_key, seq, final]``: the collector reads it to know which log the
payload goes to, and never decodes the payload itself. Importing
``msgpack`` for those four values cost every ``distea run`` of a Python
command about 2 ms of CPU at its first batch (the package imports
``collections`` and ``datetime``), on a thread that competes with the
traced program's own processes for the machine. This reader decodes what a
header holds (nil, booleans, integers, strings, and arrays of them) and
refuses the rest, as the collector refuses a header it cannot read.

The counterpart of :mod:`distea.tracer.minipack`, which packs those headers.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: distea run imports this module
if TYPE_CHECKING:
    from typing import Any

_FIXED = {0xC0: None, 0xC2: False, 0xC3: True}
_UINTS = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}
_INTS = {0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}
_STRS = {0xD9: 1, 0xDA: 2, 0xDB: 4}
_ARRAYS = {0xDC: 2, 0xDD: 4}
MAX_DEPTH = 8
"""Arrays nested deeper than this are refused (a header nests none)."""


def unpackb(data: bytes) -> Any:
    """The value ``data`` holds, as ``msgpack.unpackb`` returns it; ValueError when
    ``data`` is not one whole value of the types above."""
    value, end = _read(memoryview(data), 0, 0)
    if end != len(data):
        raise ValueError("extra bytes after the value")
    return value


def _read(data: memoryview, at: int, depth: int) -> tuple[Any, int]:
    if at >= len(data):
        raise ValueError("truncated")
    code = data[at]
    at += 1
    if code <= 0x7F:
        return code, at
    if code >= 0xE0:
        return code - 0x100, at
    if 0xA0 <= code <= 0xBF:
        return _text(data, at, code & 0x1F)
    if 0x90 <= code <= 0x9F:
        return _array(data, at, code & 0x0F, depth)
    if code in _FIXED:
        return _FIXED[code], at
    if code in _UINTS:
        size = _UINTS[code]
        return int.from_bytes(_take(data, at, size), "big"), at + size
    if code in _INTS:
        size = _INTS[code]
        return int.from_bytes(_take(data, at, size), "big", signed=True), at + size
    if code in _STRS:
        size = _STRS[code]
        return _text(data, at + size, int.from_bytes(_take(data, at, size), "big"))
    if code in _ARRAYS:
        size = _ARRAYS[code]
        return _array(data, at + size, int.from_bytes(_take(data, at, size), "big"), depth)
    raise ValueError(f"type 0x{code:02x} is not one a batch header holds")


def _take(data: memoryview, at: int, size: int) -> memoryview:
    if at + size > len(data):
        raise ValueError("truncated")
    return data[at:at + size]


def _text(data: memoryview, at: int, size: int) -> tuple[str, int]:
    try:
        return str(_take(data, at, size), "utf-8"), at + size
    except UnicodeDecodeError as exc:
        raise ValueError(f"a string that is not UTF-8: {exc}") from None


def _array(data: memoryview, at: int, length: int, depth: int) -> tuple[list[Any], int]:
    if depth >= MAX_DEPTH:
        raise ValueError("arrays nested too deep")
    items = []
    for _ in range(length):
        item, at = _read(data, at, depth + 1)
        items.append(item)
    return items, at
