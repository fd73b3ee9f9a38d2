"""What a program's signal handler raises reaches the program, also when the signal
came while tracer code ran.

CPython runs a Python handler between two bytecodes of whatever the main thread
runs, and the tracer's recording code runs inside the program's calls (a write to a
pipe, here). Its guards, there so that a failure of the tracer never reaches the
program, caught the handler's exception too: CPython's ``test_io``
``check_reentrant_write`` (an alarm whose handler raises, during a loop of writes)
looped for ever traced. The test puts the signal inside the tracer's recording of a
write on purpose (untraced, at the same call), for a handler that distea leaves
alone (SIGALRM) and for one it wraps to record the signal (SIGUSR1).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from tests.tracing import run_traced, run_untraced

PROGRAM = """
import os, signal, sys

SIGNUM = int(sys.argv[1])

def on_signal(signum, frame):
    1 / 0

def signal_inside_the_recording(session):
    stamp = session.stamp  # called while the pipe channel records the write
    def stamp_after_a_signal(*args):
        session.stamp = stamp
        signal.raise_signal(SIGNUM)
        return stamp(*args)
    session.stamp = stamp_after_a_signal

signal.signal(SIGNUM, on_signal)
r, w = os.pipe()
out = open(w, "wb", buffering=0)
from distea.tracer.session import current
session = current()
try:
    if session is None:
        signal.raise_signal(SIGNUM)  # untraced: the same signal, at the same call
    else:
        signal_inside_the_recording(session)
    out.write(b"xy")
    print("no exception")
except ZeroDivisionError:
    print("the handler's ZeroDivisionError")
"""


@pytest.mark.parametrize("signum", [signal.SIGALRM, signal.SIGUSR1],
                         ids=["left-alone", "wrapped"])
def test_a_handlers_exception_inside_tracer_code_reaches_the_program(
        program, tmp_path: Path, signum: int) -> None:
    script = program("handler.py", PROGRAM)
    args = [sys.executable, script.name, str(int(signum))]
    untraced = run_untraced(args, script.parent, timeout=60)
    traced = run_traced(args, script.parent, tmp_path / "run", timeout=60)
    assert untraced.stdout == "the handler's ZeroDivisionError\n", untraced.stderr
    assert traced.result.stdout == untraced.stdout, traced.result.stderr
    assert traced.data.processes  # and the trace is there
