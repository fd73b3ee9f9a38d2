"""The tools compared, and how each one is made to reach every process of a workload.

- ``untraced``: the command as is.
- ``distea compact`` / ``distea full``: ``distea run -q -o DIR [--mode full] -- CMD``
  (distea's own bootstrap reaches subprocesses and multiprocessing children).
- ``coverage sysmon``: ``COVERAGE_CORE=sysmon`` and ``COVERAGE_PROCESS_START``
  naming an rc file with ``parallel = True``; ``coverage.process_startup()``
  runs in every process from ``_coverage_site/sitecustomize.py`` on
  PYTHONPATH (coverage's documented subprocess recipe, with sitecustomize in
  place of a ``.pth``), so the top process, subprocesses and spawned
  children are all measured, each into its own ``.coverage.*`` file. The
  data is not combined (that is not run time).
- ``viztracer``: ``viztracer --quiet -o DIR/trace.json [-m MOD | SCRIPT] ARGS``;
  viztracer 1.x follows ``subprocess`` Python children and multiprocessing
  on its own (its default; ``--ignore_multiprocess`` turns it off) and saves
  one JSON report combining all processes. Default circular buffer
  (``--tracer_entries`` 1,000,000 per process), everything traced (no
  include filter): its out-of-the-box behaviour. Saving the report is part
  of its wall time.
- ``setprofile``: ``benchmarks/setprofile_recorder.py`` injected through
  ``_setprofile_site/sitecustomize.py`` on PYTHONPATH.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


def _bin(name: str) -> str:
    candidate = BIN / name
    return str(candidate) if candidate.exists() else (shutil.which(name) or name)


def _pythonpath(*dirs: Path) -> str:
    parts = [str(d) for d in dirs]
    if os.environ.get("PYTHONPATH"):
        parts.append(os.environ["PYTHONPATH"])
    return os.pathsep.join(parts)


@dataclass(frozen=True)
class Prepared:
    argv: list[str]
    env: dict[str, str]
    output: Path | None
    """What the tool wrote (its trace), for sizes."""


@dataclass(frozen=True)
class Tool:
    name: str
    prepare: Callable[[list[str], Path], Prepared]
    available: Callable[[], str | None] = lambda: None
    """None when usable, else why not."""


def _untraced(argv: list[str], out: Path) -> Prepared:
    return Prepared(argv, {}, None)


def distea_command(mode: str, argv: list[str], out: Path) -> list[str]:
    """``argv`` under ``distea run`` in ``mode``, writing the run to ``out/run``."""
    return [_bin("distea"), "run", "-q", "-o", str(out / "run"), "--mode", mode, "--", *argv]


def _distea(mode: str) -> Callable[[list[str], Path], Prepared]:
    def prepare(argv: list[str], out: Path) -> Prepared:
        return Prepared(distea_command(mode, argv, out), {}, out / "run")

    return prepare


def _coverage(argv: list[str], out: Path) -> Prepared:
    out.mkdir(parents=True, exist_ok=True)
    rc = out / "coveragerc"
    rc.write_text(f"[run]\nparallel = True\ndata_file = {out / '.coverage'}\n")
    env = {"COVERAGE_CORE": "sysmon", "COVERAGE_PROCESS_START": str(rc),
           "PYTHONPATH": _pythonpath(HERE / "_coverage_site", REPO)}
    return Prepared(argv, env, out)


def _viztracer(argv: list[str], out: Path) -> Prepared:
    out.mkdir(parents=True, exist_ok=True)
    target = argv[1:]  # drop the interpreter: viztracer runs the script or module itself
    return Prepared([_bin("viztracer"), "--quiet", "-o", str(out / "trace.json"), *target],
                    {}, out)


def _setprofile(argv: list[str], out: Path) -> Prepared:
    env = {"BENCH_SETPROFILE_DIR": str(out),
           "PYTHONPATH": _pythonpath(HERE / "_setprofile_site", REPO)}
    return Prepared(argv, env, out)


def _module_missing(name: str) -> Callable[[], str | None]:
    def check() -> str | None:
        import importlib.util

        return None if importlib.util.find_spec(name) else f"{name} is not installed"

    return check


TOOLS: dict[str, Tool] = {t.name: t for t in (
    Tool("untraced", _untraced),
    Tool("distea compact", _distea("compact")),
    Tool("distea full", _distea("full")),
    Tool("coverage sysmon", _coverage, _module_missing("coverage")),
    Tool("viztracer", _viztracer, _module_missing("viztracer")),
    Tool("setprofile", _setprofile),
)}


def tree_size(path: Path | None) -> tuple[int, int]:
    """(bytes, files) under ``path``."""
    if path is None or not path.exists():
        return 0, 0
    total = files = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                total += os.path.getsize(os.path.join(root, name))
                files += 1
            except OSError:
                pass
    return total, files


def distea_process_sizes(run_dir: Path) -> list[int]:
    """Bytes of each process log of a distea run directory."""
    procs = run_dir / "procs"
    if not procs.is_dir():
        return []
    return sorted(p.stat().st_size for p in procs.iterdir() if p.is_file())
