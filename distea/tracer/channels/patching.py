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

import os
import sys
from _thread import _local
from _weakref import ref

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any

FUNCTION = type(lambda: None)


class Unbound(staticmethod):
    """A replacement of a builtin that, like the builtin, does not bind as a method.

    A builtin such as ``os.close`` stays a plain function when a program keeps
    it as a class attribute (``class T: _close = os.close``, as CPython's
    test_tempfile does); a Python function there would become a method and
    get ``self`` as its first argument. A ``staticmethod`` calls its function
    from C; this one's ``__get__`` gives the object itself back (a plain
    ``staticmethod`` would give the bare wrapper), it shows as the builtin in
    ``repr`` and pickles by reference, by its disguised name. One class for
    every replacement: a class made per patched builtin cost each traced
    process about 6 µs, for ~35 of them at start. Not a ``functools.partial``,
    which calls sooner but is one to whoever looks (asyncio writes a handle of
    ``os.write`` as ``write()(1, b'x')`` for a partial, ``write(1, b'x')`` for
    the builtin).
    """

    __slots__ = ()
    __wrapped__: Any = None
    """Set to the original by :meth:`Patches.replace` (over ``staticmethod``'s read-only
    member, which names the wrapper)."""

    def __get__(self, instance: object, owner: type | None = None) -> Unbound:
        return self

    def __reduce__(self) -> str:
        return str(self.__qualname__)

    def __repr__(self) -> str:
        return repr(self.__wrapped__ or self.__func__)

    @property  # type: ignore[misc]  # the class it says it is, as ``unittest.mock`` does
    def __class__(self) -> type:
        """The original's class: ``isinstance(os.read, types.BuiltinFunctionType)`` (hence
        ``inspect.isbuiltin``, which pydoc and CPython's test_signal ask) answers as it
        does for the builtin. ``type()`` still tells the truth."""
        original = self.__wrapped__
        return type(self) if original is None else original.__class__


def unbound(function: Any) -> Unbound:
    """``function`` as a callable that, like a builtin, does not bind as a method
    (one object per function: set under several names, it stays one)."""
    made: Unbound | None = getattr(function, "_distea_unbound", None)
    if made is None:
        made = function._distea_unbound = Unbound(function)
    return made


_ALL: list[ref[Patches]] = []
"""Every :class:`Patches` made, by weak reference (a few per process; not a WeakSet:
``weakref`` and ``_weakrefset`` cost a traced process ~1 ms at start-up)."""

GUARD = _local()
"""Per thread: ``.in_mp_call`` is true while a multiprocessing channel's wrapper
runs, so that the pipe channel leaves the bytes it moves to it (see
``channels/multiprocessing.py``). Here, so that the pipe channel, installed at
start-up, does not load the multiprocessing channel."""


class Patches:
    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []
        self._listed: list[tuple[set[Any], Any]] = []
        _ALL.append(ref(self))

    def replace(self, owner: Any, name: str, replacement: Any) -> Any:
        """Set ``owner.name`` to ``replacement``, disguised as the original; return the
        original."""
        original = getattr(owner, name)
        self._saved.append((owner, name, original))
        fresh = type(replacement) is FUNCTION  # a wrapper, not an object patched in already
        if fresh and (type(original) is Unbound or not hasattr(type(original), "__get__")):
            replacement = unbound(replacement)  # a builtin, or an earlier patch of one
        setattr(owner, name, replacement)
        if fresh and replacement is not original:
            self._disguise(replacement, original, owner, name)
            self._capabilities(original, replacement)
        return original

    def _capabilities(self, original: Any, replacement: Any) -> None:
        """Put the replacement where ``os`` lists what the original can do.

        ``os.supports_dir_fd`` and friends are sets of the functions
        themselves: ``shutil`` asks ``{os.open, …} <= os.supports_dir_fd`` to
        choose its symlink-safe ``rmtree``, which a replaced ``os.open`` missing
        from the set would silently turn off.
        """
        for listing in (os.supports_dir_fd, os.supports_fd, os.supports_follow_symlinks,
                        os.supports_effective_ids):
            if original in listing:
                listing.add(replacement)
                self._listed.append((listing, replacement))

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
        while self._listed:
            listing, replacement = self._listed.pop()
            listing.discard(replacement)
        while self._saved:
            owner, name, original = self._saved.pop()
            setattr(owner, name, original)


def held() -> list[tuple[Any, str, Any]]:
    """Every attribute that some :class:`Patches` of this process holds replaced."""
    return [item for patches in [r() for r in _ALL] if patches is not None
            for item in patches.held()]


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
