"""Helpers for fault tests: real ``distea`` console-script processes, peak memory, waiting."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.tracing import DISTEA

PY = sys.executable


def start_distea(args: list[str], cwd: Path, **kwargs: object) -> subprocess.Popen[str]:
    """``distea ARGS`` as a child of the test, in its own session (so it can be killed whole)."""
    return subprocess.Popen([str(DISTEA), *args], cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, **kwargs)  # type: ignore[call-overload]


def kill_group(proc: subprocess.Popen[str]) -> None:
    """End ``proc`` and everything in its session (tests must leave no process behind)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=10)
    except (subprocess.TimeoutExpired, ValueError):
        pass


@contextmanager
def running(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    try:
        yield proc
    finally:
        if proc.poll() is None:
            kill_group(proc)


def vm_hwm_kib(pid: int) -> int:
    """Peak resident set size of a live process, in KiB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class PeakWatcher:
    """Polls a process's VmHWM until it exits; ``peak_kib`` is the last value seen."""

    def __init__(self, pid: int, every: float = 0.02) -> None:
        self.pid = pid
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)
        self._thread.start()

    def _run(self, every: float) -> None:
        while not self._stop.is_set():
            value = vm_hwm_kib(self.pid)
            if value == 0 and self.peak_kib:
                return
            self.peak_kib = max(self.peak_kib, value)
            time.sleep(every)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.peak_kib


def wait_for(predicate: Callable[[], bool], timeout: float = 30, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
