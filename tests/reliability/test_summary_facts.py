"""``distea run``'s summary reads a clean run without the trace model
(:func:`distea.cli.runfacts.glance`): what it reads must be what
:func:`distea.traceformat.load_run` reads, and every run that ``load_run`` has
something to report on must be read by ``load_run`` (so the summary's problem
lines are always the ones ``distea show`` prints). Real runs of the real CLI;
then damaged copies of a clean run, where the two readings must agree or the
quick one must step aside."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from distea.cli.runfacts import RunFacts, facts_of, glance
from distea.cli.summary import Terminal, summary_lines
from distea.launcher import RunOutcome
from distea.traceformat import load_run
from tests.reliability.helpers import PY
from tests.tracing import DISTEA

CLEAN = """\
import subprocess, sys
def ask_child():
    out = subprocess.run([sys.executable, "child.py"], capture_output=True, text=True)
    return out.stdout
def run_untraced():
    subprocess.run(["/bin/true"], check=True)
ask_child()
run_untraced()
"""
CHILD = """\
def answer():
    print("forty-two")
answer()
"""
KILLED = """\
import subprocess, sys
CHILD = "import os, signal\\ndef doomed():\\n    os.kill(os.getpid(), signal.SIGKILL)\\ndoomed()\\n"
def work():
    subprocess.run([sys.executable, "-c", CHILD])
work()
"""


def distea_run(tmp_path: Path, name: str, *command: str) -> tuple[Path, str]:
    """``distea run -o NAME -- COMMAND`` with its summary; the run and what it printed."""
    result = subprocess.run([str(DISTEA), "run", "-o", name, "--", *command], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "FORCE_COLOR": "", "NO_COLOR": "1"})
    assert "no summary" not in result.stderr, result.stderr
    return tmp_path / name, result.stderr


def summary_read_whole(run: Path) -> str:
    """The summary as ``load_run``'s reading of ``run`` words it (the outcome from run.json)."""
    meta = json.loads((run / "run.json").read_text())
    outcome = RunOutcome(run.name, meta["exit_code"], meta["finished_at"] - meta["started_at"],
                         meta["collector"]["still_open"])
    out = Terminal(open(os.devnull, "w"))  # noqa: SIM115  # never a terminal: no styles
    out.stream.close()
    return "".join(f"{line}\n" for line in summary_lines(facts_of(load_run(run)), outcome, out))


def test_a_clean_run_reads_the_same_both_ways(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(CLEAN)
    (tmp_path / "child.py").write_text(CHILD)
    run, printed = distea_run(tmp_path, "run", PY, "prog.py")
    quick = glance(str(run))
    assert quick is not None
    assert quick == facts_of(load_run(run))
    # derived from the program: two traced processes, one untraced child, its methods
    assert sorted(p.role for p in quick.processes.values()) == ["child.py", "prog.py"]
    assert {"prog.<module>", "prog.ask_child", "prog.run_untraced", "child.<module>",
            "child.answer"} == quick.methods
    assert [(argv, reason.startswith("not a Python program")) for _, argv, reason
            in quick.untraced] == [(("/bin/true",), True)]
    assert quick.problems == []
    assert printed == summary_read_whole(run)


def test_a_run_with_a_killed_process_is_read_whole(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(KILLED)
    run, printed = distea_run(tmp_path, "run", PY, "prog.py")
    data = load_run(run)
    assert any("ended without a final flush" in p for p in data.problems)
    assert glance(str(run)) is None
    assert printed == summary_read_whole(run)
    lost = [line.removeprefix("lost: ") for line in printed.splitlines()
            if line.startswith("lost: ")]
    assert lost == data.problems


def test_a_run_that_traced_nothing_reads_the_same_both_ways(tmp_path: Path) -> None:
    run, printed = distea_run(tmp_path, "run", "/bin/true")
    quick = glance(str(run))
    assert quick == facts_of(load_run(run)) == RunFacts(str(tmp_path))
    assert printed == summary_read_whole(run)
    assert "no process of this command was traced" in printed


def damaged_copies(run: Path, scratch: Path) -> list[Path]:
    """Copies of ``run``, each damaged one way: logs cut short or with bytes changed,
    a log gone, notes of untraced children or lost records, collector problems."""
    copies: list[Path] = []

    def copy(name: str) -> Path:
        target = scratch / name
        shutil.copytree(run, target)
        copies.append(target)
        return target

    logs = sorted((run / "procs").iterdir())
    for n, log in enumerate(logs):
        size = log.stat().st_size
        for cut in range(1, size, max(1, size // 40)):
            target = copy(f"cut-{n}-{cut}") / "procs" / log.name
            target.write_bytes(log.read_bytes()[:cut])
        for at in range(0, size, max(1, size // 60)):
            for value in (0x00, 0xC1, 0x93, 0xFF):
                target = copy(f"flip-{n}-{at}-{value}") / "procs" / log.name
                body = bytearray(log.read_bytes())
                body[at] = value
                target.write_bytes(bytes(body))
    (copy("log-gone") / "procs" / logs[0].name).unlink()
    for folder in ("untraced", "lost"):
        notes = copy(f"note-{folder}") / folder
        notes.mkdir()
        (notes / "1.json").write_text(json.dumps({"pid": 1, "argv": ["x"], "reason": "r",
                                                  "key": "h:1:1"}))
    for field, value in (("problems", ["a gap"]), ("rejected", 2),
                         ("refused", [{"address": "a"}])):
        target = copy(f"collector-{field}")
        meta = json.loads((target / "run.json").read_text())
        meta["collector"][field] = value
        (target / "run.json").write_text(json.dumps(meta))
    unfinished = copy("unfinished")
    meta = json.loads((unfinished / "run.json").read_text())
    del meta["collector"], meta["finished_at"]
    (unfinished / "run.json").write_text(json.dumps(meta))
    return copies


@pytest.mark.timeout(600)
def test_damaged_runs_are_read_the_same_or_read_whole(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(CLEAN)
    (tmp_path / "child.py").write_text(CHILD)
    run, _ = distea_run(tmp_path, "run", PY, "prog.py")
    scratch = tmp_path / "copies"
    scratch.mkdir()
    quick_ones = 0
    copies = damaged_copies(run, scratch)
    for copy in copies:
        quick = glance(str(copy))
        data = load_run(copy)
        if quick is not None:
            quick_ones += 1
            assert quick == facts_of(data), copy.name
        if data.problems:
            assert quick is None, (copy.name, data.problems)
        shutil.rmtree(copy)
    assert 0 < quick_ones < len(copies)  # some damage changes only values: both read it
