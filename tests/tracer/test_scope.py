"""What counts as the user's code, and the names methods get."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.tracing import run_traced

LIB = '''
def helper():
    return 1
'''

APP = '''
import json
from pkg import lib

def main():
    lib.helper()
    json.dumps({})

main()
'''


def write_tree(root: Path) -> None:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "lib.py").write_text(LIB)
    (root / "app.py").write_text(APP)


def traced_names(tmp_path: Path, *options: str) -> set[str]:
    root = tmp_path / "project"
    write_tree(root)
    traced = run_traced([sys.executable, "app.py"], root, tmp_path / "run", *options)
    assert traced.result.returncode == 0, traced.result.stderr
    (executions,) = traced.data.executions.values()
    return set(executions)


def test_default_scope_is_the_project_not_the_stdlib(tmp_path: Path) -> None:
    names = traced_names(tmp_path)
    assert {"app.main", "app.<module>", "pkg.lib.helper", "pkg.lib.<module>"} <= names
    assert not any(n.startswith(("json", "encodings", "distea")) for n in names)


def test_exclude_glob_removes_a_package(tmp_path: Path) -> None:
    names = traced_names(tmp_path, "--exclude", "pkg.*")
    assert "app.main" in names
    assert not any(n.startswith("pkg.") for n in names)


def test_include_glob_adds_library_code(tmp_path: Path) -> None:
    names = traced_names(tmp_path, "--include", "json.*")
    assert "json.dumps" in names
    assert "app.main" in names


def test_a_file_is_resolved_as_realpath_resolves_it(tmp_path: Path) -> None:
    """Directories are resolved once each; a symlinked directory or file still lands
    where ``os.path.realpath`` says (a package linked into the project is the user's,
    a module linked out of it is not)."""
    from distea.tracer.scope import Scope

    root, outside = tmp_path / "project", tmp_path / "elsewhere"
    (root / "pkg").mkdir(parents=True)
    (outside / "lib").mkdir(parents=True)
    for path in (root / "pkg" / "own.py", outside / "lib" / "far.py"):
        path.write_text("")
    (root / "linked").symlink_to(outside / "lib")  # a directory linked out of the project
    (root / "pkg" / "alias.py").symlink_to(outside / "lib" / "far.py")  # a file linked out
    (outside / "lib" / "back.py").symlink_to(root / "pkg" / "own.py")  # a file linked in
    # below a directory resolved already: a real one, one linked out, and one below that
    (root / "pkg" / "real").mkdir()
    (root / "pkg" / "out").symlink_to(outside / "lib")
    (outside / "lib" / "deeper").mkdir()
    for path in (root / "pkg" / "real" / "sub.py", outside / "lib" / "deeper" / "low.py"):
        path.write_text("")
    scope = Scope(str(root))
    files = [root / "pkg" / "own.py", root / "pkg" / "alias.py", root / "linked" / "far.py",
             outside / "lib" / "back.py", outside / "lib" / "far.py",
             root / "pkg" / "real" / "sub.py", root / "pkg" / "out" / "far.py",
             root / "pkg" / "out" / "deeper" / "low.py", root / "pkg" / "gone.py"]
    for path in files * 2:  # the second time from the directory cache
        resolved = scope._real_path(str(path))
        assert resolved == os.path.realpath(path), path
    assert [scope._classify(str(path)) is not None for path in files] == [
        True, False, False, True, False, True, False, False, True]
