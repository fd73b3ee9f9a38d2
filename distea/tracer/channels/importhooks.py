"""Post-import hooks: patch a library once the program imports it, not before.

Channels for optional libraries (multiprocessing's connections,
torch.distributed) wait here, so a program that never imports them pays
nothing but one dict lookup per import, and the tracer's start-up imports
none of them.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from types import ModuleType

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any


class ImportHooks:
    """Run callbacks right after a module has executed (post-import hooks).

    A ``sys.meta_path`` finder by duck typing (``find_spec``); importing
    ``importlib.abc`` for the base class would cost every traced process
    several milliseconds at start-up.

    Sits first on ``sys.meta_path`` and answers only for the watched names:
    it asks the finders after it for the real spec and wraps that spec's
    loader's ``exec_module`` (on the loader instance, which is per module)
    so the callback runs once the module is complete, before the importer
    binds any name from it. Every other import costs one dict lookup.
    """

    def __init__(self) -> None:
        self.watched: dict[str, list[Callable[[ModuleType], None]]] = {}
        self._busy: set[str] = set()
        self.installed = False

    def when_imported(self, name: str, callback: Callable[[ModuleType], None]) -> None:
        """Call ``callback(module)`` now if ``name`` is imported, else after its import."""
        module = sys.modules.get(name)
        if module is not None:
            callback(module)
            return
        self.watched.setdefault(name, []).append(callback)
        if not self.installed:
            sys.meta_path.insert(0, self)
            self.installed = True

    def forget(self, name: str) -> None:
        """Stop waiting for ``name``; leave ``sys.meta_path`` when nothing is awaited."""
        self.watched.pop(name, None)
        if not self.watched:
            self.remove()

    def remove(self) -> None:
        self.watched.clear()
        if self.installed:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(self)
            self.installed = False

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.watched or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        except Exception:
            return None  # let the import system ask the finders itself, as without us
        finally:
            self._busy.discard(fullname)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        callbacks = self.watched.pop(fullname, [])
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            try:
                original(module)
            finally:
                with contextlib.suppress(AttributeError):
                    del loader.exec_module
            for callback in callbacks:
                callback(module)

        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):
            self.watched[fullname] = callbacks
        return spec


IMPORT_HOOKS = ImportHooks()
"""Shared by the channels that wait for their library to be imported."""
