"""Process lifecycle under tracing: every way a process ends, forks or execs behaves as
without distea (output, stderr, exit status), and the trace says how it ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.helpers import PY, running, start_distea, wait_for
from tests.tracing import run_traced, run_untraced


def same_as_untraced(args: list[str], cwd: Path, run_dir: Path) -> subprocess.CompletedProcess:
    traced = run_traced(args, cwd, run_dir, timeout=60)
    plain = run_untraced(args, cwd, timeout=60)
    assert (traced.result.returncode, traced.result.stdout, traced.result.stderr) == (
        plain.returncode, plain.stdout, plain.stderr)
    return traced.result


def test_os_exit_in_main_process(program, tmp_path: Path) -> None:
    script = program("quits.py", """
        import os
        def work():
            print("working", flush=True)
        work()
        os._exit(4)
    """)
    result = same_as_untraced([PY, script.name], script.parent, tmp_path / "run")
    assert result.returncode == 4
    (info,) = run_traced_data(tmp_path / "run").processes.values()
    assert info.end_reason == "os._exit"
    assert "quits.work" in run_traced_data(tmp_path / "run").executions[info.key]


def run_traced_data(run_dir: Path):  # type: ignore[no-untyped-def]
    from distea.traceformat import load_run

    return load_run(run_dir)


def test_exec_of_a_non_python_program(program, tmp_path: Path) -> None:
    script = program("to_echo.py", """
        import os, sys
        def before():
            print("before", flush=True)
        before()
        try:
            os.execvp("no-such-program-distea", ["no-such-program-distea"])
        except FileNotFoundError:
            print("no such program", flush=True)
        def still_traced():
            pass
        still_traced()
        os.execvp("sh", ["sh", "-c", "echo after; exit 6"])
    """)
    result = same_as_untraced([PY, script.name], script.parent, tmp_path / "run")
    assert (result.returncode, result.stdout) == (6, "before\nno such program\nafter\n")
    data = run_traced_data(tmp_path / "run")
    (info,) = data.processes.values()
    assert info.end_reason == "exec"
    # a failed exec did not end the trace
    assert {"to_echo.before", "to_echo.still_traced"} <= set(data.executions[info.key])


def test_execlp_of_python_through_path(program, tmp_path: Path) -> None:
    script = program("relay.py", """
        import os, sys
        def stage(name):
            print(name, flush=True)
        if len(sys.argv) > 1:
            stage("second")
            sys.exit(2)
        stage("first")
        os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
        os.execlp(os.path.basename(sys.executable), "python", __file__, "again")
    """)
    result = same_as_untraced([PY, script.name], script.parent, tmp_path / "run")
    assert (result.returncode, result.stdout) == (2, "first\nsecond\n")
    data = run_traced_data(tmp_path / "run")
    old, new = sorted(data.processes.values(), key=lambda p: p.started_ns)
    assert (old.end_reason, new.start_method, new.end_reason) == ("exec", "exec", "exit")
    assert old.pid == new.pid


def test_fork_from_a_thread(program, tmp_path: Path) -> None:
    script = program("thread_fork.py", """
        import os, threading, warnings
        warnings.simplefilter("ignore", DeprecationWarning)
        def in_child():
            return 1
        def forker(results):
            pid = os.fork()
            if pid == 0:
                in_child()
                os._exit(5)
            results.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        results = []
        t = threading.Thread(target=forker, args=(results,))
        t.start(); t.join()
        print("child exit", results[0])
    """)
    result = same_as_untraced([PY, script.name], script.parent, tmp_path / "run")
    assert result.stdout == "child exit 5\n"
    data = run_traced_data(tmp_path / "run")
    (child,) = [p for p in data.processes.values() if p.start_method == "fork"]
    assert child.complete and child.end_reason == "os._exit"
    assert "thread_fork.in_child" in data.executions[child.key]


def test_fork_while_the_tracer_is_flushing(program, tmp_path: Path) -> None:
    """One thread floods messages (flushing all the time) while another forks 20 times."""
    script = program("flood_fork.py", """
        import os, socket, threading, warnings
        warnings.simplefilter("ignore", DeprecationWarning)
        stop = threading.Event()
        def flood():
            a, b = socket.socketpair()
            while not stop.is_set():
                a.send(b"x" * 64)
                b.recv(64)
        def in_child(i):
            return i
        t = threading.Thread(target=flood)
        t.start()
        codes = []
        for i in range(20):
            pid = os.fork()
            if pid == 0:
                in_child(i)
                os._exit(i % 7)
            codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        stop.set(); t.join()
        print(codes)
    """)
    result = same_as_untraced([PY, script.name], script.parent, tmp_path / "run")
    assert result.stdout == str([i % 7 for i in range(20)]) + "\n"
    data = run_traced_data(tmp_path / "run")
    children = [p for p in data.processes.values() if p.start_method == "fork"]
    assert len(children) == 20
    assert all(c.complete for c in children)
    assert all("flood_fork.in_child" in data.executions[c.key] for c in children)
    (parent,) = [p for p in data.processes.values() if p.start_method == "main"]
    assert parent.complete and parent.dropped_events == 0


WAITER = """
import os, signal, sys, time
def prepare():
    return 1
