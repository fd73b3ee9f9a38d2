"""``distea run`` leaves bytecode caches for the modules of its own that it imported,
even under ``PYTHONDONTWRITEBYTECODE`` (as the tracer does for itself): the next run
loads them instead of compiling the launcher, the collector and the summary again."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.util import MAGIC_NUMBER, cache_from_source
from pathlib import Path

import distea
from distea.launcher import runs_python
from tests.tracing import run_traced

RUN_PATH = ("__init__.py", "launcher.py", "localcollector.py", "runwriter.py", "rundir.py",
            "jsontext.py", "cli/running.py", "cli/summary.py", "cli/runfacts.py")
"""Modules every ``distea run`` with its summary imports (their caches are checked)."""
PROGRAM = "import sys\nfrom distea.cli import main\nsys.argv[0] = 'distea'\nmain()\n"


def copy_of_distea(tmp_path: Path) -> Path:
    """distea's sources alone, without any cache, in a folder of their own."""
    shutil.copytree(Path(distea.__file__).parent, tmp_path / "lib" / "distea",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "lib" / "distea"


def distea_run(package: Path, run_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(package.parent),
           "XDG_CACHE_HOME": str(package.parent.parent / "cache")}  # the copy's tracer path
    return subprocess.run([sys.executable, "-c", PROGRAM, "run", "-o", str(run_dir), "--",
                           "/bin/true"], env=env, cwd=package.parent, capture_output=True,
                          text=True, timeout=60)


def fresh_cache(source: Path) -> bool:
    """What the import system checks before it takes a cache (PEP 552)."""
    try:
        header = Path(cache_from_source(str(source))).read_bytes()[:16]
    except OSError:
        return False
    return header[:4] == MAGIC_NUMBER \
        and int.from_bytes(header[8:12], "little") == int(source.stat().st_mtime) \
        and int.from_bytes(header[12:16], "little") == source.stat().st_size


def test_the_first_run_leaves_caches_for_the_next(tmp_path: Path) -> None:
    package = copy_of_distea(tmp_path)
    sources = [package / name for name in RUN_PATH]
    assert not any(fresh_cache(s) for s in sources)

    first = distea_run(package, tmp_path / "run1")

    assert first.returncode == 0, first.stderr
    assert "distea recorded 0 processes" in first.stderr
    assert all(fresh_cache(s) for s in sources), [s for s in sources if not fresh_cache(s)]
    assert not fresh_cache(package / "traceformat.py")  # only what the run imported
    second = distea_run(package, tmp_path / "run2")
    assert (second.returncode, second.stderr.count("recorded")) == (0, 1), second.stderr



PROBE = "import sys; print('distea.tracer.bytecode' in sys.modules)"
"""Whether the traced process imported the module that writes the tracer's caches and
start-up image (it does so only to write them)."""


def test_distea_run_prepares_the_tracers_code_for_a_python_command(tmp_path: Path) -> None:
    """A Python command's first process leaves the tracer's caches and image to distea
    run (which writes them while the command starts); a command that is not Python, here
    a shell that starts Python, leaves them to the first traced process, as before."""
    python = run_traced([sys.executable, "-c", PROBE], tmp_path, tmp_path / "r1")
    shell = run_traced(["/bin/sh", "-c", f'"{sys.executable}" -c "{PROBE}"'], tmp_path,
                       tmp_path / "r2")
    assert (python.result.returncode, python.result.stdout) == (0, "False\n"), \
        python.result.stderr
    assert (shell.result.returncode, shell.result.stdout) == (0, "True\n"), shell.result.stderr
    assert runs_python([sys.executable]) and not runs_python(["/bin/sh"])


def test_runs_python_reads_the_program_name_or_its_interpreter_line(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text("#!/usr/bin/env python3\nprint(1)\n")
    shell_script = tmp_path / "tool.sh"
    shell_script.write_text("#!/bin/sh\necho 1\n")
    assert runs_python(["python3", "app.py"]) and runs_python(["/opt/python3.13"])
    assert runs_python([str(script)]) and not runs_python([str(shell_script)])
    assert not runs_python(["/bin/true"]) and not runs_python([str(tmp_path / "missing")])
