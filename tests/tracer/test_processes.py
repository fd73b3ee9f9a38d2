"""Every Python process a command starts is traced and linked to its parent."""

from __future__ import annotations

import ast
import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distea.model import RunData
from tests.tracing import DISTEA, run_traced, run_untraced


def parent_of(data: RunData) -> dict[str, str | None]:
    """process key → key of the process whose spawn/fork token it received."""
    senders = {e.channel: key for key, events in data.messages.items()
               for e in events if e.kind == "proc" and e.direction == "send"}
    return {key: senders.get(info.parent_token or "") for key, info in data.processes.items()}


def children_of_the_root(data: RunData) -> int:
    """How many processes the run's one root process started itself."""
    parents = parent_of(data)
    (root,) = [k for k, parent in parents.items() if parent is None]
    return list(parents.values()).count(root)


def by_role(data: RunData, role: str) -> list[str]:
    return [k for k, p in data.processes.items() if p.role == role]


CHAIN = """
import subprocess, sys

def level(depth):
    print("level", depth, flush=True)
    if depth < 3:
        subprocess.run([sys.executable, __file__, str(depth + 1)], check=True)

level(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
"""


def test_subprocess_chain_three_deep(program, tmp_path: Path) -> None:
    script = program("chain.py", CHAIN)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert traced.result.returncode == 0, traced.result.stderr
    assert traced.result.stdout == "level 1\nlevel 2\nlevel 3\n"
    data = traced.data
    assert len(data.processes) == 3
    parents = parent_of(data)
    roots = [k for k, p in parents.items() if p is None]
    assert len(roots) == 1
    chain = [roots[0]]
    while len(chain) < 3:
        children = [k for k, p in parents.items() if p == chain[-1]]
        assert len(children) == 1, parents
        chain.append(children[0])
    infos = [data.processes[k] for k in chain]
    assert [i.start_method for i in infos] == ["main", "subprocess", "subprocess"]
    assert infos[1].ppid == infos[0].pid and infos[2].ppid == infos[1].pid
    assert all("chain.level" in data.executions[k] for k in chain)
    assert all(p.complete for p in infos)
    # each parent's wait received the exit of its child
    for parent, child in itertools.pairwise(chain):
        exits = [e for e in data.messages[parent] if e.kind == "exit" and e.direction == "recv"]
        assert [e.channel.split(":")[1] for e in exits] == [str(data.processes[child].pid)]


POOL = """
import multiprocessing as mp, sys

def square(x):
    return x * x

if __name__ == "__main__":
    mp.set_start_method(sys.argv[1])
    pool = mp.Pool(2)
    print(sum(pool.map(square, range(20))))
    pool.close()
    pool.join()
"""


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_multiprocessing_pool_children_traced(program, tmp_path: Path, method: str) -> None:
    script = program("pool.py", POOL)
    traced = run_traced([sys.executable, script.name, method], script.parent, tmp_path / "run")
    untraced = run_untraced([sys.executable, script.name, method], script.parent)
    assert (traced.result.returncode, traced.result.stdout, traced.result.stderr) == (
        untraced.returncode, untraced.stdout, untraced.stderr)
    data = traced.data
    workers = [p for p in data.processes.values() if p.role.startswith(
        ("ForkPoolWorker", "SpawnPoolWorker", "ForkServerPoolWorker"))]
    assert len(workers) >= 2, [p.role for p in data.processes.values()]
    expected = "fork" if method != "spawn" else "spawn"
    assert {w.start_method for w in workers} == {expected}
    ran_square = [k for k, ex in data.executions.items() if "pool.square" in ex]
    assert ran_square and all(data.processes[k] in workers for k in ran_square)
    parents = parent_of(data)
    assert all(parents[w.key] is not None for w in workers)


FORK = """
import os

def in_child():
    return 7

def main():
    pid = os.fork()
    if pid == 0:
        in_child()
        os._exit(3)
    _, status = os.waitpid(pid, 0)
    print("child status", os.waitstatus_to_exitcode(status))

main()
"""


def test_os_fork_without_exec(program, tmp_path: Path) -> None:
    script = program("forker.py", FORK)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert traced.result.stdout == "child status 3\n"
    assert traced.result.stderr == ""
    data = traced.data
    (child,) = [p for p in data.processes.values() if p.start_method == "fork"]
    (parent,) = [p for p in data.processes.values() if p.start_method == "main"]
    assert child.end_reason == "os._exit"
    assert parent_of(data)[child.key] == parent.key
    assert "forker.in_child" in data.executions[child.key]
    assert "forker.in_child" not in data.executions[parent.key]
    # the forked child is executing main(): it started there at its first event
    assert data.executions[child.key]["forker.main"].first == 2


