"""Turn what users type into method names of a run.

Accepted forms (DESIGN.md §3), each resolving to one or more methods:

- ``pkg.mod.func``, ``pkg.mod.Class.meth``: an exact traced name;
- ``pkg.mod.*`` (any ``fnmatch`` glob): every traced name that matches;
- ``path/file.py:func`` or ``path/file.py:Class.meth``: by file and qualname
  (or the last part of the qualname when that is unique);
- ``path/file.py:LINE``: the innermost traced method whose lines hold LINE;
- :func:`diff_methods`: methods whose lines intersect ``git diff -U0 REV``.

Errors are :class:`QueryError` with one clear sentence: unknown names list
the closest traced names; a method that exists in the code but never ran in
this run is reported as such rather than as unknown.
"""

from __future__ import annotations

import ast
import difflib
import fnmatch
import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from distea.model import Method

GLOB_CHARS = frozenset("*?[")


class QueryError(Exception):
    """A query that names nothing in this run; the message says what is close."""


def resolve(
    query: str,
    methods: Mapping[str, Method],
    executed: set[str],
    *,
    base: Path | None = None,
) -> list[str]:
    """Method names for ``query``, limited to methods executed in this run.

    ``base`` is the directory relative paths are tried against besides the
    current directory (the traced program's working directory).
    """
    query = query.strip()
    if not query:
        raise QueryError("empty query")
    path_part, sep, tail = query.rpartition(":")
    if sep and _looks_like_path(path_part):
        return _resolve_in_file(query, path_part, tail, methods, executed, base)
    if GLOB_CHARS & set(query):
        names = sorted(n for n in methods if fnmatch.fnmatchcase(n, query) and n in executed)
        if not names:
            raise QueryError(f"no executed method matches {query!r}" + _suggest(query, executed))
        return names
    if query in methods or _members(query, executed):
        members = _members(query, executed)
        if query not in executed and not members:
            raise QueryError(f"{query} is known but never executed in this run")
        return ([query] if query in executed else []) + members
    short = _by_suffix(query, executed)
    if short is not None:
        return short
    module_hit = _module_of(query, methods)
    if module_hit is not None:
        qualname = query[len(module_hit) + 1:]
        files = {m.file for m in methods.values() if m.module == module_hit}
        if any(_defined_in_source(f, qualname, base) for f in files):
            raise QueryError(f"{query} exists in module {module_hit} but never ran in this run")
    raise QueryError(f"unknown method {query!r}" + _suggest(query, executed))


def _members(name: str, executed: set[str]) -> list[str]:
    """The executed methods of class ``name`` (``Class.meth``, nested classes too).

    A class's own code object is only its body, run once at definition; a
    user who names a class means its methods. A function's nested
    functions (``f.<locals>.g``) are not its members.
    """
    prefix, local = name + ".", name + ".<locals>."
    return sorted(n for n in executed if n.startswith(prefix) and not n.startswith(local))


def _by_suffix(query: str, executed: set[str]) -> list[str] | None:
    """A short name (``handle``, ``Server.handle``) that ends exactly one executed name."""
    if "." in query and query.split(".", 1)[0] in {n.split(".", 1)[0] for n in executed}:
        return None  # it starts like a full name: a typo there should not match elsewhere
    hits = [n for n in executed if n.endswith("." + query)]
    if len(hits) == 1:
        return hits
    if len(hits) > 1:
        raise QueryError(f"{query!r} names several executed methods; give one of: "
                         + ", ".join(sorted(hits)[:10]))
    return None


def resolve_all(
    queries: Iterable[str],
    methods: Mapping[str, Method],
    executed: set[str],
    *,
    base: Path | None = None,
) -> list[str]:
    """Union of several queries, in first-seen order."""
    seen: dict[str, None] = {}
    for q in queries:
        for name in resolve(q, methods, executed, base=base):
            seen.setdefault(name, None)
    return list(seen)


def _looks_like_path(text: str) -> bool:
    return text.endswith(".py") or "/" in text or os.sep in text


def _same_file(recorded: str, wanted: str, base: Path | None) -> bool:
    if recorded == wanted:
        return True
    rec = recorded.replace(os.sep, "/")
    want = wanted.replace(os.sep, "/").removeprefix("./")
    if rec.endswith("/" + want):
        return True
    for root in (Path.cwd(), base):
        if root is None:
            continue
        try:
            if Path(root, wanted).resolve() == Path(root, recorded).resolve():
                return True
        except OSError:
            continue
    return False


