"""The query commands through click, and once through the real ``distea`` script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from distea.cli import main
from tests.analyzer.tracebuilder import TraceBuilder


@pytest.fixture
def run_dir(tb: TraceBuilder) -> Path:
    a, b, c = tb.process("A"), tb.process("B"), tb.process("C", complete=False)
    a.run("app.q", 1, 2)
    a.send(3, "tcp", "a>b", 0, 10, method="app.q")
    a.run("app.a_after", 4, 5)
    a.send(6, "tcp", "a>nobody", 0, 3)
    b.run("app.b_before", 1, 1)
    b.recv(2, "tcp", "a>b", 0, 10)
    b.run("app.b_after", 3, 3)
    b.send(4, "mp", "q1", fp="x")
    b.recv(5, "udp", "ext>b", fp="z")  # from an untraced peer
    b.untraced(99, ["bash", "-c", "true"], "not a Python program")
    c.run("app.c_before", 1, 6)
    c.recv(7, "mp", "q1", fp="x")
    c.run("app.c_after", 8, 9)
    return tb.write()


def invoke(*args: str) -> object:
    return CliRunner().invoke(main, list(args))


def test_impact_json_schema(run_dir: Path) -> None:
    result = invoke("impact", "app.q", "--run", str(run_dir), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema"] == 1 and data["command"] == "impact"
    assert data["queries"] == ["app.q"] and data["methods"] == ["app.q"]
    assert data["size"] == 4
    assert data["baselines"] == {"mcov": 6, "distia": 4}
    procs = {p["role"]: p for p in data["processes"]}
    assert procs["B"]["methods"] == ["app.b_after"] and procs["B"]["start"] == 2
    assert procs["C"]["methods"] == ["app.c_after"] and procs["C"]["pid"] == 3
    assert data["messages"]["external"] == 1
    assert data["problems"]


def test_impact_terminal(run_dir: Path) -> None:
    result = invoke("impact", "app.q", "--run", str(run_dir))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "app.c_after" in out and "app.c_before" not in out
    assert "can reach 4 functions in 3 processes" in out
    assert "MCov" not in out and "(process, method)" not in out and "clock" not in out
    assert "C (pid 3) — 1 function\n" in out
    assert "next: distea explain" in out
    assert "problem" in out


def test_impact_verbose_shows_clocks_and_baselines(run_dir: Path) -> None:
    result = invoke("impact", "app.q", "--run", str(run_dir), "--verbose")
    assert result.exit_code == 0, result.output
    assert "MCov 6" in result.stdout and "DistIA 4" in result.stdout
    assert "impact from clock 2" in result.stdout


def test_deps_and_explain_json(run_dir: Path) -> None:
    result = invoke("deps", "app.c_after", "--run", str(run_dir), "--json")
    data = json.loads(result.stdout)
    assert data["command"] == "deps" and data["size"] == 5
    result = invoke("explain", "app.q", "app.c_after", "--run", str(run_dir), "--json")
    data = json.loads(result.stdout)
    assert data["impacted"] is True and data["messages"] == 2
    assert [s["action"] for s in data["steps"]] == ["start", "send", "recv", "send", "recv",
                                                     "runs"]
    assert data["process"]["role"] == "C"
    result = invoke("explain", "app.q", "app.c_after", "--run", str(run_dir))
    assert result.exit_code == 0 and "impacted by app.q" in result.stdout


def test_show_json_counts_everything(run_dir: Path) -> None:
    result = invoke("show", "--run", str(run_dir), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert isinstance(data["processes"], list) and len(data["processes"]) == 3
    msgs = data["messages"]
    assert (msgs["matched"], msgs["ambiguous"], msgs["external"]) == (2, 0, 1)
    assert msgs["unmatched_sends"] == 1 and msgs["unmatched"] == 2
    assert msgs["by_kind"]["udp"]["external"] == 1
    assert data["untraced"][0]["pid"] == 99
    problems = " ".join(data["problems"])
    assert "without a final flush" in problems  # C has no END record
    assert "not traced" in problems and "no recorded send" in problems


def test_show_and_methods_terminal(run_dir: Path) -> None:
    result = invoke("show", "--run", str(run_dir))
    assert result.exit_code == 0 and "matched 2" in result.stdout
    result = invoke("methods", "app.b*", "--run", str(run_dir), "--json")
    names = [m["name"] for m in json.loads(result.stdout)["methods"]]
    assert names == ["app.b_after", "app.b_before"]


def test_errors_are_one_line_without_traceback(run_dir: Path, tmp_path: Path) -> None:
    result = invoke("impact", "app.qq", "--run", str(run_dir))
    assert result.exit_code != 0
    assert "app.q" in result.stderr and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1
    result = invoke("show", "--run", str(tmp_path / "missing"))
    assert result.exit_code != 0 and "no run directory" in result.stderr
    bad = tmp_path / "bad"
    (bad / "procs").mkdir(parents=True)
    (bad / "run.json").write_text("{not json")
    result = invoke("show", "--run", str(bad))
    assert result.exit_code != 0 and "unreadable" in result.stderr
    assert "Traceback" not in result.output


def test_cycle_is_an_error_line(tb: TraceBuilder) -> None:
    a, b = tb.process("A"), tb.process("B")
    a.recv(1, "tcp", "b>a", 0, 1)
    a.send(2, "tcp", "a>b", 0, 1)
    b.recv(3, "tcp", "a>b", 0, 1)
    b.send(5, "tcp", "b>a", 0, 1)
    result = invoke("show", "--run", str(tb.write()))
    assert result.exit_code != 0 and "cycle" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_default_run_is_the_latest(tb: TraceBuilder, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    tb.path = tmp_path / ".distea" / "runs" / "20260101-000000-00001"
    tb.process("A").run("app.x", 1, 1)
    tb.write()
    monkeypatch.chdir(tmp_path)
    result = invoke("methods", "--json")
    assert result.exit_code == 0, result.output
    assert [m["name"] for m in json.loads(result.stdout)["methods"]] == ["app.x"]


def test_real_console_script(run_dir: Path) -> None:
    script = Path(sys.executable).parent / "distea"
    if not script.exists():
        pytest.skip("the distea console script is not installed next to this Python")
    proc = subprocess.run([str(script), "show", "--run", str(run_dir), "--json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["messages"]["matched"] == 2
    proc = subprocess.run([str(script), "impact", "nope.nothing", "--run", str(run_dir)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr


def test_truncated_log_is_reported(tb: TraceBuilder) -> None:
    a = tb.process("A")
    a.run("app.x", 1, 2)
    a.run("app.y", 3, 4)
    a.truncate_bytes = 3
    run_dir = tb.write()
    data = json.loads(invoke("show", "--run", str(run_dir), "--json").stdout)
    assert any("truncated" in p or "torn" in p or "corrupt" in p for p in data["problems"])


def test_impact_diff_from_the_command_line(tb: TraceBuilder, tmp_path: Path) -> None:
    repo = tmp_path / "proj"
    repo.mkdir()
    src = repo / "app.py"
    src.write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin:/usr/local/bin",
           "HOME": str(repo)}
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=env)
    src.write_text("def f():\n    return 1\n\n\ndef g():\n    return 3\n")
    p = tb.process("A")
    p.method("app.f", str(src), 1, 2)
    p.method("app.g", str(src), 5, 6)
    p.run("app.f", 1, 1)
    p.run("app.g", 2, 2)
    result = invoke("impact", "--diff", "HEAD", "--repo", str(repo), "--run", str(tb.write()),
                    "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["methods"] == ["app.g"] and data["queries"] == ["--diff HEAD"]


def test_clean_run_has_no_problems(tb: TraceBuilder) -> None:
    a, b = tb.process("A"), tb.process("B")
    a.run("app.f", 1, 1)
    a.send(2, "mp", "a>b")
    b.recv(1, "mp", "a>b")
    data = json.loads(invoke("show", "--run", str(tb.write()), "--json").stdout)
    assert data["problems"] == []
    assert data["messages"]["matched"] == 1 and data["messages"]["unmatched"] == 0