EXEC = """
import os, sys

def before_exec():
    os.execv(sys.executable, [sys.executable, __file__, "after"])

if len(sys.argv) > 1:
    print("new image", flush=True)
else:
    before_exec()
"""


def test_exec_of_python_links_the_new_image(program, tmp_path: Path) -> None:
    script = program("execer.py", EXEC)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert traced.result.stdout == "new image\n"
    data = traced.data
    old, new = sorted(data.processes.values(), key=lambda p: p.started_ns)
    assert old.pid == new.pid
    assert old.end_reason == "exec" and new.start_method == "exec"
    assert parent_of(data)[new.key] == old.key


def test_untraceable_children_are_reported(program, tmp_path: Path) -> None:
    script = program("isolated.py", """
        import subprocess, sys
        subprocess.run([sys.executable, "-I", "-c", "print('isolated')"], check=True)
        subprocess.run([sys.executable, "-c", "print('plain')"], check=True)
    """)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert traced.result.stdout == "isolated\nplain\n"
    data = traced.data
    assert len(data.processes) == 2
    assert [c.reason for c in data.untraced] == ["isolated mode (-I)"]


def test_shell_script_starting_python(program, tmp_path: Path) -> None:
    script = program("hello.py", "def hello():\n    print('hi')\nhello()\n")
    shell = script.parent / "start.sh"
    shell.write_text(f"#!/bin/sh\n{sys.executable} hello.py\n{sys.executable} hello.py\n")
    shell.chmod(0o755)
    traced = run_traced(["./start.sh"], script.parent, tmp_path / "run")
    assert traced.result.stdout == "hi\nhi\n"
    data = traced.data
    assert len(data.processes) == 2
    assert all("hello.hello" in ex for ex in data.executions.values())


def test_exit_code_and_output_unchanged(program, tmp_path: Path) -> None:
    script = program("fails.py", """
        import sys
        def compute():
            print("out"); print("err", file=sys.stderr)
            raise SystemExit(5)
        compute()
    """)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    untraced = run_untraced([sys.executable, script.name], script.parent)
    assert (traced.result.returncode, traced.result.stdout, traced.result.stderr) == (
        5, "out\n", "err\n")
    assert untraced.returncode == 5
    assert "fails.compute" in next(iter(traced.data.executions.values()))


def test_a_child_inherits_the_environment_as_putenv_left_it(program, tmp_path: Path
                                                            ) -> None:
    """``os.putenv`` in a ``preexec_fn``, and in the parent outside ``os.environ``,
    reaches a child that inherits the environment (CPython's ``test_subprocess.
    test_preexec`` and ``test_os.test_putenv_unsetenv`` failed traced: the tracer's
    variables went in as a whole environment built from ``os.environ``); each child is
    still traced and linked to its parent."""
    script = program("preexec.py", """
        import os, subprocess, sys
        def spawn(name, **options):
            return subprocess.run(
                [sys.executable, "-c", f"import os; print(os.getenv({name!r}))"],
                capture_output=True, text=True, check=True, **options).stdout.strip()
        print(spawn("FRUIT", preexec_fn=lambda: os.putenv("FRUIT", "apple")))
        os.putenv("VEGETABLE", "leek")
        print(spawn("VEGETABLE"))
    """)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    untraced = run_untraced([sys.executable, script.name], script.parent)
    assert untraced.stdout == "apple\nleek\n"
    assert (traced.result.returncode, traced.result.stdout) == (0, untraced.stdout)
    assert len(traced.data.processes) == 3 and children_of_the_root(traced.data) == 2


def test_the_programs_own_errors_are_not_tracer_errors(tmp_path: Path) -> None:
    """``fork_exec`` given arguments it rejects, a pipe written after its descriptor was
    closed under it: the program meets the same errors as untraced, and the run counts
    no tracer error (CPython's ``test_subprocess`` showed "counted 4 tracer error(s)")."""
    from tests.channels.support import run_both

    script = tmp_path / "app" / "errors.py"
    script.parent.mkdir()
    script.write_text("""
import _posixsubprocess, os
try:
    _posixsubprocess.fork_exec(1, [b"true"], True, (), None, 2, -1, -1, -1, -1, -1, -1,
                               *os.pipe(), False, False, -1, None, None, None, -1, None,
                               False)
except TypeError as exc:
    print("fork_exec:", type(exc).__name__)
r, w = os.pipe()
stream = open(w, "wb", buffering=0)
os.close(w)
try:
    stream.write(b"x")
except OSError as exc:
    print("write:", exc.strerror)
""")
    traced = run_both(script)
    assert traced.stdout == "fork_exec: TypeError\nwrite: Bad file descriptor\n"
    assert traced.errors() == 0, traced.run.problems


