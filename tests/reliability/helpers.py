"""Helpers for fault tests: real ``distea`` console-script processes, peak memory, waiting."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
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
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with suppress(subprocess.TimeoutExpired, ValueError):
        proc.communicate(timeout=10)


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


BURST = """
import os, socket, sys, threading, time

def work(i):
    return i + 1

def calls(n):
    for i in range(n):
        work(i)

def messages(n):
    a, b = socket.socketpair()
    def drain():
        for _ in range(n):
            b.recv(1)
    reader = threading.Thread(target=drain)
    reader.start()
    for _ in range(n):
        a.send(b"x")
    reader.join()
    a.close()
    b.close()

def hwm():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])

def main():
    n_calls, n_msgs = int(sys.argv[1]), int(sys.argv[2])
    gate = sys.argv[3] if len(sys.argv) > 3 else None
    if gate:
        with open(gate + ".ready", "w") as ready:
            ready.write(str(os.getpid()))
        while not os.path.exists(gate):
            time.sleep(0.01)
    before = hwm()
    started = time.perf_counter()
    calls(n_calls)
    messages(n_msgs)
    print(f"done {n_calls} {n_msgs}", flush=True)
    print(f"hwm {before} {hwm()} {time.perf_counter() - started:.2f}", file=sys.stderr,
          flush=True)
    sys.exit(7)

main()
"""


def burst_hwm(stderr: str) -> tuple[int, int, float]:
    """(VmHWM before the burst, VmHWM after it, seconds) as the burst program printed them."""
    line = next(x for x in stderr.splitlines() if x.startswith("hwm "))
    _, before, after, seconds = line.split()
    return int(before), int(after), float(seconds)


def process_state(pid: int) -> str | None:
    """'R', 'S', 'Z', ... or None when the pid is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None