def on_term(signum, frame):
    print("graceful", flush=True)
    sys.exit(3)
if sys.argv[1] == "handler":
    signal.signal(signal.SIGTERM, on_term)
prepare()
with open(sys.argv[2], "w") as ready:
    ready.write(str(os.getpid()))
if sys.argv[1] == "catch-int":
    try:
        time.sleep(60)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
time.sleep(60)
"""


def signalled(args: list[str], cwd: Path, ready: Path, signum: int,
              run_dir: Path | None) -> tuple[int, str, str]:
    """Start ARGS (under ``distea run`` when run_dir is given), signal it once it is ready."""
    ready.unlink(missing_ok=True)
    if run_dir is not None:
        proc = start_distea(["run", "-q", "-o", str(run_dir), "--", *args], cwd)
    else:
        proc = subprocess.Popen(args, cwd=cwd, text=True, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    with running(proc):
        wait_for(lambda: ready.exists() and ready.read_text() != "", what="ready")
        os.kill(proc.pid, signum)   # to `distea run` itself: it passes the signal on
        out, err = proc.communicate(timeout=30)
    return proc.returncode, out, err


@pytest.mark.parametrize(("mode", "signum", "expected"), [
    ("plain", signal.SIGTERM, -signal.SIGTERM),
    ("handler", signal.SIGTERM, 3),
    ("plain", signal.SIGINT, -signal.SIGINT),
    ("catch-int", signal.SIGINT, 130),
    ("plain", signal.SIGHUP, -signal.SIGHUP),
])
def test_signals(program, tmp_path: Path, mode: str, signum: int, expected: int) -> None:
    script = program("waiter.py", WAITER)
    ready = tmp_path / "ready"
    args = [PY, script.name, mode, str(ready)]
    plain = signalled(args, script.parent, ready, signum, None)
    traced = signalled(args, script.parent, ready, signum, tmp_path / "run")
    assert plain[0] == expected
    assert traced == plain
    data = run_traced_data(tmp_path / "run")
    (info,) = data.processes.values()
    assert info.complete, data.problems
    if signum in (signal.SIGTERM, signal.SIGHUP) and mode == "plain":
        assert info.end_reason == "signal"
    elif signum == signal.SIGINT and mode == "plain":  # KeyboardInterrupt, uncaught
        assert info.end_reason == "interrupted"
    else:
        assert info.end_reason == "exit"
    assert "waiter.prepare" in data.executions[info.key]
    if mode == "handler":
        assert "waiter.on_term" in data.executions[info.key]


def test_deep_recursion(program, tmp_path: Path) -> None:
    script = program("recurse.py", """
        import sys
        def down(n):
            return down(n + 1)
        try:
            down(0)
        except RecursionError as exc:
            print("caught", type(exc).__name__, flush=True)
        def again(n):
            return again(n + 1)
        again(0)
    """)
    run_dir = tmp_path / "run"
    traced = run_traced([PY, script.name], script.parent, run_dir, timeout=60)
    plain = run_untraced([PY, script.name], script.parent, timeout=60)
    assert (traced.result.returncode, traced.result.stdout) == (plain.returncode, plain.stdout)
    assert plain.stdout == "caught RecursionError\n" and plain.returncode == 1
    last = traced.result.stderr.strip().splitlines()[-1]
    assert last == plain.stderr.strip().splitlines()[-1]
    assert last.startswith("RecursionError: maximum recursion depth exceeded")
    (info,) = traced.data.processes.values()
    assert info.complete
    assert {"recurse.down", "recurse.again"} <= set(traced.data.executions[info.key])


def test_threads_started_and_ended_under_load(program, tmp_path: Path) -> None:
    script = program("churn.py", """
        import socket, threading
        def talk(sock, n):
            for _ in range(n):
                sock.sendall(b"ping")
                sock.recv(4)
        def echo(sock, n):
            for _ in range(n):
                sock.sendall(sock.recv(4))
        def wave(size, n):
            threads = []
            for _ in range(size):
                a, b = socket.socketpair()
                threads += [threading.Thread(target=talk, args=(a, n)),
                            threading.Thread(target=echo, args=(b, n))]
            for t in threads: t.start()
            for t in threads: t.join()
        for _ in range(10):
            wave(8, 200)
        print("threads", threading.active_count())
    """)
    result = same_as_untraced([PY, script.name], script.parent, tmp_path / "run")
    assert result.stdout == "threads 1\n"
    data = run_traced_data(tmp_path / "run")
    (info,) = data.processes.values()
    assert info.complete and info.dropped_events == 0 and info.tracer_errors == 0
    sends = [m for m in data.messages[info.key] if m.direction == "send" and m.kind == "unix"]
    assert sum(m.end - m.start for m in sends) == 2 * 10 * 8 * 200 * 4
    assert {"churn.talk", "churn.echo", "churn.wave"} <= set(data.executions[info.key])


def test_no_thread_or_fork_warning_added(program, tmp_path: Path) -> None:
    """A single-threaded program that forks sees no 'multi-threaded' warning under distea."""
    script = program("single.py", """
        import os, warnings
        warnings.simplefilter("error", DeprecationWarning)
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        print("ok")
    """)
    result = same_as_untraced([PY, script.name], script.parent, tmp_path / "run")
    assert result.stdout == "ok\n" and result.stderr == ""


assert sys.platform.startswith("linux")


def test_blocked_signal_waited_for_with_sigwait(program, tmp_path: Path) -> None:
    """A program that blocks SIGUSR1 and sigwait()s for it gets it (the tracer's
    ZeroMQ threads block every signal, so none of them takes it and dies of it)."""
    script = program("sigwaiter.py", """
        import os, signal, sys, socket
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
        a, b = socket.socketpair()
        a.sendall(b"x"); b.recv(1)            # the tracer has flushed: its threads run
        with open(sys.argv[1], "w") as ready:
            ready.write(str(os.getpid()))
        import time; time.sleep(1.0)         # the signal arrives now: it must stay pending
        print("got", signal.sigwait([signal.SIGUSR1]) == signal.SIGUSR1, flush=True)
    """)
    ready = tmp_path / "ready"
    for run_dir in (None, tmp_path / "run"):
        ready.unlink(missing_ok=True)
        args = [PY, script.name, str(ready)]
        if run_dir is not None:
            proc = start_distea(["run", "-q", "-o", str(run_dir), "--", *args], script.parent)
        else:
            proc = subprocess.Popen(args, cwd=script.parent, text=True, start_new_session=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        with running(proc):
            wait_for(lambda: ready.exists() and ready.read_text() != "", what="ready")
            os.kill(int(ready.read_text()), signal.SIGUSR1)
            out, err = proc.communicate(timeout=30)
        assert (proc.returncode, out, err) == (0, "got True\n", "")
