"""The idle flusher: one invisible thread, never two, gone across fork, and it flushes."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from distea.tracer.idleflush import INTERVAL_S, IdleFlusher
from tests.tracing import run_traced


def os_threads() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError("no Threads: line")


class FakeEmitter:
    def __init__(self) -> None:
        self.pending: list[object] = []
        self.last_flush = 0.0


class FakeMonitor:
    dirty_states: list[object] = []


class FakeSession:
    """What the flusher reads of a session; records each flush."""

    def __init__(self) -> None:
        self.finished = False
        self.errors = 0
        self.emitter = FakeEmitter()
        self.monitor = FakeMonitor()
        self.flushes = 0
        self.signal_watch = None  # no flush-then-die handler to watch (sigwatch.py)

    def tracer_error(self) -> None:
        self.errors += 1

    def flush_idle(self) -> None:
        self.flushes += 1
        self.emitter.pending.clear()
        self.emitter.last_flush = time.monotonic()


def wait_for(condition, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.005)
    return condition()


def test_one_invisible_thread_started_by_racing_threads_and_stopped() -> None:
    session = FakeSession()
    flusher = IdleFlusher(session)  # type: ignore[arg-type]
    before_threads, before_visible = os_threads(), threading.active_count()
    starters = [threading.Thread(target=flusher.ensure) for _ in range(8)]
    for starter in starters:
        starter.start()
    for starter in starters:
        starter.join()
    try:
        assert flusher.running
        # (joined threads may linger a moment at the OS level on 3.12)
        assert wait_for(lambda: os_threads() == before_threads + 1)
        assert threading.active_count() == before_visible
    finally:
        flusher.stop(for_good=True)
    assert wait_for(lambda: os_threads() == before_threads)
    flusher.ensure()  # stopped for good: starts nothing
    assert not flusher.running and os_threads() == before_threads


def test_it_flushes_what_waits_and_nothing_else() -> None:
    session = FakeSession()
    flusher = IdleFlusher(session)  # type: ignore[arg-type]
    flusher.ensure()
    try:
        time.sleep(3 * INTERVAL_S)
        assert session.flushes == 0  # nothing waited
        session.emitter.pending.append(["record"])
        assert wait_for(lambda: session.flushes == 1, timeout=2.0)
        assert session.emitter.pending == []
    finally:
        flusher.stop(for_good=True)


FORKER = """
import os, socket, warnings
warnings.simplefilter("error", DeprecationWarning)
def work(i):
    return i * 2
for i in range(5):
    a, b = socket.socketpair()
    a.sendall(b"x"); b.recv(1)          # a message event: the parent's flusher runs again
    work(i)
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
print("forked 5 times")
"""


def test_repeated_forks_raise_no_multithreaded_warning(program, tmp_path: Path) -> None:
    """Every fork finds the flusher gone, also after the parent started it again."""
    script = program("forker.py", FORKER)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert (traced.result.returncode, traced.result.stdout, traced.result.stderr) == (
        0, "forked 5 times\n", "")
    data = traced.data
    assert sum(p.start_method == "fork" for p in data.processes.values()) == 5
