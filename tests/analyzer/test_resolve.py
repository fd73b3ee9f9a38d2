"""Query forms: names, globs, path:func, path:LINE, --diff; and helpful errors."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from distea.analyzer.resolve import QueryError
from distea.analyzer.run import Run
from tests.analyzer.conftest import load
from tests.analyzer.tracebuilder import TraceBuilder

SOURCE = textwrap.dedent("""\
    def outer():          # 1
        x = 1             # 2
        def inner():      # 3
            return x      # 4
        return inner()    # 5


    class Store:          # 8
        def get(self):    # 9
            return 1      # 10

        def put(self):    # 12
            return 2      # 13


    def never():          # 16
        return 0          # 17
""")


@pytest.fixture
def run(tb: TraceBuilder, tmp_path: Path) -> Run:
    src = tmp_path / "proj" / "pkg" / "mod.py"
    src.parent.mkdir(parents=True)
    src.write_text(SOURCE)
    p = tb.process("A", cwd=str(tmp_path / "proj"))
    f = str(src)
    p.method("pkg.mod:outer", f, 1, 5)
    p.method("pkg.mod:outer.<locals>.inner", f, 3, 4)
    p.method("pkg.mod:Store.get", f, 9, 10)
    p.method("pkg.mod:Store.put", f, 12, 13)
    p.method("pkg.other:declared_only", "pkg/other.py", 1, 2)  # METHOD, never FIRST
    p.run("pkg.mod:outer", 1, 4)
    p.run("pkg.mod:outer.<locals>.inner", 2, 3)
    p.run("pkg.mod:Store.get", 5, 5)
    p.run("pkg.mod:Store.put", 6, 6)
    return load(tb)


def test_exact_names(run: Run) -> None:
    assert run.resolve("pkg.mod.Store.get") == ["pkg.mod.Store.get"]
    assert run.resolve("pkg.mod.outer") == ["pkg.mod.outer"]


def test_glob(run: Run) -> None:
    assert run.resolve("pkg.mod.Store.*") == ["pkg.mod.Store.get", "pkg.mod.Store.put"]
    assert len(run.resolve("pkg.*")) == 4  # declared_only never ran


def test_path_and_function(run: Run, tmp_path: Path) -> None:
    f = str(tmp_path / "proj" / "pkg" / "mod.py")
    assert run.resolve(f"{f}:Store.put") == ["pkg.mod.Store.put"]
    assert run.resolve("pkg/mod.py:outer") == ["pkg.mod.outer"]  # a suffix of the path
    assert run.resolve("pkg/mod.py:get") == ["pkg.mod.Store.get"]  # last part of the qualname


def test_path_and_line_is_innermost(run: Run) -> None:
    assert run.resolve("pkg/mod.py:4") == ["pkg.mod.outer.<locals>.inner"]
    assert run.resolve("pkg/mod.py:2") == ["pkg.mod.outer"]
    assert run.resolve("pkg/mod.py:13") == ["pkg.mod.Store.put"]
    with pytest.raises(QueryError, match="holds line 7"):
        run.resolve("pkg/mod.py:7")


def test_union_of_queries(run: Run) -> None:
    res = run.impact(["pkg.mod.Store.get", "pkg/mod.py:12"])
    assert res.methods == ["pkg.mod.Store.get", "pkg.mod.Store.put"]


def test_unknown_name_suggests_close_names(run: Run) -> None:
    with pytest.raises(QueryError) as info:
        run.resolve("pkg.mod.Stor.get")
    assert "pkg.mod.Store.get" in str(info.value)
    with pytest.raises(QueryError, match="closest traced names"):
        run.resolve("pkgg.mod.outr")


def test_method_that_exists_but_never_ran(run: Run, tmp_path: Path) -> None:
    with pytest.raises(QueryError, match="never ran"):
        run.resolve("pkg/mod.py:never")
    with pytest.raises(QueryError, match="never ran"):
        run.resolve("pkg.mod.never")  # module traced, function in its source
    with pytest.raises(QueryError, match="never executed"):
        run.resolve("pkg.other.declared_only")
    with pytest.raises(QueryError, match="unknown method"):
        run.resolve("pkg.mod.nothing_like_it")


def test_unknown_file(run: Run) -> None:
    with pytest.raises(QueryError, match="no traced file"):
        run.resolve("nowhere/x.py:3")


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
                        "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(repo)})


def test_diff_selects_methods_whose_lines_changed(run: Run, tmp_path: Path) -> None:
    repo = tmp_path / "proj"
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    src = repo / "pkg" / "mod.py"
    lines = src.read_text().splitlines(keepends=True)
    lines[12] = "        return 3      # 13\n"  # inside Store.put
    src.write_text("".join(lines))
    assert run.resolve_diff("HEAD", repo) == ["pkg.mod.Store.put"]
    res = run.impact([], diff="HEAD", repo=repo)
    assert res.methods == ["pkg.mod.Store.put"]
    with pytest.raises(QueryError, match="git diff"):
        run.resolve_diff("no-such-rev", repo)
