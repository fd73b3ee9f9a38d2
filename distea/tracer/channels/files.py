"""Files as a channel: a write-close is a send, an open for reading is a receive.

Files are how processes hand state on without a socket: a driver writes the
config its workers read, rank 0 saves the checkpoint the others load, a stage
leaves its output for the next. Recording every ``read``/``write`` would
cost the program per call; the hand-over needs only two facts, so the
channel records at open and close:

- a file opened for writing is a **send at its close** (every byte it wrote
  is in the file by then), carrying the CLOCK_MONOTONIC times of its open
  and close, whether its open truncated the file, and the size and mtime
  the file had after the close;
- a file opened for reading is a **receive at its open**, carrying the time
  and the file's size and mtime then. Code that parses what it reads runs
  after the open, so it is ordered after whatever the file received.

An open that creates the file (``os.open`` with ``O_CREAT | O_EXCL``, as
``tempfile.mkstemp`` and ``NamedTemporaryFile`` do; ``open(path, "x")``) or
truncates it starts a new content: its send says ``trunc`` and its receive
``new``, so that nothing written before it is taken as read after it. That
matters beyond truncation because the channel name is an inode, and a
just-deleted file's inode is soon given to the next file created.

The channel name is the file's identity, ``device:inode`` (the analyzer
pairs it only between processes of one host), which both sides compute
alone and which follows the data through ``os.replace`` and ``rename`` (a
file written under a temporary name and renamed into place is the same
inode); the path is in ``meta`` for people to read. Pairing,
by same-host real time, is :mod:`distea.analyzer.match_files`.

What is left out costs one string check per open: the interpreter's own
files (``sys.prefix``, site-packages), Python code (``.py``, ``.pyc``: the
import system reads sources through ``_io.open`` too, via ``open_code``), ``/proc``, ``/dev``,
``/sys`` and the run directory, and anything that is not a regular file
(pipes, sockets, terminals: other channels). Files that only one process
touches are dropped by the analyzer, so they add no edge and no noise.

Covered: ``open``/``io.open`` (hence ``pathlib``'s helpers, ``shutil``'s
copies, ``pickle.dump`` to a file, ``numpy.save``/``load``) and ``os.open``
with ``os.close``; ``torch.save`` to a path, which writes from C++, is
recorded when it returns. Not covered: files written by C code that opens
them itself (see docs/channels.md), and ``mmap`` (shared memory).
"""

from __future__ import annotations

import _weakref  # weakref itself costs ~1 ms at start-up
import builtins
import io
import os
import stat
import sys
from posix import fstat  # not os.fstat: a program may mock that one, and see our calls
from time import monotonic_ns

from distea.tracer.channels import CODE_SUFFIXES
from distea.tracer.channels.importhooks import IMPORT_HOOKS
from distea.tracer.channels.patching import Patches
from distea.tracer.session import TracerSession

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

KIND = "file"
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR
CREATE_FLAGS = os.O_CREAT | os.O_EXCL
"""Both set: the open made a new file (it fails if the path exists)."""
SKIPPED_PREFIXES = ("/proc/", "/dev/", "/sys/")
SKIPPED_PARTS = ("/site-packages/", "/dist-packages/", "/__pycache__/")


def _writes(mode: Any) -> bool:
    """Whether an ``open`` mode can write."""
    return isinstance(mode, str) and any(letter in mode for letter in "wax+")