def _resolve_in_file(
    query: str,
    path: str,
    tail: str,
    methods: Mapping[str, Method],
    executed: set[str],
    base: Path | None,
) -> list[str]:
    in_file = [m for m in methods.values() if _same_file(m.file, path, base)]
    if tail.isdigit():
        line = int(tail)
        holding = [m for m in in_file if m.firstline <= line <= m.lastline]
        ran = [m for m in holding if m.name in executed]
        if ran:
            inner = max(ran, key=lambda m: (m.firstline, -m.lastline))
            defined = _innermost_def(inner.file, line)
            if defined is not None and not _same_qualname(defined, inner.qualname):
                raise QueryError(f"line {line} of {path} is in {defined}, which never ran in "
                                 "this run")
            return [inner.name]
        if not in_file and not _file_exists(path, base):
            raise QueryError(f"no traced file matches {path!r}" + _suggest_files(path, methods))
        raise QueryError(
            f"no method that executed in this run holds line {line} of {path} "
            "(module-level code, or code that never ran)"
        )
    exact = [m for m in in_file if m.qualname == tail]
    if not exact:
        exact = [m for m in in_file if m.qualname.rsplit(".", 1)[-1] == tail]
    ran_names = [m.name for m in exact if m.name in executed]
    if ran_names:
        return sorted(ran_names)
    if exact or _defined_in_source(path, tail, base):
        raise QueryError(f"{query} exists but never ran in this run")
    if not in_file and not _file_exists(path, base):
        raise QueryError(f"no traced file matches {path!r}" + _suggest_files(path, methods))
    names = {m.qualname for m in in_file if m.name in executed}
    close = difflib.get_close_matches(tail, sorted(names), n=5)
    hint = f"; closest in that file: {', '.join(close)}" if close else ""
    raise QueryError(f"no function {tail!r} in {path}{hint}")


def _innermost_def(path: str, line: int) -> str | None:
    """Qualname of the innermost function or class in the source file holding ``line``."""
    try:
        tree = ast.parse(Path(path).read_text(errors="replace"))
    except (SyntaxError, ValueError, OSError):
        return None
    found: str | None = None

    def visit(node: ast.AST, prefix: str) -> None:
        nonlocal found
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                end = child.end_lineno or child.lineno
                if start <= line <= end:
                    found = prefix + child.name
                    inner = ".<locals>." if not isinstance(child, ast.ClassDef) else "."
                    visit(child, found + inner)

    visit(tree, "")
    return found


def _same_qualname(source: str, traced: str) -> bool:
    """Whether a qualname from the source names the traced code object (lambdas, genexprs…)."""
    return traced == source or traced.startswith(source + ".<locals>.<")


def _file_exists(path: str, base: Path | None) -> bool:
    return Path(path).is_file() or (base is not None and (base / path).is_file())


def _defined_in_source(path: str, qualname: str, base: Path | None) -> bool:
    """Whether ``qualname`` is a function defined in the file at ``path`` (if readable)."""
    for candidate in (Path(path), (base / path) if base is not None else None):
        if candidate is None or not candidate.is_file():
            continue
        try:
            tree = ast.parse(candidate.read_text(errors="replace"))
        except (SyntaxError, ValueError, OSError):
            return False
        return qualname in set(_qualnames(tree)) or any(
            q.rsplit(".", 1)[-1] == qualname for q in _qualnames(tree)
        )
    return False


def _qualnames(tree: ast.AST, prefix: str = "") -> Iterable[str]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = prefix + node.name
            yield name
            yield from _qualnames(node, name + ".<locals>.")
        elif isinstance(node, ast.ClassDef):
            yield from _qualnames(node, prefix + node.name + ".")


def _module_of(query: str, methods: Mapping[str, Method]) -> str | None:
    """The longest traced module that ``query`` sits under, if any."""
    modules = {m.module for m in methods.values()}
    parts = query.split(".")
    for k in range(len(parts) - 1, 0, -1):
        mod = ".".join(parts[:k])
        if mod in modules:
            return mod
    return None


def _suggest(query: str, names: Iterable[str]) -> str:
    pool = sorted(names)
    if len(pool) > 5000:  # difflib is quadratic-ish: narrow by the last name part first
        short = query.rstrip(".*").rsplit(".", 1)[-1]
        lasts = {n.rsplit(".", 1)[-1] for n in pool}
        near = set(difflib.get_close_matches(short, sorted(lasts), n=20, cutoff=0.6))
        pool = [n for n in pool if n.rsplit(".", 1)[-1] in near] or pool[:5000]
    close = difflib.get_close_matches(query, pool, n=5, cutoff=0.5)
    if not close:
        tail = query.rsplit(".", 1)[-1]
        close = [n for n in pool if n.rsplit(".", 1)[-1] == tail][:5]
    return f"; closest traced names: {', '.join(close)}" if close else ""


