"""The run directory's layout and its writing side: names, creation, ``run.json``.

Shared by :mod:`distea.launcher` (``distea run`` creates the directory before
the command starts, so this module imports nothing heavy: paths are strings or
path objects, as the caller has them, never ``pathlib``'s, whose import costs
``distea run`` several milliseconds; run.json is written by
:mod:`distea.jsontext`, not ``json``) and :mod:`distea.traceformat`
(which reads it back).
"""

from __future__ import annotations

import os
import time

from distea.jsontext import dumps
from distea.wire import FORMAT_VERSION

TYPE_CHECKING = False  # not typing's: nothing before the command starts needs it
if TYPE_CHECKING:
    from os import PathLike
    from typing import Any

RUN_META = "run.json"
PROCS_DIR = "procs"
DEFAULT_RUNS_DIR = os.path.join(".distea", "runs")
"""Where ``distea run`` puts runs without ``-o``, and where ``latest_run`` looks."""


def new_run_id() -> str:
    """A sortable, unique-enough id: time first so ``ls`` lists runs in order."""
    return time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid() % 100000:05d}"


def create_run_dir[P: str | PathLike[str]](path: P) -> P:
    """Make a fresh run directory, private to this user (it holds the ipc socket)."""
    try:
        os.mkdir(path, mode=0o700)
    except FileNotFoundError:  # as Path.mkdir(parents=True): the missing parents first
        parent = os.path.dirname(os.path.normpath(str(path)))
        if not parent:
            raise
        os.makedirs(parent, exist_ok=True)
        os.mkdir(path, mode=0o700)
    os.chmod(path, 0o700)
    os.mkdir(os.path.join(path, PROCS_DIR), mode=0o700)
    return path


def write_run_meta(path: str | PathLike[str], meta: dict[str, Any]) -> None:
    """Write run.json atomically so a reader never sees half of it."""
    tmp = os.path.join(path, RUN_META + ".tmp")
    with open(tmp, "w") as out:
        out.write(dumps({"format": FORMAT_VERSION, **meta}, indent=2, sort_keys=True))
    os.replace(tmp, os.path.join(path, RUN_META))
