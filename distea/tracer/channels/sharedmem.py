"""Shared memory: record which processes map which shared segment, and when.

A write to shared memory is invisible (no call, just a store), so it cannot
be a send. What can be seen is who shares a segment: every shared mapping
in Python is made by ``mmap.mmap`` — ``multiprocessing.shared_memory``
(``/dev/shm/NAME``), the arenas under ``multiprocessing`` ``Value``/``Array``/
``RawArray``/``Barrier`` (an unlinked temporary file, passed to spawned
children by descriptor), and ``mmap`` of a file with ``MAP_SHARED``. The
tracer replaces ``mmap.mmap`` by a subclass that records, after a shared
mapping is made, an ``shm`` SEND (an *attach*: nothing pairs with it) on
``HOST:shm:DEV:INODE`` (the file under the mapping, the same in every
process), with ``meta``: ``t`` (``time.monotonic_ns()``), ``path`` (for
people: ``/dev/shm/psm_…``) and ``w`` (whether this mapping can write).
An anonymous shared mapping (``mmap(-1, n)``) reaches other processes only
through ``fork``: it is named ``HOST:shm:anon:PROCESS-KEY:ID``.

A forked child shares every mapping its parent had: right after the fork it
records an attach for each one still open (the at-fork hook is registered at
the first mapping, so it runs after the session's own, which resets the clock).

The analyzer orders sharers by same-host time (docs/semantics.md, "Shared
memory"). Not seen: memory shared by C code (torch's shared tensors,
``/dev/shm`` mapped by a C extension), System V segments, and private
(``MAP_PRIVATE``/``ACCESS_COPY``) mappings, which share nothing.
"""

from __future__ import annotations

import os
import weakref
from posix import fstat  # not os.fstat: a program may mock that one, and see our calls
from time import monotonic_ns
from types import ModuleType

from distea.tracer.channels.importhooks import IMPORT_HOOKS
from distea.tracer.channels.patching import Patches
from distea.tracer.session import HOST, TracerSession

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any

KIND = "shm"


def sharing(module: ModuleType, args: tuple[Any, ...], kwargs: dict[str, Any]
            ) -> tuple[bool, bool]:
    """(shared?, writable?) of a ``mmap.mmap(fileno, length, *args, **kwargs)`` call (Unix)."""
    names = ("flags", "prot", "access")
    given = dict(zip(names, args, strict=False))
    given.update((k, v) for k, v in kwargs.items() if k in names)
    access = given.get("access", module.ACCESS_DEFAULT)
    if access == module.ACCESS_COPY:
        return False, True
    if access == module.ACCESS_READ:
        return True, False
    flags = given.get("flags", module.MAP_SHARED)
    if not flags & module.MAP_SHARED:
        return False, True
    prot = given.get("prot", module.PROT_READ | module.PROT_WRITE)
    return True, bool(prot & module.PROT_WRITE) or access == module.ACCESS_WRITE


class _Segment:
    """One shared mapping of this process: its channel, description, and the map."""

    __slots__ = ("meta", "name", "ref")

    def __init__(self, name: str, meta: dict[str, Any], ref: Any) -> None:
        self.name = name
        self.meta = meta
        self.ref = ref


class SharedMemoryChannel:
    def __init__(self) -> None:
        self.patches = Patches()
        self.session: TracerSession | None = None
        self.segments: list[_Segment] = []
        self._fork_hook = False

    def install(self, session: TracerSession) -> None:
        self.session = session
        IMPORT_HOOKS.when_imported("mmap", self._patch_module)

    def uninstall(self) -> None:
        IMPORT_HOOKS.forget("mmap")
        self.patches.restore()

    def _patch_module(self, module: ModuleType) -> None:
        session = self.session
        if session is None or session.finished or not hasattr(module, "MAP_SHARED"):
            return
        base = module.mmap
        channel = self

        class mmap(base):  # type: ignore[misc, valid-type]
            __slots__ = ()

            def __new__(cls, fileno: Any, length: Any, *args: Any, **kwargs: Any) -> Any:
                mapping = base.__new__(cls, fileno, length, *args, **kwargs)
                channel._mapped(module, mapping, fileno, args, kwargs)
                return mapping

            def __repr__(self) -> str:
                # the C repr names the type by its name, "mmap.mmap" for the C type, "mmap"
                # for this class (a program's subclass is named as untraced)
                text: str = base.__repr__(self)
                if type(self) is mmap and text.startswith("<mmap "):
                    return "<mmap.mmap " + text[len("<mmap "):]
                return text

        mmap.__module__ = base.__module__
        mmap.__qualname__ = base.__qualname__
        mmap.__doc__ = base.__doc__
        self.patches.replace(module, "mmap", mmap)

    def _mapped(self, module: ModuleType, mapping: Any, fileno: Any,
                args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        session = self.session
        if session is None or session.finished:
            return
        try:
            shared, writable = sharing(module, args, kwargs)
            if not shared:
                return
            fd = int(fileno)
            if fd == -1:
                name = f"{HOST}:shm:anon:{session.key}:{id(mapping)}"
                path = f"anonymous shared memory of pid {os.getpid()}"
            else:
                st = fstat(fd)
                name = f"{HOST}:shm:{st.st_dev}:{st.st_ino}"
                path = _path_of(fd, st.st_ino)
            segment = _Segment(name, {"path": path, "w": writable}, weakref.ref(mapping))
            self.segments.append(segment)
            self._attach(segment)
            if not self._fork_hook:
                self._fork_hook = True
                os.register_at_fork(after_in_child=self._after_fork_in_child)
        except Exception:
            session.tracer_error()

    def _attach(self, segment: _Segment) -> None:
        session = self.session
        if session is not None:
            session.send(KIND, segment.name, 0, 1, {"t": monotonic_ns(), **segment.meta})

    def _after_fork_in_child(self) -> None:
        """The child shares every mapping still open in its parent: it attaches to each."""
        session = self.session
        if session is None or session.finished:
            return
        try:
            live = []
            for segment in self.segments:
                mapping = segment.ref()
                if mapping is not None and not mapping.closed:
                    live.append(segment)
            self.segments = live
            for segment in live:
                self._attach(segment)
        except Exception:
            session.tracer_error()


def _path_of(fd: int, inode: int) -> str:
    """The file under a descriptor, for people (``/dev/shm/psm_…``); the inode if unknown."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return f"inode {inode}"
