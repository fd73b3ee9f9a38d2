"""A traced process that runs code in a subinterpreter runs as it does untraced, and the
run says that code was not observed.

A subinterpreter imports ``site`` as the main interpreter does, so the bootstrap hook
ran there too and started a second tracer in the same process; its idle flusher's thread
was still running when the subinterpreter ended, and the process aborted ("free():
invalid pointer", "Py_EndInterpreter: thread still has a frame": CPython's
test_importlib). ``sys.monitoring`` and the tracer are per interpreter: only each
process's main interpreter is traced, and a subinterpreter leaves a note instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.tracing import run_traced, run_untraced

interpreters = pytest.importorskip(
    "_interpreters" if sys.version_info >= (3, 13) else "_xxsubinterpreters",
    reason="this Python has no subinterpreter module")

SUBINTERPRETER = """
import sys
try:
    import _interpreters as interpreters  # 3.13
except ImportError:
    import _xxsubinterpreters as interpreters  # 3.12

def run_elsewhere():
    interp = interpreters.create()
    interpreters.run_string(interp, "total = sum(range(10))")
    interpreters.destroy(interp)
    return "done"

print(run_elsewhere(), flush=True)
"""


def test_a_subinterpreter_runs_and_is_named_not_traced(program, tmp_path: Path) -> None:
    from distea.analyzer.run import Run

    script = program("elsewhere.py", SUBINTERPRETER)
    untraced = run_untraced([sys.executable, script.name], script.parent)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")

    assert (untraced.returncode, untraced.stdout) == (0, "done\n"), untraced.stderr
    assert (traced.result.returncode, traced.result.stdout) == (0, "done\n"), \
        traced.result.stderr
    run = Run.load(tmp_path / "run")
    main = next(iter(run.processes.values()))
    assert len(run.processes) == 1 and main.complete
    assert "elsewhere.run_elsewhere" in run.executed
    assert [p for p in run.problems if "subinterpreter" in p] == [
        f"elsewhere.py (pid {main.pid}): code ran in a subinterpreter of this process: only "
        "each process's main interpreter is traced, so what that code did is not observed"]
