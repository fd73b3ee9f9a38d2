"""Which code is the user's, and what to call it.

By default the user's code is every file under the run's root directory
that is not part of an installed environment (the stdlib, site-packages, a
virtual environment) and not distea itself. ``--include``/``--exclude``
globs, matched against module names and file paths, move code in or out.
Decisions are cached per file name: there are far fewer files than code
objects, and resolved directories per directory: there are fewer still.
The deciding itself is kept cheap too, because every file a process runs
code from is decided once, in that process (hundreds for a
program that imports numpy): the prefix test comes before the module name
when no ``--include``/``--exclude`` pattern needs the name, and the resolved
``sys.path`` entries are cached for as long as ``sys.path`` and the working
directory stay the same.
"""

from __future__ import annotations

import os
import sys
from posix import lstat  # not os.lstat: a program may mock that one, and see our calls
from stat import S_ISLNK

import distea

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from types import CodeType


def _environment_dirs() -> tuple[str, ...]:
    """The prefixes, the standard library and every installed-packages entry of ``sys.path``.

    Found without ``sysconfig`` (which costs every traced process ~2 ms at
    start-up): the standard library is where ``os`` is, its extension
    modules are ``lib-dynload`` on ``sys.path``, and the installed packages
    (``purelib``, ``platlib``) are the ``site-packages`` entries that
    ``site`` put on ``sys.path``.
    """
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
            os.path.dirname(os.__file__)}
    dirs.update(p for p in sys.path
                if "site-packages" in p or "dist-packages" in p or p.endswith("lib-dynload"))
    dirs.add(os.path.dirname(os.path.abspath(distea.__file__)))
    return tuple(sorted({os.path.realpath(d) + os.sep for d in dirs if d}))


def _is_link(path: str) -> bool:
    """``os.path.islink``: False where the path cannot be looked at."""
    try:
        return S_ISLNK(lstat(path).st_mode)
    except (OSError, ValueError):
        return False


class Scope:
    """Answers "is this code the user's?" and names it ``module.qualname``."""

    def __init__(self, root: str, include: tuple[str, ...] = (), exclude: tuple[str, ...] = ()):
        self.root = os.path.realpath(root) + os.sep
        self.include = include
        self.exclude = exclude
        self._excluded_dirs = tuple(d for d in _environment_dirs() if not self.root.startswith(d))
        self._files: dict[str, str | None] = {}
        self._real_dirs: dict[str, str] = {}
        self._bases_key: tuple[object, ...] | None = None
        self._bases: list[str] = []

    def module_of(self, code: CodeType) -> str | None:
        """The module name of ``code`` when it is in scope, else None."""
        filename = code.co_filename
        try:
            return self._files[filename]
        except KeyError:
            module = self._classify(filename)
            self._files[filename] = module
            return module

    def _classify(self, filename: str) -> str | None:
        if not filename or filename.startswith("<"):
            return None
        path = self._real_path(filename)
        if not self.include and not self.exclude:
            if not path.startswith(self.root) or path.startswith(self._excluded_dirs):
                return None
            return self._module_name(path)
        module = self._module_name(path)
        if self._matches(self.exclude, module, path):
            return None
        if self._matches(self.include, module, path):
            return module
        if not path.startswith(self.root) or path.startswith(self._excluded_dirs):
            return None
        return module

    def _real_path(self, filename: str) -> str:
        """``os.path.realpath(filename)``, resolving each directory once: a module
        imported after the tracer starts costs one ``lstat`` instead of one per
        path component (a pool worker imports ~40 of multiprocessing's files)."""
        directory, name = os.path.split(filename)
        if not directory.startswith("/") or _is_link(filename):
            return os.path.realpath(filename)  # relative: the working directory may change
        real = self._real_dirs.get(directory)
        if real is None:
            real = self._real_dirs[directory] = self._real_dir(directory)
        return os.path.join(real, name)

    def _real_dir(self, directory: str) -> str:
        """A directory below one resolved already is that one's resolution and its own
        name, when it is not a link itself: one ``lstat`` (0.9 µs) instead of a
        ``realpath``, which looks at every component from ``/`` (13 µs for a directory of
        the standard library), for each new directory a process runs code from
        (``collections``, ``multiprocessing``, ``email``, distea's own)."""
        parent, name = os.path.split(directory)
        real_parent = self._real_dirs.get(parent)
        if real_parent is not None and name not in ("", ".", "..") \
                and not _is_link(directory):
            return os.path.join(real_parent, name)
        return os.path.realpath(directory)

    @staticmethod
    def _matches(patterns: tuple[str, ...], module: str, path: str) -> bool:
        """``pkg.*`` names the package too: ``pkg`` itself (its ``__init__``) matches."""
        from fnmatch import fnmatchcase  # only with --include/--exclude (fnmatch imports re)

        package = module + "."
        return any(fnmatchcase(module, p) or fnmatchcase(package, p) or fnmatchcase(path, p)
                   for p in patterns)

    def _module_name(self, path: str) -> str:
        """Dotted name from the longest ``sys.path`` entry (or the root) holding ``path``.

        Using the path rather than ``__name__`` gives the same name in every
        process: a script is ``app`` whether it runs as ``__main__`` or as
        ``__mp_main__`` in a spawned child.
        """
        bases = self._path_bases()
        holding = [b for b in bases if path.startswith(b)]
        relative = path[len(max(holding, key=len)) :] if holding else os.path.basename(path)
        stem = relative.rsplit(".", 1)[0]
        parts = [p for p in stem.split(os.sep) if p]
        if len(parts) > 1 and parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts) or stem

    def _path_bases(self) -> list[str]:
        """Resolved ``sys.path`` entries (and the root), recomputed only when they change."""
        key = (tuple(sys.path), os.getcwd())
        if key != self._bases_key:
            bases = [os.path.realpath(p or os.getcwd()) + os.sep for p in sys.path]
            bases.append(self.root)
            self._bases_key, self._bases = key, bases
        return self._bases
