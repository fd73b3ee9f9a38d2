"""Children that are not Python are named in the run, under a real ``distea run``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.tracing import DISTEA, run_traced

PROGRAM = '''
import subprocess, sys
subprocess.run(["true"], check=True)
first = subprocess.Popen(["sleep", "0"])
first.wait()
subprocess.run([sys.executable, "-c", "pass"], check=True)
print(first.pid)
'''


def test_non_python_children_are_listed_with_their_program(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(textwrap.dedent(PROGRAM))
    traced = run_traced([sys.executable, "app.py"], tmp_path, tmp_path / "run")
    assert traced.result.returncode == 0, traced.result.stderr
    sleep_pid = int(traced.result.stdout.split()[-1])
    shown = subprocess.run([str(DISTEA), "show", "--json", "--run", str(traced.run_dir)],
                           capture_output=True, text=True, check=True)
    data = json.loads(shown.stdout)
    reasons = sorted(u["reason"] for u in data["untraced"])
    # two programs that are not Python; the Python child is traced, not listed
    assert reasons == ["not a Python program (sleep)", "not a Python program (true)"]
    assert [u["pid"] for u in data["untraced"] if "sleep" in u["reason"]] == [sleep_pid]
    assert len(data["processes"]) == 2
    assert sum("are not Python and were not traced" in p for p in data["problems"]) == 1
    text = subprocess.run([str(DISTEA), "show", "--run", str(traced.run_dir)],
                          capture_output=True, text=True, check=True).stdout
    assert "children that are not Python" in text and "sleep" in text
