"""A flush-then-die signal ends a traced process whose main thread is blocked, as untraced.

CPython runs the tracer's flush-on-SIGTERM handler (a Python handler) only in
the main thread; a signal that another thread takes, or that lands just
before the main thread blocks, is only noted, and the main thread slept on.
Untraced, the default action ends the process at once; a spawn ``Pool``
worker terminated while it waited for the task queue's lock hung for ever,
traced (distea/tracer/sigwatch.py). A program thread that ``pthread_kill``s
itself makes the case certain: the C handler runs in that thread, and the main
thread, blocked on a lock nobody releases, is never interrupted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.helpers import PY

DISTEA = Path(sys.executable).parent / "distea"
TIMEOUT_S = 60

BLOCKED = """
import multiprocessing, signal, sys, threading, time

def stuck(lock):
    print("blocking", flush=True)
    lock.acquire()  # held by nobody who will release it
    print("woke up", flush=True)

def signal_in_another_thread(signum):
    def run():
        time.sleep(0.3)  # the main thread sleeps in sem_wait by now
        signal.pthread_kill(threading.get_ident(), signum)  # the C handler runs here
        time.sleep(30)
    threading.Thread(target=run, daemon=True).start()

def main(signum):
    lock = multiprocessing.Lock()
    lock.acquire()
    signal_in_another_thread(signum)
    stuck(lock)
"""


def run(args: list[str], cwd: Path, traced: Path | None) -> subprocess.CompletedProcess[str]:
    """The program, under ``distea run`` when ``traced`` is its run directory; its whole
    process group is killed if it outlives ``TIMEOUT_S`` (the failure this file is about)."""
    argv = [str(DISTEA), "run", "-q", "-o", str(traced), "--", *args] if traced else args
    process = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"{' '.join(args)} still ran after {TIMEOUT_S} s "
                    f"({'traced' if traced else 'untraced'})")
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


def load(run_dir: Path):  # type: ignore[no-untyped-def]
    from distea.traceformat import load_run

    return load_run(run_dir)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_noted_while_the_main_thread_blocks_still_ends_the_process(
        program, tmp_path: Path, signum: int) -> None:
    script = program("blocked.py", BLOCKED + f"\nmain({int(signum)})\n")

    plain = run([PY, script.name], script.parent, None)
    traced = run([PY, script.name], script.parent, tmp_path / "run")

    assert plain.returncode == -signum
    assert (traced.returncode, traced.stdout) == (plain.returncode, plain.stdout)
    data = load(tmp_path / "run")
    main = next(p for p in data.processes.values() if p.argv[-1] == script.name)
    assert main.end_reason == "signal"  # the tracer's handler ran: its trace is whole
    received = [e for e in data.messages[main.key]
                if e.kind == "signal" and e.direction == "recv"]
    assert [e.channel.rsplit(":", 1)[1] for e in received] == [str(int(signum))]
    sent = [e for e in data.messages[main.key] if e.kind == "signal" and e.direction == "send"]
    assert len(sent) == 1  # the program's own pthread_kill; the watch's resend is not the program's
    assert data.problems == []


def test_the_program_sees_only_its_own_wakeup_descriptor(program, tmp_path: Path) -> None:
    """``set_wakeup_fd`` answers as untraced, and once the program gives its descriptor
    up, the watch has its pipe back: the blocked main thread still ends."""
    script = program("wakeup.py", BLOCKED + """
import socket
ours, theirs = socket.socketpair()
ours.setblocking(False)
print(signal.set_wakeup_fd(ours.fileno()))
print(signal.set_wakeup_fd(-1) == ours.fileno())
print(signal.set_wakeup_fd(-1))
main(int(signal.SIGTERM))
""")
    plain = run([PY, script.name], script.parent, None)
    traced = run([PY, script.name], script.parent, tmp_path / "run")

    assert plain.stdout.splitlines()[:3] == ["-1", "True", "-1"]
    assert (traced.returncode, traced.stdout) == (plain.returncode, plain.stdout)
    assert traced.returncode == -signal.SIGTERM
    assert load(tmp_path / "run").problems == []


def test_a_forked_child_has_its_own_watch(program, tmp_path: Path) -> None:
    script = program("forked.py", BLOCKED + """
import os
child = os.fork()
if child == 0:
    main(int(signal.SIGTERM))
    os._exit(0)
_, status = os.waitpid(child, 0)
print("child ended by signal", os.WTERMSIG(status) if os.WIFSIGNALED(status) else None)
""")
    plain = run([PY, script.name], script.parent, None)
    traced = run([PY, script.name], script.parent, tmp_path / "run")

    assert f"child ended by signal {int(signal.SIGTERM)}" in plain.stdout
    assert (traced.returncode, traced.stdout) == (plain.returncode, plain.stdout)
    data = load(tmp_path / "run")
    child = next(p for p in data.processes.values() if p.start_method == "fork")
    assert child.end_reason == "signal"
    assert data.problems == []


def test_a_program_that_closes_every_descriptor_still_dies_and_sees_nothing(
        program, tmp_path: Path) -> None:
    """A daemon's ``closerange`` closes the watch's pipe too: the watch makes it again
    at its (high) numbers before a signal comes, so CPython's handler never writes
    to a closed descriptor ("Exception ignored ... wakeup fd" on stderr), and the
    blocked main thread still ends. (The tracer's own connection is closed too: the
    trace may miss records, which the run reports; that is not what is checked here.)"""
    script = program("daemonish.py", BLOCKED + """
