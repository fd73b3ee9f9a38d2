"""The run directory's layout and its writing side: names, creation, ``run.json``.

Shared by :mod:`distea.launcher` (``distea run`` creates the directory before
the command starts, so this module imports nothing heavier than ``json``) and
:mod:`distea.traceformat` (which reads it back).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from distea.wire import FORMAT_VERSION

TYPE_CHECKING = False  # not typing's: nothing before the command starts needs it
if TYPE_CHECKING:
    from typing import Any

RUN_META = "run.json"
PROCS_DIR = "procs"
DEFAULT_RUNS_DIR = Path(".distea") / "runs"
"""Where ``distea run`` puts runs without ``-o``, and where ``latest_run`` looks."""


def new_run_id() -> str:
    """A sortable, unique-enough id: time first so ``ls`` lists runs in order."""
    return time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid() % 100000:05d}"


def create_run_dir(path: Path) -> Path:
    """Make a fresh run directory, private to this user (it holds the ipc socket)."""
    path.mkdir(parents=True, exist_ok=False, mode=0o700)
    os.chmod(path, 0o700)
    (path / PROCS_DIR).mkdir(mode=0o700)
    return path


def write_run_meta(path: Path, meta: dict[str, Any]) -> None:
    """Write run.json atomically so a reader never sees half of it."""
    tmp = path / (RUN_META + ".tmp")
    tmp.write_text(json.dumps({"format": FORMAT_VERSION, **meta}, indent=2, sort_keys=True))
    tmp.replace(path / RUN_META)
