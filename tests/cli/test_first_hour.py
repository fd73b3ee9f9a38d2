"""A newcomer's first hour, through the real ``distea`` command in subprocesses.

Each test pins one thing a new user met (issue 16): the run that queries
read, tracing from another environment, a deleted log, pasteable
suggestions, what a query resolved to, plain words, piped output and what
``show`` says about the run itself.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.tracing import DISTEA

SERVER_AND_CLIENT = '''
import multiprocessing as mp
import sys


class Store:
    def __init__(self):
        self.items = {}

    def put(self, key, value):
        self.items[key] = value
        return len(self.items)

    def never_called(self):
        x = 1
        return x


def serve(conn):
    store = Store()
    while (msg := conn.recv()) is not None:
        conn.send(store.put(*msg))


def produce(n):
    return [(f"key{i}", i * i) for i in range(n)]


def main():
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()
    worker = ctx.Process(target=serve, args=(child,))
    worker.start()
    total = 0
    for item in produce(3):
        parent.send(item)
        total += parent.recv()
    parent.send(None)
    worker.join()
    print("total", total, list(x for x in range(2)))
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)


if __name__ == "__main__":
    main()
'''


def distea(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(DISTEA), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "app.py").write_text(SERVER_AND_CLIENT)
    return root


def test_latest_run_is_the_last_started_and_found_from_a_subdirectory(project: Path) -> None:
    # A run named to sort last (like demo-<pid> after YYYYMMDD-…) but started first.
    runs = project / ".distea" / "runs"
    distea("run", "-q", "-o", str(runs / "zzz-first"), "--", sys.executable, "app.py", "1",
           cwd=project, check=False)
    time.sleep(0.05)
    distea("run", "-q", "--", sys.executable, "app.py", cwd=project)
    shown = json.loads(distea("show", "--json", cwd=project / "sub" / "deeper").stdout)
    assert shown["meta"]["command"][-1] == "app.py"
    assert Path(shown["run"]).name != "zzz-first"
    # the failed run is read when asked for, and marked, not hidden
    failed = distea("show", "--run", str(runs / "zzz-first"), cwd=project)
    assert "exit 1" in failed.stdout
    assert "exit 1" in failed.stderr  # every query notes a failed run


def test_show_names_the_command_outcome_and_verdict(project: Path) -> None:
    distea("run", "-q", "-o", "run", "--", sys.executable, "app.py", cwd=project)
    out = distea("show", "--run", "run", cwd=project).stdout
    command = f"{shlex.quote(sys.executable)} app.py — exit 0"
    assert command in out
    assert "complete: nothing was lost" in out or "problem" in out


def test_a_deleted_process_log_is_a_problem(project: Path) -> None:
    distea("run", "-q", "-o", "run", "--", sys.executable, "app.py", cwd=project)
    logs = sorted((project / "run" / "procs").iterdir())
    assert len(logs) >= 2
    logs[-1].unlink()
    shown = json.loads(distea("show", "--run", "run", "--json", cwd=project).stdout)
    assert any(logs[-1].name in p and "missing" in p for p in shown["problems"])


def paste(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a suggested command line the way a user pasting it into bash would."""
    return subprocess.run(["bash", "-c", line], cwd=cwd, capture_output=True, text=True,
                          timeout=60,
                          env={**os.environ, "PATH": f"{DISTEA.parent}:{os.environ['PATH']}"})


def test_suggested_commands_paste_into_a_shell(project: Path) -> None:
    proc = distea("run", "-o", "run", "--", sys.executable, "app.py", cwd=project)
    (hint,) = [line for line in proc.stderr.splitlines() if line.startswith("next:")]
    suggested = hint.removeprefix("next:").split("   or   ")[0].strip()
    pasted = paste(suggested + " --run run", project)
    assert pasted.returncode == 0, (suggested, pasted.stderr)
    # a generator expression's name holds < and >, which bash reads as redirections
    genexpr = "app.main.<locals>.<genexpr>"
    out = distea("impact", genexpr, "--run", "run", cwd=project).stdout
    (hint,) = [line for line in out.splitlines() if line.startswith("next:")]
    suggested = hint.removeprefix("next:").split("   (")[0].strip()
    pasted = paste(suggested + " --run run", project)
    assert pasted.returncode == 0, (suggested, pasted.stderr)
    assert genexpr in pasted.stdout


