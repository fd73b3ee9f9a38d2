"""Post-import hooks: patch a library once the program imports it, not before.

Channels for optional libraries (multiprocessing's connections,
torch.distributed) wait here, so a program that never imports them pays
nothing but one dict lookup per import, and the tracer's start-up imports
none of them.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
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
        self._in_flight: dict[str, list[Callable[[ModuleType], None]]] = {}
        """Watched modules executing now → the callbacks to run once they are complete."""
        self._busy: set[str] = set()
        self.installed = False

    def when_imported(self, name: str, callback: Callable[[ModuleType], None]) -> None:
        """Call ``callback(module)`` now if ``name`` is imported, else after its import.

        A watched module that is still executing (a channel installed by an
        import inside it: ``ssl`` imports ``socket``) is not imported yet:
        the callback runs once it is complete.
        """
        module = sys.modules.get(name)
        if module is not None:
            in_flight = self._in_flight.get(name)
            if in_flight is not None:
                in_flight.append(callback)
            else:
                callback(module)
            return
        self.watch(name).append(callback)

    def watch(self, name: str) -> list[Callable[[ModuleType], None]]:
        """Make ``name``'s coming import pass through here (its callbacks, which
        :meth:`when_imported` may add while it executes); the list of them."""
        callbacks = self.watched.setdefault(name, [])
        if not self.installed:
            sys.meta_path.insert(0, self)
            self.installed = True
        return callbacks

    def forget(self, name: str, callback: Callable[[ModuleType], None] | None = None) -> None:
        """Stop waiting for ``name`` (only to call ``callback``, when given); leave
        ``sys.meta_path`` when nothing is awaited."""
        callbacks = self.watched.get(name, [])
        if callback is not None and callback in callbacks:
            callbacks.remove(callback)
        if callback is None or not callbacks:
            self.watched.pop(name, None)
        if not self.watched:
            self.remove()

    def remove(self) -> None:
        self.watched.clear()
        if self.installed:
            if self in sys.meta_path:  # contextlib.suppress: contextlib is ~1 ms at start-up
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
        in_flight = self._in_flight

        def exec_module(module: ModuleType) -> None:
            in_flight[fullname] = callbacks
            try:
                original(module)
                done = 0
                while done < len(callbacks):  # with those added by the callbacks themselves
                    done += 1
                    callbacks[done - 1](module)
            finally:
                vars(loader).pop("exec_module", None)  # the class's own again
                in_flight.pop(fullname, None)

        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):
            self.watched[fullname] = callbacks
        return spec


IMPORT_HOOKS = ImportHooks()
"""Shared by the channels that wait for their library to be imported."""
