"""Small wording helpers shared by the commands: counts, shell-safe names, run headlines.

Everything a command prints for a person to read or paste goes through
here, so plurals are right everywhere and every suggested command line can
be pasted into a POSIX shell as it is (names like ``app.<module>`` or
``f.<locals>.<genexpr>`` hold characters the shell would take as
redirections).
"""

from __future__ import annotations

import time

TYPE_CHECKING = False  # not typing's: distea run's summary imports this module
if TYPE_CHECKING:
    from collections.abc import Mapping  # collections: 3 ms that the summary need not pay


def count(n: int, singular: str, plural: str | None = None) -> str:
    """``1 process``, ``2 processes``: the number and the word that goes with it."""
    word = singular if n == 1 else (plural or _plural(singular))
    return f"{n} {word}"


def _plural(word: str) -> str:
    if word.endswith(("s", "x", "sh", "ch")):
        return word + "es"
    return word + "s"


def command_line(*words: str) -> str:
    """A command line that a POSIX shell reads back as exactly these words."""
    return " ".join(shell_quote(w) for w in words)


SHELL_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                       "_@%+=:,./-")
"""What ``shlex.quote`` leaves unquoted (``[\\w@%+=:,./-]``, ASCII)."""


def shell_quote(word: str) -> str:
    """``shlex.quote(word)``, without shlex: it imports ``re`` (4 ms), and ``distea
    run``'s summary quotes its suggested query after every run."""
    if not word:
        return "''"
    if SHELL_SAFE.issuperset(word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def run_outcome(meta: Mapping[str, object]) -> str:
    """How the traced command ended, from run.json: ``exit 0``, ``killed by signal 9``, …"""
    signal = meta.get("signal")
    if isinstance(signal, int):
        return f"killed by signal {signal}"
    code = meta.get("exit_code")
    if isinstance(code, int):
        return f"exit {code}"
    if "finished_at" not in meta:
        return "did not finish (distea run was killed, or is still running)"
    return "could not be started"


def run_failed(meta: Mapping[str, object]) -> bool:
    """Whether the traced command failed, was killed, or never finished."""
    if "signal" in meta or meta.get("exit_code", 0) != 0:
        return True
    return "started_at" in meta and "finished_at" not in meta


def run_headline(meta: Mapping[str, object]) -> str:
    """``python app.py — exit 0, 2.3 s, started 2026-11-25 05:41`` from run.json."""
    command = meta.get("command")
    shown = command_line(*map(str, command)) if isinstance(command, list) else "?"
    parts = [run_outcome(meta)]
    started, finished = meta.get("started_at"), meta.get("finished_at")
    if isinstance(started, int | float) and isinstance(finished, int | float):
        parts.append(f"{finished - started:.1f} s")
    if isinstance(started, int | float):
        parts.append("started " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)))
    return f"{shown} — {', '.join(parts)}"
