"""What ``distea run`` writes without the standard modules that would cost it their
import: ``distea.jsontext.dumps`` writes what ``json.dumps`` writes (run.json,
DISTEA_CONFIG), compact and indented, and raises where it raises, without importing
``json``; the summary quotes words for the shell as ``shlex.quote`` does."""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distea.cli.words import shell_quote
from distea.jsontext import dumps

SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
           | st.text())
VALUES = st.recursive(
    SCALARS,
    lambda inner: (st.lists(inner) | st.lists(inner).map(tuple)
                   | st.dictionaries(st.text(), inner)),
    max_leaves=40)
KEYS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text()


@given(VALUES)
def test_compact_text_is_json_dumps(value: object) -> None:
    assert dumps(value) == json.dumps(value)
    assert dumps(value, sort_keys=True) == json.dumps(value, sort_keys=True)


@given(VALUES, st.integers(min_value=0, max_value=4))
def test_indented_text_is_json_dumps(value: object, indent: int) -> None:
    assert dumps(value, indent=indent) == json.dumps(value, indent=indent)
    assert dumps(value, indent=indent, sort_keys=True) == \
        json.dumps(value, indent=indent, sort_keys=True)


@given(st.dictionaries(KEYS, SCALARS, max_size=6))
def test_keys_that_are_not_strings_are_written_as_json_writes_them(
        members: dict[object, object]) -> None:
    for indent in (None, 2):
        assert dumps(members, indent=indent) == json.dumps(members, indent=indent)


@pytest.mark.parametrize("indent", [None, 2])
def test_it_refuses_what_json_refuses(indent: int | None) -> None:
    loop: list[object] = [1]
    loop.append(loop)
    cases: list[tuple[object, type[Exception]]] = [
        ({1}, TypeError), ({"k": object()}, TypeError), ({(1, 2): 3}, TypeError),
        ({1: 1, "a": 2}, TypeError), (loop, ValueError)]
    for value, error in cases:
        sort = isinstance(value, dict) and len(value) == 2  # mixed keys fail only sorted
        with pytest.raises(error) as ours:
            dumps(value, indent=indent, sort_keys=sort)
        with pytest.raises(error) as theirs:
            json.dumps(value, indent=indent, sort_keys=sort)
        assert str(ours.value) == str(theirs.value)


def test_special_floats_as_json_writes_them() -> None:
    value = [math.nan, math.inf, -math.inf, -0.0, 1e300, 5e-324]
    assert dumps(value) == json.dumps(value) == \
        "[NaN, Infinity, -Infinity, -0.0, 1e+300, 5e-324]"
    assert dumps(value, indent=2) == json.dumps(value, indent=2)


def test_writing_imports_no_json() -> None:
    """The point of the module: distea run writes its JSON without ``json`` (and ``re``)."""
    program = ("import sys\nfrom distea.jsontext import dumps\n"
               "dumps({'a': [1, 2.5, None, 'x']}); dumps({'b': {}}, indent=2, sort_keys=True)\n"
               "print(sorted({'json', 're'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                            check=True, timeout=60)
    assert result.stdout.strip() == "[]"


@given(st.text())
def test_shell_quote_is_shlex_quote(word: str) -> None:
    """The summary's suggested query is quoted as ``shlex.quote`` quotes it (without re)."""
    assert shell_quote(word) == shlex.quote(word)
