"""``json.dumps``'s text, without importing ``json``.

``distea run`` writes JSON twice before the command starts (run.json, and the
tracer's settings in ``DISTEA_CONFIG``), and ``json`` imports ``re``,
``enum`` and more to do it: 8 to 15 ms of every run on our test machine.
``_json``, the C module under ``json``, holds what the writing needs: its
encoder writes the compact form exactly as ``json.dumps`` does (``json``
itself uses it there), and its string escaping serves the indented form,
which ``json`` writes in Python and so is written in Python here too, the
same way. The mirror image of
:func:`distea.tracer.config.read_json_object`, which reads the settings with
``_json``'s scanner. Where ``_json`` is missing (another Python), ``json``.

Default options only, as distea uses them: ASCII output, NaN and infinities
allowed, circular references refused, keys not skipped.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: distea run writes run.json before the command starts
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

INFINITY = float("inf")


def dumps(value: object, indent: int | None = None, sort_keys: bool = False) -> str:
    """``json.dumps(value, indent=indent, sort_keys=sort_keys)``."""
    try:
        from _json import encode_basestring_ascii, make_encoder
    except ImportError:
        import json

        return json.dumps(value, indent=indent, sort_keys=sort_keys)
    if indent is None:
        encode = make_encoder({}, _not_serializable, encode_basestring_ascii, None, ": ", ", ",
                              sort_keys, False, True)
        return "".join(encode(value, 0))
    parts: list[str] = []
    _Indented(parts.append, encode_basestring_ascii, " " * indent, sort_keys).value(value, 0)
    return "".join(parts)


def _not_serializable(value: object) -> object:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value == INFINITY:
        return "Infinity"
    if value == -INFINITY:
        return "-Infinity"
    return float.__repr__(value)


class _Indented:
    """The indented form, as ``json.encoder``'s Python encoder writes it (item separator
    ``,`` and a new line, key separator ``: ``)."""

    def __init__(self, write: Callable[[str], object], quote: Callable[[str], str],
                 indent: str, sort_keys: bool) -> None:
        self.write = write
        self.quote = quote
        self.indent = indent
        self.sort_keys = sort_keys
        self.open: set[int] = set()
        """The ids of the containers being written (a circular reference is refused)."""

    def value(self, value: object, level: int) -> None:
        if isinstance(value, str):
            self.write(self.quote(value))
        elif value is None:
            self.write("null")
        elif value is True:
            self.write("true")
        elif value is False:
            self.write("false")
        elif isinstance(value, int):
            self.write(int.__repr__(value))
        elif isinstance(value, float):
            self.write(_float(value))
        elif isinstance(value, list | tuple):
            self._container(value, level, "[", "]", self._items)
        elif isinstance(value, dict):
            self._container(value, level, "{", "}", self._members)
        else:
            _not_serializable(value)

    def _container(self, value: list[object] | tuple[object, ...] | dict[object, object],
                   level: int, opening: str, closing: str,
                   inside: Callable[[Any, str, int], None]) -> None:
        if not value:
            self.write(opening + closing)
            return
        if id(value) in self.open:
            raise ValueError("Circular reference detected")
        self.open.add(id(value))
        newline = "\n" + self.indent * (level + 1)
        self.write(opening + newline)
        inside(value, "," + newline, level + 1)
        self.write("\n" + self.indent * level + closing)
        self.open.discard(id(value))

    def _items(self, items: list[object] | tuple[object, ...], separator: str,
               level: int) -> None:
        for i, item in enumerate(items):
            if i:
                self.write(separator)
            self.value(item, level)

    def _members(self, members: dict[object, object], separator: str, level: int) -> None:
        pairs = sorted(members.items()) if self.sort_keys else members.items()
        for i, (key, item) in enumerate(pairs):
            if i:
                self.write(separator)
            self.write(self.quote(self._key(key)) + ": ")
            self.value(item, level)

    @staticmethod
    def _key(key: object) -> str:
        if isinstance(key, str):
            return key
        if isinstance(key, float):
            return _float(key)
        if key is True:
            return "true"
        if key is False:
            return "false"
        if key is None:
            return "null"
        if isinstance(key, int):
            return int.__repr__(key)
        raise TypeError(f"keys must be str, int, float, bool or None, "
                        f"not {key.__class__.__name__}")