def _suggest_files(path: str, methods: Mapping[str, Method]) -> str:
    files = sorted({m.file for m in methods.values()})
    name = os.path.basename(path)
    close = [f for f in files if os.path.basename(f) == name][:5] or difflib.get_close_matches(
        path, files, n=5, cutoff=0.4
    )
    return f"; traced files like it: {', '.join(close)}" if close else ""


# -- git diff ----------------------------------------------------------------

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def changed_lines(rev: str, repo: Path | None = None) -> dict[str, set[int]]:
    """Absolute file path → line numbers touched by ``git diff -U0 REV``.

    Both sides count, because the run may have been recorded before or after
    the change: the old file's lines that were removed or changed, and the new
    file's lines that were added or changed. A pure insertion marks the lines
    either side of it in the old file.
    """
    cwd = str(repo) if repo is not None else None
    if repo is not None and not repo.is_dir():
        raise QueryError(f"--repo {repo}: no such directory")
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=cwd, check=True,
                             capture_output=True, text=True).stdout.strip()
        diff = subprocess.run(["git", "diff", "-U0", "--no-color", "--no-ext-diff", rev, "--"],
                              cwd=cwd, check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        raise QueryError("--diff needs git, which is not installed") from None
    except subprocess.CalledProcessError as exc:
        msg = (exc.stderr or "").strip().splitlines()
        raise QueryError(f"git diff {rev} failed: {msg[-1] if msg else exc}") from None
    out: dict[str, set[int]] = {}
    old_file: str | None = None
    new_file: str | None = None
    for line in diff.splitlines():
        if line.startswith("--- "):
            old_file = None if line[4:] == "/dev/null" else line[6:]
        elif line.startswith("+++ "):
            new_file = None if line[4:] == "/dev/null" else line[6:]
        elif line.startswith("@@"):
            hunk = _HUNK.match(line)
            if hunk is None:
                continue
            a, b = int(hunk[1]), int(hunk[2]) if hunk[2] is not None else 1
            c, d = int(hunk[3]), int(hunk[4]) if hunk[4] is not None else 1
            if old_file is not None:
                lines = set(range(a, a + b)) if b else {a, a + 1}
                out.setdefault(os.path.join(top, old_file), set()).update(lines)
            if new_file is not None:
                lines = set(range(c, c + d)) if d else {c, c + 1}
                out.setdefault(os.path.join(top, new_file), set()).update(lines)
    return out


def diff_methods(
    rev: str, methods: Mapping[str, Method], executed: set[str], repo: Path | None = None
) -> list[str]:
    """Executed methods whose line ranges intersect lines changed since ``rev``."""
    changed = changed_lines(rev, repo)
    if not changed:
        return []
    by_real = {os.path.realpath(path): touched for path, touched in changed.items()}
    hits: list[str] = []
    for name in sorted(executed):
        m = methods.get(name)
        if m is None:
            continue
        lines: set[int] | None = changed.get(m.file) or by_real.get(_realpath(m.file, repo))
        if lines is None:
            lines = next((ls for p, ls in changed.items()
                          if p.endswith("/" + m.file.lstrip("./"))), None)
        if lines and any(m.firstline <= ln <= m.lastline for ln in lines):
            nested = _nested_ranges(m, methods.values())
            if any(not any(a <= ln <= b for a, b in nested) for ln in lines
                   if m.firstline <= ln <= m.lastline):
                hits.append(name)
    return hits


def _nested_ranges(outer: Method, methods: Iterable[Method]) -> list[tuple[int, int]]:
    """Line ranges of the traced code objects inside ``outer`` (a module's functions…).

    A change inside a function body changes that function, not the module
    or class around it: ``<module>`` spans the whole file, so without this
    every diff would count it as changed.
    """
    return [(m.firstline, m.lastline) for m in methods
            if m.file == outer.file and m is not outer
            and outer.firstline <= m.firstline and m.lastline <= outer.lastline
            and (m.firstline, m.lastline) != (outer.firstline, outer.lastline)]


def _realpath(path: str, repo: Path | None) -> str:
    if not os.path.isabs(path) and repo is not None:
        path = os.path.join(repo, path)
    return os.path.realpath(path)
