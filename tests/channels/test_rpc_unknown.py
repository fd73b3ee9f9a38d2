"""A grpc or ray that distea does not recognise is reported, never silently missed.

The program imports stand-ins named ``grpc`` and ``ray`` (as an unknown
version would look: the modules distea hooks into are missing); every
analysis of the run must say that their messages are not recorded.
"""

from __future__ import annotations

import sys
from pathlib import Path

import distea
from tests.tracing import run_traced

MAIN = """
import grpc, ray
print("ok", grpc.__version__, ray.__version__)
"""


def test_unknown_grpc_and_ray_are_problems(program, tmp_path: Path) -> None:
    script = program("main.py", MAIN)
    program("grpc/__init__.py", '__version__ = "0.0.fake"\n')
    program("ray/__init__.py", '__version__ = "0.0.fake"\n')
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert traced.result.returncode == 0, traced.result.stderr
    assert traced.result.stdout == "ok 0.0.fake 0.0.fake\n"
    problems = distea.load(tmp_path / "run").problems
    assert any("grpcio 0.0.fake" in p and "not recorded" in p for p in problems), problems
    assert any("Ray 0.0.fake" in p and "not recorded" in p for p in problems), problems
