"""Run programs under a real ``distea run`` (the console script) and read the result."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from distea.model import RunData
from distea.traceformat import load_run

REPO = Path(__file__).resolve().parent.parent
DISTEA = Path(sys.executable).parent / "distea"


@dataclass
class TracedRun:
    result: subprocess.CompletedProcess[str]
    run_dir: Path

    @property
    def data(self) -> RunData:
        return load_run(self.run_dir)


def run_traced(args: list[str], cwd: Path, run_dir: Path, *extra: str,
               timeout: float = 120, env: dict[str, str] | None = None) -> TracedRun:
    """``distea run -o RUN_DIR [extra] -- args`` in ``cwd``; the real CLI, real processes."""
    result = subprocess.run(
        [str(DISTEA), "run", "-q", "-o", str(run_dir), *extra, "--", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env,
    )
    return TracedRun(result, run_dir)


def run_untraced(args: list[str], cwd: Path, timeout: float = 120,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)