class FileChannel:
    """Patches ``open``, ``io.open``, ``os.open``/``os.close`` and ``torch.save``."""

    def __init__(self) -> None:
        self.patches = Patches()
        self.session: TracerSession | None = None
        self.skipped: tuple[str, ...] = SKIPPED_PREFIXES
        self.writing_fds: dict[int, tuple[str, str, int, bool]] = {}
        """fd from ``os.open`` → (channel, path, open time, truncated): sends at ``os.close``."""
        self.wrote_code = False
        """Whether this process has opened a Python code file for writing (said once)."""

    def install(self, session: TracerSession) -> None:
        self.session = session
        prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, session.config.run_dir}
        self.skipped = SKIPPED_PREFIXES + tuple(
            os.path.join(p, "") for p in prefixes if p)
        self.patches.replace(io, "open", self._wrap_open(io.open))
        self.patches.replace(builtins, "open", io.open)  # the same function, patched once
        self.patches.replace(os, "open", self._wrap_os_open(os.open))
        self.patches.replace(os, "close", self._wrap_os_close(os.close))
        IMPORT_HOOKS.when_imported("torch", self._patch_torch)

    def uninstall(self) -> None:
        IMPORT_HOOKS.forget("torch")
        self.patches.restore()
        self.writing_fds.clear()

    def _guarded(self, record: Any, *args: Any) -> None:
        """Record after the program's own call succeeded; a tracer error is counted, never
        raised into the program (DESIGN rule 1)."""
        session = self.session
        if session is None or session.finished:
            return
        try:
            record(*args)
        except Exception:
            session.tracer_error()

    # -- what is a program file --------------------------------------------------

    def _path_of(self, file: Any, writing: bool = False) -> str | None:
        """The path to record for ``file`` (what ``open`` was given), or None to skip it.

        Python code is skipped: the import system reads it through ``_io.open``
        too, at every import. A program that writes code (a generator whose
        output another process imports) hands data on that way unseen: that is
        said, once a process (``writing``: the open can write).
        """
        if isinstance(file, int):
            return None  # an fd: os.open saw it already (or it is a pipe or socket)
        try:
            path = os.fspath(file)
        except TypeError:
            return None
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if path.endswith(CODE_SUFFIXES):
            if writing and self.session is not None and not self.wrote_code:
                self.wrote_code = True
                self.session.say_unseen(
                    f"wrote Python code ({path}, perhaps more): imports are not recorded, "
                    "so a process that imports code written in the run is not shown "
                    "reading it")
            return None
        absolute = path if path.startswith("/") else os.path.join(os.getcwd(), path)
        if absolute.startswith(self.skipped) or any(p in absolute for p in SKIPPED_PARTS):
            return None
        return absolute

    def _identity(self, fd: int) -> tuple[str, os.stat_result] | None:
        st = fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        return f"{st.st_dev}:{st.st_ino}", st

    # -- open() ----------------------------------------------------------------------

    def _wrap_open(self, original: Any) -> Any:
        channel = self

        def open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            if type(file) is str and file.endswith(CODE_SUFFIXES):
                if mode != "rb" and mode != "r":  # not an import
                    channel._guarded(channel._path_of, file, _writes(mode))
                return original(file, mode, *args, **kwargs)  # an import, most likely
            stream = original(file, mode, *args, **kwargs)
            by_opener = kwargs.get("opener") is not None or (len(args) > 5 and
                                                             args[5] is not None)
            channel._guarded(channel._opened, stream, stream.fileno() if by_opener else file,
                             mode)
            return stream

        return open

    def _opened(self, stream: Any, file: Any, mode: str) -> None:
        """``file``: what ``open`` was given, or the descriptor an ``opener`` returned
        (``NamedTemporaryFile`` opens through one, with ``os.open``: recorded there)."""
        if isinstance(file, int):
            # os.fdopen(fd) of a file os.open opened for writing (tempfile.mkstemp, atomic
            # writers): the stream's close closes the fd without os.close, so the send moves
            # to the stream's close
            entry = self.writing_fds.pop(file, None) if self.writing_fds else None
            raw = getattr(getattr(stream, "buffer", stream), "raw", stream)  # the FileIO
            if entry is not None and getattr(raw, "closefd", True):
                self._send_at_close(stream, *entry)
            elif entry is not None:
                self.writing_fds[file] = entry
            return
        if not isinstance(mode, str):
            return
        path = self._path_of(file, _writes(mode))
        if path is None:
            return
        known = self._identity(stream.fileno())
        if known is None:
            return
        name, st = known
        session = self.session
        assert session is not None
        emptied = "w" in mode or "x" in mode  # truncated, or created (fails if it exists)
        if "r" in mode or "+" in mode:
            self._recv(name, path, st, emptied)
        if _writes(mode):
            self._send_at_close(stream, name, path, monotonic_ns(), emptied)

    def _send_at_close(self, stream: Any, name: str, path: str, opened: int,
                       truncated: bool) -> None:
        """Make the stream's ``close`` record the send once the bytes are in the file.

        ``close`` is set on the instance (``with`` and the finaliser look it
        up there too) and reaches the stream through a weak reference only,
        so the stream is still freed, and closed, when the program drops it.
        """
        ref = _weakref.ref(stream)
        close = type(stream).close
        channel = self

        def close_and_record() -> None:
            target = ref()
            if target is None:
                return
            already = target.closed
            close(target)
            if not already:
                channel._closed(name, path, opened, truncated)

        stream.close = close_and_record

    def _closed(self, name: str, path: str, opened: int, truncated: bool) -> None:
        session = self.session
        if session is None or session.finished:
            return
        try:
            meta: dict[str, Any] = {"path": path, "t": monotonic_ns(), "t_open": opened,
                                    "trunc": truncated}
            try:
                st = os.stat(path)
            except OSError:
                st = None  # renamed or removed already: the analyzer goes by time alone
            if st is not None and f"{st.st_dev}:{st.st_ino}" == name:
                meta["size"], meta["mtime"] = st.st_size, st.st_mtime_ns
            session.send(KIND, name, 0, 1, meta)
        except Exception:
            session.tracer_error()

    # -- os.open / os.close ---------------------------------------------------------------

    def _wrap_os_open(self, original: Any) -> Any:
        channel = self

        def open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: Any = None) -> int:
            fd: int = original(path, flags, mode, dir_fd=dir_fd)
            if dir_fd is None:
                channel._guarded(channel._os_opened, fd, path, flags)
            return fd

        return open

    def _os_opened(self, fd: int, file: Any, flags: int) -> None:
        path = self._path_of(file, bool(flags & WRITE_FLAGS))
        if path is None:
            return
        known = self._identity(fd)
        if known is None:
            return
        name, st = known
        session = self.session
        assert session is not None
        emptied = flags & CREATE_FLAGS == CREATE_FLAGS or bool(flags & os.O_TRUNC)
        if not flags & os.O_WRONLY:
            self._recv(name, path, st, emptied)
        if flags & WRITE_FLAGS:
            self.writing_fds[fd] = (name, path, monotonic_ns(), emptied)

    def _recv(self, name: str, path: str, st: os.stat_result, emptied: bool) -> None:
        """The receive of an open for reading; ``new``: the open created or truncated the
        file, so it holds nothing written before."""
        meta: dict[str, Any] = {"path": path, "t": monotonic_ns(), "size": st.st_size,
                                "mtime": st.st_mtime_ns}
        if emptied:
            meta["new"] = True
        session = self.session
        assert session is not None
        session.recv(KIND, name, 0, 1, meta)

    def _wrap_os_close(self, original: Any) -> Any:
        channel = self
        writing = self.writing_fds

        def close(fd: int) -> None:
            entry = writing.pop(fd, None) if writing else None
            if entry is not None:
                # the descriptor may have been closed another way since (a stream that
                # took it over, a C library) and its number given to another file: its
                # entry stands only while the descriptor is still that file
                try:
                    still = channel._identity(fd)
                except OSError:
                    still = None
                if still is None or still[0] != entry[0]:
                    entry = None
            original(fd)
            if entry is not None:
                channel._closed(*entry)

        return close

    # -- torch.save ------------------------------------------------------------------------

    def _patch_torch(self, torch: ModuleType) -> None:
        """``torch.save(obj, path)`` writes from C++: record the send when it returns."""
        save = getattr(torch, "save", None)
        if save is None:
            return
        channel = self

        def saved(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
            started = monotonic_ns()
            result = save(obj, f, *args, **kwargs)
            session = channel.session
            if session is not None and not session.finished:
                try:
                    path = channel._path_of(f)
                    if path is not None:
                        st = os.stat(path)
                        if stat.S_ISREG(st.st_mode):
                            name = f"{st.st_dev}:{st.st_ino}"
                            session.send(KIND, name, 0, 1, {
                                "path": path, "t": monotonic_ns(), "t_open": started,
                                "trunc": True,
                                "size": st.st_size, "mtime": st.st_mtime_ns})
                except Exception:
                    session.tracer_error()
            return result

        self.patches.replace(torch, "save", saved)