import os, time
os.closerange(3, 4096)
time.sleep(0.3)  # the watch looks every 0.05 s
main(int(signal.SIGTERM))
""")
    plain = run([PY, script.name], script.parent, None)
    traced = run([PY, script.name], script.parent, tmp_path / "run")

    assert plain.returncode == -signal.SIGTERM
    assert (traced.returncode, traced.stdout, traced.stderr) == (
        plain.returncode, plain.stdout, plain.stderr)


def test_the_program_sees_the_default_where_only_the_tracers_handler_stands(
        program, tmp_path: Path) -> None:
    """The flush-then-die handler ends the process as the default action does; the
    program asks ``signal`` and hears ``SIG_DFL``, as untraced (CPython's
    ``test_signal.PosixTests.test_getsignal`` failed traced)."""
    script = program("asks.py", """
import signal
print(repr(signal.getsignal(signal.SIGTERM)), repr(signal.getsignal(signal.SIGHUP)))
previous = signal.signal(signal.SIGHUP, lambda *args: None)
print(repr(previous), isinstance(previous, signal.Handlers))
""")
    plain = run([PY, script.name], script.parent, None)
    traced = run([PY, script.name], script.parent, tmp_path / "run")

    assert "<Handlers.SIG_DFL: 0>" in plain.stdout
    assert (traced.returncode, traced.stdout) == (plain.returncode, plain.stdout)


TERMINATED_POOL = """
import multiprocessing as mp, sys, time

def work(x):
    return x * 2

if __name__ == "__main__":
    pool = mp.get_context(sys.argv[1]).Pool(2)
    print(pool.apply(work, (7,)), flush=True)
    time.sleep(0.3)  # the workers wait for tasks; terminate() first tells them to leave
    pool.terminate()
    pool.join()
"""


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_signal_during_the_final_flush_waits_for_it(program, tmp_path: Path,
                                                      method: str) -> None:
    """``Pool.terminate`` sends SIGTERM to workers it has just told to leave: it reached
    them inside their final flush, and the handler killed them there, their last
    records lost ("ended without a final flush", every worker, every run). The
    signal now waits for the flush; a worker already ending by itself then ends as it
    was going to (untraced it would have been gone by then)."""
    from distea.analyzer.run import Run

    script = program("pool.py", TERMINATED_POOL)
    plain = run([PY, script.name, method], script.parent, None)
    traced = run([PY, script.name, method], script.parent, tmp_path / "run")
    assert (traced.returncode, traced.stdout) == (plain.returncode, plain.stdout) == (0, "14\n")
    processes = Run.load(tmp_path / "run").processes.values()
    workers = [p for p in processes if p.start_method in ("spawn", "fork")]
    assert len(workers) == 2
    assert all(p.complete for p in processes), [(p.role, p.end_reason) for p in processes]


SIGNALLED_AT_EXIT = """
import atexit, os, signal, sys

class Finalized:
    def __del__(self):  # runs late in the interpreter's finalization, if it gets that far
        os.write(1, b"finalized\\n")

def signal_during_the_final_flush():
    from distea.tracer.session import current
    session = current()
    if session is None:  # untraced: the signal comes at the same point of the exit
        os.kill(os.getpid(), signal.SIGTERM)
        return
    emitter, flush = session.emitter, session.emitter.flush
    def flush_after_the_signal(final=False, wait=False):
        if final:
            os.kill(os.getpid(), signal.SIGTERM)  # the tracer's handler runs inside flush
        flush(final, wait)
    emitter.flush = flush_after_the_signal

kept = Finalized()
atexit.register(signal_during_the_final_flush)
print("done", flush=True)
"""


def test_a_signal_during_the_exit_flush_ends_the_interpreter_after_it(
        program, tmp_path: Path) -> None:
    """Untraced, a SIGTERM that comes while the interpreter exits ends it there (a spawn
    pool's workers that ``terminate`` reaches as they leave die of it). Traced it came
    inside the tracer's final flush, was put off until the flush was done, and then
    dropped: the worker went on finalizing, ~8 ms that the pool's ``join`` waited for,
    and exited 0. Now it is acted on once the trace is whole."""
    script = program("signalled.py", SIGNALLED_AT_EXIT)

    plain = run([PY, script.name], script.parent, None)
    traced = run([PY, script.name], script.parent, tmp_path / "run")

    assert (plain.returncode, plain.stdout) == (-signal.SIGTERM, "done\n")
    assert (traced.returncode, traced.stdout) == (plain.returncode, plain.stdout)
    data = load(tmp_path / "run")
    main = next(p for p in data.processes.values() if p.argv[-1] == script.name)
    assert main.end_reason == "exit"  # the flush the signal came in finished first
    assert data.problems == []