def test_queries_say_what_they_resolved_to(project: Path) -> None:
    distea("run", "-q", "-o", "run", "--", sys.executable, "app.py", cwd=project)
    # a class means its methods
    out = distea("impact", "app.Store", "--run", "run", cwd=project).stdout
    assert "app.Store.put" in out.splitlines()[0] and "app.Store.__init__" in out.splitlines()[0]
    # a unique short name resolves, and says to what
    out = distea("impact", "produce", "--run", "run", cwd=project).stdout
    assert out.startswith("produce → 1 function: app.produce")
    # a line inside a method that never ran is refused, not read as <module>
    line = SERVER_AND_CLIENT.splitlines().index("        x = 1") + 1
    proc = distea("impact", f"app.py:{line}", "--run", "run", cwd=project, check=False)
    assert proc.returncode == 1 and "Store.never_called, which never ran" in proc.stderr
    # a missing repository is named as such
    proc = distea("impact", "--diff", "HEAD", "--repo", "/nonexistent", "--run", "run",
                  cwd=project, check=False)
    assert proc.returncode == 1 and "no such directory" in proc.stderr
    # errors asked for as JSON come as JSON, same status
    proc = distea("impact", "app.nothing", "--run", "run", "--json", cwd=project, check=False)
    assert proc.returncode == 1 and "unknown method" in json.loads(proc.stderr)["error"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_diff_of_a_function_body_is_that_function_not_the_module(project: Path) -> None:
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=project, check=True)
    subprocess.run([*git, "add", "app.py"], cwd=project, check=True)
    subprocess.run([*git, "commit", "-qm", "app"], cwd=project, check=True)
    distea("run", "-q", "-o", "run", "--", sys.executable, "app.py", cwd=project)
    source = (project / "app.py").read_text()
    (project / "app.py").write_text(source.replace("i * i", "i * i + 1"))
    out = json.loads(distea("impact", "--diff", "HEAD", "--run", "run", "--json",
                            cwd=project).stdout)
    assert out["methods"] == ["app.produce"]


def test_plain_words_and_full_names_when_piped(project: Path) -> None:
    distea("run", "-q", "-o", "run", "--", sys.executable, "app.py", cwd=project)
    out = distea("impact", "app.produce", "--run", "run", cwd=project).stdout
    assert "can reach" in out and "functions in 2 processes" in out
    assert "MCov" not in out and "pairs" not in out
    assert "app.py:" in out  # file:line of every function
    methods = distea("methods", "--run", "run", cwd=project).stdout
    assert "…" not in methods and "app.Store.never_called" not in methods
    long_name = "app.serve"
    assert any(line.startswith(long_name + " ") for line in methods.splitlines())
    assert "1 processes" not in distea("show", "--run", "run", cwd=project).stdout
    helped = distea("--help", cwd=project).stdout
    assert "…" not in helped and "(backward)." in helped


def test_untraced_child_keeps_its_module_name(project: Path, tmp_path: Path) -> None:
    old = shutil.which("python3.11")
    if old is None:
        pytest.skip("no Python older than 3.12 on PATH to start an untraced child")
    (project / "starter.py").write_text(
        "import subprocess\n"
        f"subprocess.run([{old!r}, '-m', 'json.tool', '--help'], capture_output=True)\n")
    distea("run", "-q", "-o", "run", "--", sys.executable, "starter.py", cwd=project)
    shown = json.loads(distea("show", "--run", "run", "--json", cwd=project).stdout)
    (child,) = shown["untraced"]
    assert "-m json.tool" in " ".join(child["argv"])


def test_an_interrupted_process_is_not_listed_as_exited(project: Path) -> None:
    (project / "ctrl_c.py").write_text(
        "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)\n")
    distea("run", "-q", "-o", "run", "--", sys.executable, "ctrl_c.py", cwd=project,
           check=False)
    shown = json.loads(distea("show", "--run", "run", "--json", cwd=project).stdout)
    (proc,) = shown["processes"]
    assert proc["end_reason"] == "interrupted"


def test_an_empty_run_says_so_without_a_next_hint(project: Path) -> None:
    proc = distea("run", "-o", "run", "--", "/bin/true", cwd=project)
    assert "no process of this command was traced" in proc.stderr
    assert "next:" not in proc.stderr


def test_traces_a_python_of_another_environment(project: Path, tmp_path: Path) -> None:
    """distea installed as a tool: the program's own venv has neither distea nor msgpack."""
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    (project / "check_msgpack.py").write_text(
        "import importlib.util\n"
        "print('msgpack', importlib.util.find_spec('msgpack') is not None)\n")
    untraced = subprocess.run([str(python), "check_msgpack.py"], cwd=project,
                              capture_output=True, text=True, check=True)
    traced = distea("run", "-o", "run", "--", str(python), "check_msgpack.py", cwd=project)
    assert traced.stdout == untraced.stdout == "msgpack False\n"
    shown = json.loads(distea("show", "--run", "run", "--json", cwd=project).stdout)
    assert len(shown["processes"]) == 1 and shown["untraced"] == []