SYSTEM = """
import os, sys

def produce():
    return "7"

def use(x):
    return int(x) * 2

def report(n):
    sys.exit(n)

def after(status):
    return os.waitstatus_to_exitcode(status)

if len(sys.argv) > 1:
    print(use(sys.argv[1]), flush=True)
    report(3)
else:
    status = os.system(f"{sys.executable} {__file__} {produce()}")
    print(after(status))
"""


def test_os_system_links_the_programs_its_shell_runs(program, tmp_path: Path) -> None:
    """``os.system`` spawns ``/bin/sh`` from C: the Python program it runs gets the
    spawn's token (the parent's ``produce`` reaches its ``use`` through the command
    line), and the return of ``os.system`` comes after that program's exit (its
    ``report`` reaches the parent's ``after`` through the exit status). Before, the
    child was an unrelated root: both effects were missed, silently."""
    script = program("system.py", SYSTEM)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    untraced = run_untraced([sys.executable, script.name], script.parent)
    assert untraced.stdout == "14\n3\n"
    assert (traced.result.returncode, traced.result.stdout) == (0, untraced.stdout)
    from distea.analyzer.run import Run

    run = Run.load(traced.run_dir)
    (parent,) = [k for k, p in run.processes.items() if len(p.argv) == 2]
    (child,) = [k for k, p in run.processes.items() if len(p.argv) == 3]
    assert run.processes[child].start_method == "subprocess"
    assert "system.use" in run.impact("system.produce").impacted[child]
    assert "system.after" in run.impact("system.report").impacted[parent]
    assert run.matching.external == 0, run.problems
    assert [u.reason for u in run.data.untraced] == ["not a Python program (sh)"]


OWN_ENVIRONMENT = """
import os, subprocess, sys

def produce():
    return "7"

def use(x):
    return int(x) * 2

if len(sys.argv) > 1:
    print(use(sys.argv[1]), os.environ.get("PYTHONPATH", "").split(os.pathsep)[-1],
          flush=True)
else:
    subprocess.run([sys.executable, __file__, produce()], check=True,
                   env={"PATH": os.environ["PATH"], "PYTHONPATH": "mine"})
    pid = os.posix_spawn(sys.executable, [sys.executable, __file__, produce()],
                         {"PYTHONPATH": "mine"})
    os.waitpid(pid, 0)
"""


def test_a_child_given_its_own_environment_is_traced(program, tmp_path: Path) -> None:
    """``env=`` with a few chosen variables (``subprocess``, ``os.posix_spawn``): the
    child still gets the run's variables and the start-up hook before its own
    ``PYTHONPATH``, so it is traced and linked (it was neither, and the run blamed
    its missing exit on a kill)."""
    script = program("ownenv.py", OWN_ENVIRONMENT)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    untraced = run_untraced([sys.executable, script.name], script.parent)
    assert untraced.stdout == "14 mine\n14 mine\n"
    assert (traced.result.returncode, traced.result.stdout) == (0, untraced.stdout)
    assert len(traced.data.processes) == 3 and children_of_the_root(traced.data) == 2
    assert not traced.data.untraced


PSEUDO_TERMINAL = """
import os, pty

def produce():
    return b"payload\\n"

pid, master = pty.fork()
if pid == 0:
    os.write(1, produce())
    os._exit(0)
data = b""
while not data.endswith(b"\\n"):
    try:
        chunk = os.read(master, 100)
    except OSError:
        break
    if not chunk:
        break
    data += chunk
os.waitpid(pid, 0)
print(data.strip().decode())
"""


def test_a_pseudo_terminal_is_named_not_silent(program, tmp_path: Path) -> None:
    """``pty.fork``: the child's output reaches the parent through a pseudo-terminal,
    whose line discipline rewrites bytes; not recorded, so every query says so (it was
    a silent miss: the parent's use of the output was not in ``produce``'s impact)."""
    script = program("terminal.py", PSEUDO_TERMINAL)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert (traced.result.returncode, traced.result.stdout) == (0, "payload\n")
    lines = [p for p in traced.data.problems if "pseudo-terminal" in p]
    assert len(lines) == 2 and all("not recorded" in line for line in lines), lines


