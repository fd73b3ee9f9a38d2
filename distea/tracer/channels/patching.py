"""Reversible, transparent monkey-patching shared by the channel interceptors.

Every patch keeps the original so uninstall restores the program's world
exactly (tests assert that nothing is left patched).

A replacement must also pass for the original wherever a program looks at
it rather than calls it (DESIGN rule 1): it takes the original's
``__module__``, ``__qualname__``, ``__name__`` and ``__doc__``, and
``__wrapped__`` points at the original (so ``inspect.signature`` gives the
original's). Pickle saves a function by reference, as ``__module__`` plus
``__qualname__``, and refuses unless that name finds the very object being
pickled: ``dask``'s ``c.run(os._exit, 0)`` pickles ``os._exit``, whose
module is ``posix``. So where the original's own name leads to it in another
module than the one patched (``posix._exit`` for ``os._exit``), that name is
patched as well; where it leads into a class other than the patched one (a
method inherited from a base), the base is left alone and the replacement
is named after where it was put instead, which pickles and unpickles
(traced or not) to the same attribute.
"""

from __future__ import annotations

import sys
import weakref

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any

FUNCTION = type(lambda: None)
_ALL: weakref.WeakSet[Patches] = weakref.WeakSet()


class Patches:
    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []
        _ALL.add(self)

    def replace(self, owner: Any, name: str, replacement: Any) -> Any:
        """Set ``owner.name`` to ``replacement``, disguised as the original; return the
        original."""
        original = getattr(owner, name)
        self._saved.append((owner, name, original))
        setattr(owner, name, replacement)
        if replacement is not original and type(replacement) is FUNCTION:
            self._disguise(replacement, original, owner, name)
        return original

    def _disguise(self, replacement: Any, original: Any, owner: Any, name: str) -> None:
        for attr in ("__module__", "__qualname__", "__name__", "__doc__"):
            value = getattr(original, attr, None)
            if value is not None:
                setattr(replacement, attr, value)
        replacement.__wrapped__ = original
        home = _resolve(getattr(original, "__module__", None),
                        getattr(original, "__qualname__", None))
        if home is not None and home[2] is original and type(home[0]) is type(sys):
            self._saved.append((home[0], home[1], original))  # posix._exit for os._exit
            setattr(home[0], home[1], replacement)
        elif home is None or home[2] is not replacement:
            if type(owner) is type(sys):
                replacement.__module__, replacement.__qualname__ = owner.__name__, name
            else:
                replacement.__module__ = owner.__module__
                replacement.__qualname__ = f"{owner.__qualname__}.{name}"

    def held(self) -> list[tuple[Any, str, Any]]:
        """(owner, name, original) of every attribute this holds replaced, in order."""
        return list(self._saved)

    def restore(self) -> None:
        while self._saved:
            owner, name, original = self._saved.pop()
            setattr(owner, name, original)


def held() -> list[tuple[Any, str, Any]]:
    """Every attribute that some :class:`Patches` of this process holds replaced."""
    return [item for patches in list(_ALL) for item in patches.held()]


def _resolve(module: object, qualname: object) -> tuple[Any, str, Any] | None:
    """(container, attribute, object) that pickle finds for ``module.qualname``."""
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    container: Any = sys.modules.get(module)
    if container is None:
        return None
    *path, last = qualname.split(".")
    try:
        for part in path:
            container = getattr(container, part)
        return container, last, getattr(container, last)
    except AttributeError:
        return None
