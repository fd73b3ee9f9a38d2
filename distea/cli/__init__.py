"""The ``distea`` command line (the click group lives in :mod:`distea.cli.group`).

``distea run [OPTIONS] -- CMD`` is the one command whose own start-up the
user waits for on every run, so the console script's ``main()`` parses
that common form itself (:func:`distea.cli.running.parse_run_args`) and
runs it without importing click at all (20 ms with bytecode caches, about
60 ms without). Anything else (other commands, ``--help``, option forms the
quick parser does not know) goes to the click group, which also answers
every attribute lookup, so ``main`` behaves as the group everywhere else
(``CliRunner().invoke(main, ...)``).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: it costs 10 ms, and nothing before the command needs it

if TYPE_CHECKING:
    from typing import Any


class _Main:
    """``distea``: the quick ``run`` path, else the click group (built on first use)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not args and not kwargs:  # the console script: arguments from sys.argv
            from distea.cli.running import parse_run_args, run_quickly

            parsed = parse_run_args(sys.argv[1:])
            if parsed is not None:
                run_quickly(parsed)
        return _group()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(_group(), name)


def _group() -> Any:
    from distea.cli.group import main as group

    return group


if TYPE_CHECKING:
    from distea.cli.group import main as main
else:
    main = _Main()