def test_the_tracer_starts_without_importing_typing(program, tmp_path: Path) -> None:
    """typing costs a traced process ~5 ms at start-up; a program that does not
    import it must not pay for it (the tracer's seams are for type checkers)."""
    script = program("probe.py", """
        import sys
        def report():
            print(sorted(m for m in ("typing", "distea.tracer.seams") if m in sys.modules))
        report()
    """)
    untraced = run_untraced([sys.executable, script.name], script.parent)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert untraced.stdout == "[]\n", untraced.stderr
    assert traced.result.stdout == "[]\n", traced.result.stderr
    assert "probe.report" in next(iter(traced.data.executions.values()))


START_UP_MODULES = ("typing", "socket", "enum", "json", "re", "threading", "signal", "msgpack",
                    "_posixsubprocess",
                    "collections", "contextlib", "weakref", "sysconfig", "importlib.util")
"""Modules a traced process used to load for the tracer, ~1-5 ms each at start-up."""


def test_the_tracer_loads_no_module_the_program_does_not(program, tmp_path: Path) -> None:
    """A traced child process finds loaded exactly what it finds untraced among the
    costly modules (the tracer's channels wait for their library to be imported),
    and its functions are still recorded."""
    script = program("lean.py", f"""
        import subprocess, sys
        CHILD = "import sys; print(sorted(m for m in {START_UP_MODULES!r} if m in sys.modules))"
        def report():
            subprocess.run([sys.executable, "-c", CHILD], check=True)
        report()
    """)
    untraced = run_untraced([sys.executable, script.name], script.parent)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert untraced.returncode == 0, untraced.stderr
    assert traced.result.stdout == untraced.stdout, traced.result.stderr
    assert len(traced.data.processes) == 2
    assert any("lean.report" in methods for methods in traced.data.executions.values())


TRACER_ONLY_MODULES = {"sitecustomize", "atexit", "itertools", "_collections", "_json", "_socket"}
"""All that a traced process loads besides distea's own modules: the bootstrap hook, and
the built-in and C modules the tracer uses itself (the config's JSON scanner, the
collector's socket), none of them Python code to execute."""


def test_the_tracer_loads_nothing_else_the_program_does_not(program, tmp_path: Path) -> None:
    """Every module a traced child has loaded is one its untraced run has, one of distea's,
    or one of ``TRACER_ONLY_MODULES``: ``__future__`` was loaded into every traced
    process by the ``from __future__ import annotations`` of distea's modules."""
    script = program("modules.py", """
        import subprocess, sys
        CHILD = "import sys; print(sorted(m for m in sys.modules if m.split('.')[0] != 'distea'))"
        subprocess.run([sys.executable, "-c", CHILD], check=True)
    """)
    untraced = run_untraced([sys.executable, script.name], script.parent)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert untraced.returncode == traced.result.returncode == 0, traced.result.stderr
    plain, seen = (set(ast.literal_eval(out)) for out in (untraced.stdout,
                                                             traced.result.stdout))
    assert seen - plain <= TRACER_ONLY_MODULES, sorted(seen - plain - TRACER_ONLY_MODULES)
    assert plain <= seen


def test_the_program_keeps_its_bytecode_setting(program, tmp_path: Path) -> None:
    """The tracer writes its own bytecode caches whatever PYTHONDONTWRITEBYTECODE says,
    but the program still runs with the flag it was given, and writes none of its own."""
    program("helper.py", "VALUE = 1\n")
    script = program("flag.py", """
        import sys
        import helper
        print(sys.dont_write_bytecode, sys.flags.dont_write_bytecode, helper.VALUE)
    """)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run", env=env)
    assert traced.result.stdout == "True 1 1\n", traced.result.stderr
    assert not (script.parent / "__pycache__").exists()


def test_a_command_that_starts_no_traced_python_ends_promptly(tmp_path: Path) -> None:
    """Nothing ever connects to the collector: the run must not wait out its flush timeout."""
    result = subprocess.run(
        [str(DISTEA), "run", "-q", "-o", str(tmp_path / "run"), "--flush-timeout", "60", "--",
         "sh", "-c", "echo plain"],
        capture_output=True, text=True, timeout=20)
    assert (result.returncode, result.stdout) == (0, "plain\n")


def test_sigterm_right_after_fork_still_kills_the_child(program, tmp_path: Path) -> None:
    """CPython drops a signal that beats a child's post-fork clean-up when a Python
    handler is installed; our flush handler must not turn such a kill into nothing."""
    script = program("sigfork.py", """
        import os, signal, time
        codes = []
        for _ in range(3):
            pid = os.fork()
            if pid == 0:
                time.sleep(2)
                os._exit(7)
            os.kill(pid, signal.SIGTERM)
            codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        print(codes)
    """)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert traced.result.stdout == "[-15, -15, -15]\n", traced.result.stderr
