"""Ctrl-C at a terminal: the command gets SIGINT once, as without distea."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import subprocess
import termios
import time
from pathlib import Path

from tests.reliability.helpers import PY
from tests.tracing import DISTEA

COUNTER = """
import signal, time
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
print("ready", flush=True)
senders = []
first = signal.sigtimedwait([signal.SIGINT], 20)
if first is not None:
    senders.append(first.si_pid)
    while (more := signal.sigtimedwait([signal.SIGINT], 0.5)) is not None:
        senders.append(more.si_pid)   # a second copy, sent by some process
print("sigint from", senders, flush=True)
"""


def in_terminal(argv: list[str], cwd: Path) -> tuple[int, str]:
    """Run ARGV as the foreground job of a new pseudo-terminal, type Ctrl-C once."""
    master, slave = pty.openpty()

    def take_terminal() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(argv, cwd=cwd, stdin=slave, stdout=slave, stderr=slave,
                            preexec_fn=take_terminal)
    os.close(slave)
    output = b""
    try:
        deadline = time.monotonic() + 60
        while b"ready" not in output and time.monotonic() < deadline:
            if select.select([master], [], [], 0.1)[0]:
                output += os.read(master, 4096)
        os.write(master, b"\x03")
        while proc.poll() is None and time.monotonic() < deadline:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    output += os.read(master, 4096)
                except OSError:
                    break
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return proc.returncode, output.decode(errors="replace")


def test_ctrl_c_reaches_the_command_once(program, tmp_path: Path) -> None:
    script = program("counter.py", COUNTER)
    plain = in_terminal([PY, script.name], script.parent)
    traced = in_terminal([str(DISTEA), "run", "-q", "-o", str(tmp_path / "run"), "--",
                          PY, script.name], script.parent)
    # typed at the terminal: sent by the kernel (si_pid 0), once
    assert plain == (0, plain[1]) and "sigint from [0]" in plain[1], plain[1]
    assert traced[0] == 0, traced[1]
    assert "sigint from [0]" in traced[1], traced[1]
