"""Pipes and FIFOs as byte streams (kind ``pipe``), however Python moves the bytes.

A pipe is a byte stream: what one ``write`` put in may be read as header +
body, and two writes may come out of one read. So, like TCP, each pipe
direction is counted in bytes, and the analyzer pairs a receive of bytes
``[a, b)`` with the send that carried byte ``b - 1`` (framing never matters).

Where bytes cross a pipe in a Python process, and how each is seen:

- ``os.read``/``os.write`` (and ``readv``/``writev``/``sendfile``/``splice``)
  on a descriptor that is a pipe or FIFO
  (``os.pipe()``, ``os.mkfifo`` + ``os.open``, inherited, asyncio's pipe
  transports, ``Popen.communicate`` with several pipes): patched here. One
  ``fstat`` decides per new descriptor; the fd-making and fd-closing ``os``
  functions keep that cache true (and a new socket object drops its number:
  C may have closed the number's last holder), and a cached pipe is checked
  again (its inode) before each record, so a reused descriptor number is
  never taken for the old pipe.
- File objects over a pipe descriptor (``subprocess.Popen``'s ``stdin``/
  ``stdout``/``stderr``, ``os.fdopen``, ``open(fd)``): their buffered and text
  layers are C code that calls the raw layer's methods, so the raw layer is
  made a :class:`FileIO` subclass that counts what the kernel really moved.
  ``readline``, ``read``, ``communicate``, text decoding and read-ahead then
  never matter, and writes are recorded per buffer flush, not per ``print``.
  ``open`` is patched to build exactly the layers the interpreter's own
  ``open`` builds (it builds them first, with ``closefd=False``, so every
  argument is checked and every default decided by the original).
- This process's ``sys.stdin``/``sys.stdout``/``sys.stderr`` when they are
  pipes: rebuilt at start with the same encoding, errors, buffering and
  newline rules over a counting raw layer, so a child's ``print`` → the
  parent's read is an edge. Their last buffer is flushed (and recorded) when
  the tracer finishes at a normal exit, just before the interpreter would
  have flushed it, and they stay in place (recording nothing more) for the
  interpreter's own last flush; at ``os._exit``, ``exec`` or a fatal signal
  nothing is flushed, as untraced.

Channel ``HOST:pipe:INODE``: ``fstat`` gives both ends of one pipe the same
inode. ``start``/``end`` are byte offsets in the pipe's one direction as
this process counted them; the counts are kept per inode, so that
``os.read`` and a file object reading one pipe add up. A forked child
inherits its parent's counts: where it takes over an end, its offsets go on
where the parent's stopped; where both go on using one end, their ranges
overlap and offsets cannot say how their bytes interleaved. So every read and
write also carries ``meta["t"] = [t0, t1]``, ``time.monotonic_ns()`` read
just before the system call and just after it returned (for a file object,
around the raw call; a coalesced write's bracket spans both writes): on one
host that places the calls in the pipe's own order
(:mod:`distea.analyzer.match_pipes`). The two readings, the dict and its
packing are a small part of a recorded call (CHANGELOG: measured).

Reads and writes that multiprocessing's connections make are theirs (kind
``mp``, :data:`~distea.tracer.channels.multiprocessing.GUARD`) and are not
counted here; only the running call's own descriptor is theirs (a
finalizer that writes to another pipe during the call is recorded). A FIFO
opened by path (``open(path)``) is a pipe too: the file object the
interpreter built is rebuilt over a counting raw layer on a duplicate of
its descriptor (:func:`over_fifo`). ``os.readv``/``os.writev``,
``os.sendfile`` and ``os.splice`` are recorded as reads and writes of
whichever of their descriptors is a pipe (or a stream socket). Not seen:
pipes written by C extensions or non-Python children (their reader's bytes
have no recorded send: external, reported).
"""

from __future__ import annotations

import builtins
import io
import os
import stat
import sys
from _thread import get_ident
from posix import fstat  # not os.fstat: a program may mock that one, and see our calls
from time import monotonic_ns

from distea.suppressing import suppress
from distea.tracer.channels import CODE_SUFFIXES
from distea.tracer.channels.patching import GUARD, Patches
from distea.tracer.session import HOST, TracerSession

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any

    from distea.tracer.channels.socket_fds import SocketFds
    from distea.tracer.channels.sockets import SocketChannel, _Stream

KIND = "pipe"
SOCKET = -2
"""In the descriptor cache: a connected stream socket (:mod:`.socket_fds`)."""
OPEN_PARAMETERS = ("file", "mode", "buffering", "encoding", "errors", "newline", "closefd",
                   "opener")
STD_STREAMS = (("stdin", 0), ("stdout", 1), ("stderr", 2))
FD_MAKERS = ("pipe", "pipe2", "open", "dup")
FD_CLOSERS = ("close", "dup2", "closerange")


def moved_by_multiprocessing(fd: int) -> bool:
    """Whether ``fd`` is the descriptor of the multiprocessing call running in this
    thread (its bytes are that channel's messages). Any other descriptor used
    meanwhile (a finalizer writing to another pipe) is a pipe's."""
    conn = getattr(GUARD, "in_mp_call", None)
    return bool(conn) and getattr(conn, "_handle", fd) == fd


def pipe_name(ino: int) -> str:
    """The channel of a pipe: the same at both ends on one host."""
    return f"{HOST}:pipe:{ino}"


def default_buffer_size(raw: io.FileIO) -> int:
    """The buffer size ``open`` picks for ``raw`` when none is given."""
    blksize: int = raw._blksize  # type: ignore[attr-defined]
    if sys.version_info >= (3, 14):
        return max(min(blksize, 8192 * 1024), io.DEFAULT_BUFFER_SIZE)
    return blksize


class _Counts:
    """One pipe as this process sees it: its channel name and the bytes moved each way."""

    __slots__ = ("name", "read", "written")

    def __init__(self, ino: int) -> None:
        self.name = pipe_name(ino)
        self.written = 0
        self.read = 0


class FileIO(io.FileIO):
    """The raw layer of a file object over a pipe (or a connected stream socket: a
    child whose standard streams are a connection, ``os.fdopen`` of a socket's
    descriptor): counts the bytes each call moved.

    The buffered and text layers above call these methods (``readinto`` to
    fill a read buffer, ``readall`` for ``read()``, ``write`` at a flush),
    so one record stands for one system call, whatever the program asked
    of the layers above. Once the tracer has finished, it only does the I/O,
    naming no module global (``super()`` finds the class through its cell):
    the standard streams stay over this class to the interpreter's last
    flush and to the finalizers that print after it, when this module's
    globals may be gone (``None``; CPython's ``test_builtin.test_cleanup``).

    The pipe behind the descriptor is looked up once and kept with the
    channel's descriptor epoch: any ``os.close``/``dup2``/new descriptor
    made through ``os`` moves the epoch, and the next call looks again (a
    ``dup2`` over descriptor 1 must not be taken for the old pipe). Errors
    of the tracer are counted, never raised.
    """

    _distea_channel: PipeChannel | None = None
    """Set on the class by :meth:`PipeChannel.install`."""
    _distea_epoch = -1
    _distea_target: _Counts | _Stream | None = None

    def _distea_counts(self, channel: PipeChannel) -> _Counts | _Stream | None:
        """This file's pipe (or socket stream) now (the cached one while the channel's
        epoch holds)."""
        if self._distea_epoch == channel.epoch:
            return self._distea_target
        try:
            st = fstat(self.fileno())
        except (OSError, ValueError):
            return None  # closed under the file: the I/O that follows fails, as untraced
        try:
            pipe: _Counts | _Stream | None = None
            if stat.S_ISFIFO(st.st_mode):
                pipe = channel.counts_of(st.st_ino)
            elif stat.S_ISSOCK(st.st_mode) and channel.pipe_inode(self.fileno()) == SOCKET:
                pipe = channel.fd_sockets[self.fileno()]
        except Exception:
            channel.error()
            return None
        self._distea_target, self._distea_epoch = pipe, channel.epoch
        return pipe

    def _distea_received(self, size: int, t0: int, t1: int) -> None:
        channel = self._distea_channel
        session = channel.session if channel is not None else None
        if channel is None or session is None or session.finished:
            return
        try:
            counts = self._distea_counts(channel)
            if counts is not None:
                record_in(session, counts, size, t0, t1)
        except Exception:
            channel.error()

    def _distea_before_read(self) -> bool:
        """Whether the read is to be recorded (the tracer still runs); flushes first."""
        channel = self._distea_channel
        if channel is None or channel.session is None or channel.session.finished:
            return False
        try:
            channel.session.before_blocking()  # a pipe read may wait
        except Exception:
            channel.error()
        return True

    def read(self, size: int | None = -1) -> bytes:
        if not self._distea_before_read():
            return super().read(size)
        t0 = monotonic_ns()
        data = super().read(size)
        if data:
            self._distea_received(len(data), t0, monotonic_ns())
        return data

    def readall(self) -> bytes:
        if not self._distea_before_read():
            return super().readall()
        t0 = monotonic_ns()
        data = super().readall()
        if data:
            self._distea_received(len(data), t0, monotonic_ns())
        return data

    def readinto(self, buffer: Any) -> int | None:
        if not self._distea_before_read():
            return super().readinto(buffer)
        t0 = monotonic_ns()
        size = super().readinto(buffer)
        if size:
            self._distea_received(size, t0, monotonic_ns())
        return size

    def write(self, data: Any) -> int:
        channel = self._distea_channel
        session = channel.session if channel is not None else None
        if channel is None or session is None or session.finished:
            return super().write(data)
        if self._distea_epoch == channel.epoch:
            counts = self._distea_target
        else:
            counts = self._distea_counts(channel)  # guards itself
        if counts is None:
            return super().write(data)
        if not isinstance(counts, _Counts):  # a socket's stream
            target = channel.sending_on(self.fileno())
            t0 = monotonic_ns()
            written = super().write(data)
            if target is not None and written:
                channel.moved_out(target, written, t0, monotonic_ns())
            return written
        return channel.coalesced_write(self, data, counts, session)


class PipeChannel:
    """The pipe interceptor: ``os`` patches, ``open``, the standard streams, the counts."""

    def __init__(self) -> None:
        self.patches = Patches()
        self.session: TracerSession | None = None
        self.fds: dict[int, int] = {}
        """fd → pipe inode; ``SOCKET`` for a stream socket; -1 for a descriptor known to be
        neither."""
        self.socket_fds: SocketFds | None = None
        self.sockets: SocketChannel | None = None
        """The socket channel, once ``socket`` is imported (it sets this)."""
        """Stream sockets met through ``os.read``/``os.write`` (made at the first)."""
        self.fd_sockets: dict[int, _Stream] = {}
        """fd → its stream, for the descriptors cached as ``SOCKET``."""
        self.pipes: dict[int, _Counts] = {}
        """pipe inode → its counts in this process (inherited by a forked child)."""
        self.std_streams: list[Any] = []
        """The standard streams this channel rebuilt over :class:`FileIO`."""
        self.std_patches = Patches()
        """``sys.std*`` and ``sys.__std*__`` set to :attr:`std_streams`."""
        self.exiting = False
        """Set at a normal exit: the rebuilt streams stay (inert) for the interpreter
        to flush last, as it would have flushed the originals."""
        self.epoch = 0
        """Moves whenever a descriptor is made or closed through ``os`` (see :class:`FileIO`)."""
        self.last_send: tuple[Any, _Counts] | None = None
        """The last pipe send record of a file object's write, and its pipe (coalescing)."""

    def install(self, session: TracerSession) -> None:
        self.session = session
        FileIO._distea_channel = self
        self._patch_read_write()
        self._patch_fd_makers()
        self._patch_open()
        self._adopt_std_streams()

    def uninstall(self) -> None:
        if not self.exiting:
            for stream in self.std_streams:
                # what waits leaves in order, before the old stream is back; an error
                # meets the program at its next write or at exit, as untraced
                with suppress(Exception):
                    stream.flush()
            self.std_patches.restore()
        self.std_streams = []
        self.patches.restore()
        if FileIO._distea_channel is self:
            FileIO._distea_channel = None

    def flush_at_exit(self) -> None:
        """Called by the session at a normal exit, before it finishes: the interpreter
        would flush the standard streams right after the tracer is gone."""
        self.exiting = True
        for stream in self.std_streams:
            with suppress(Exception):  # the interpreter reports it at exit
                stream.flush()

    def error(self) -> None:
        if self.session is not None:
            self.session.tracer_error()

    def counts_of(self, ino: int) -> _Counts:
        counts = self.pipes.get(ino)
        if counts is None:
            counts = self.pipes[ino] = _Counts(ino)
        return counts

    def coalesced_write(self, file: FileIO, data: Any, counts: _Counts,
                        session: TracerSession) -> int:
        """``file.write(data)`` on ``counts``'s pipe, recorded as a send.

        A write that follows this thread's previous pipe send with nothing
        recorded in between (no other event moved the clock, the send is
        still the last pending record, on the same pipe) extends that send
        instead of adding one: the record moves to a clock reserved before
        the bytes left and now ends at the new offset. Nothing was recorded
        between the two writes, so every method that ran between them ran
        at the old clock: a receive paired with the extended send still
        comes after all of them (safe), and an unbuffered ``print`` loop
        (``-u``, two writes a line) pays one clock tick and a tuple per write
        instead of a full record. If anything was recorded meanwhile (another
        thread), the write gets a record of its own at the reserved clock.
        """
        records = session.emitter.pending
        clock = session.clock
        previous = self.last_send
        reserved: tuple[int, int] | None = None
        extend = None
        try:
            if (previous is not None and previous[1] is counts and records
                    and records[-1] is previous[0]):
                extend = previous[0]
                if (extend[1] != clock.value or extend[6] != get_ident()
                        or extend[4] != counts.written):
                    extend = None
            if extend is not None:
                clock.value = value = clock.value + 1
                reserved = (value, extend[5])
            else:
                reserved = session.stamp()
        except Exception:
            self.error()
        t0 = monotonic_ns()
        written = io.FileIO.write(file, data)
        t1 = monotonic_ns()
        if not written or reserved is None:
            return written
        try:
            start = counts.written
            counts.written = end = start + written
            value = reserved[0]
            if (extend is not None and records and records[-1] is extend
                    and clock.value == value and extend[4] == start):
                # the bracket now spans both writes: every byte moved within it
                record = (extend[0], value, extend[2], extend[3], end, extend[5], extend[6],
                          {"t": [extend[7]["t"][0], t1]})
                records[-1] = record
                self.last_send = (record, counts)
                session.service_if_due()
                return written
            session.send(KIND, counts.name, start, end, {"t": [t0, t1]}, stamp=reserved)
            last = records[-1] if records else None
            self.last_send = ((last, counts) if last is not None and last[1] == value
                              and last[4] == end else None)
        except Exception:
            self.error()
        return written

    def pipe_inode(self, fd: int) -> int:
        """The pipe inode behind ``fd``, ``SOCKET`` for a connected stream socket (its
        stream in :attr:`fd_sockets`), or -1; a cached pipe or socket is checked again."""
        ino = self.fds.get(fd)
        if ino is None or ino != -1:
            try:
                st = fstat(fd)
            except OSError:
                return -1
            if stat.S_ISFIFO(st.st_mode):
                ino = st.st_ino
            elif stat.S_ISSOCK(st.st_mode) and self._socket_stream(fd, st.st_ino):
                ino = SOCKET
            else:
                ino = -1
            self.fds[fd] = ino
        return ino

    def _socket_stream(self, fd: int, inode: int) -> bool:
        """Whether ``fd`` is a connected stream socket; if so, its stream is kept."""
        if self.socket_fds is None:
            from distea.tracer.channels.socket_fds import SocketFds

            self.socket_fds = SocketFds()
        stream = self.socket_fds.stream(fd, inode, self.sockets)
        if stream is None:
            return False
        self.fd_sockets[fd] = stream
        return True

    def recorded_streams(self) -> list[tuple[str, str, int, int]]:
        """What ``os`` calls moved on stream sockets, for the unseen-traffic detector."""
        return [] if self.socket_fds is None else list(self.socket_fds.recorded_streams())

    def recorded_for(self, sock: Any) -> tuple[int, int] | None:
        """(bytes sent, bytes received) that ``os`` calls moved on ``sock``, if any: the
        detector's check of a socket the program closes adds them to its object's."""
        return None if self.socket_fds is None else self.socket_fds.recorded_for(sock)

    def forget(self, *fds: int) -> None:
        self.epoch += 1
        for fd in fds:
            self.fds.pop(fd, None)

    # -- os.read / os.write ---------------------------------------------------------

    def _patch_read_write(self) -> None:
        """``os.read``/``os.write`` and the calls that move bytes between descriptors
        in bulk: ``os.readv``/``os.writev``, ``os.sendfile`` (``socket.sendfile`` and
        asyncio's ``sock_sendfile`` use it), ``os.splice``."""
        channel = self
        fds_get = self.fds.get
        orig_read, orig_write = os.read, os.write

        def read(fd: int, n: int) -> bytes:
            session = channel.session
            if fds_get(fd, 0) == -1 or session is None or moved_by_multiprocessing(fd):
                return orig_read(fd, n)  # not a pipe, or a message of multiprocessing's
            try:
                session.before_blocking()  # a pipe read may wait
            except Exception:
                channel.error()
            t0 = monotonic_ns()
            data = orig_read(fd, n)
            if data:
                channel.moved_in(session, fd, len(data), t0, monotonic_ns())
            return data

        def write(fd: int, data: Any) -> int:
            target = channel.sending_on(fd)
            if target is None:
                return orig_write(fd, data)
            t0 = monotonic_ns()
            written = orig_write(fd, data)
            channel.moved_out(target, written, t0, monotonic_ns())
            return written

        for func, original in ((read, orig_read), (write, orig_write)):
            _look_like(func, original)
            self.patches.replace(os, original.__name__, func)
        self._patch_bulk()

    def _patch_bulk(self) -> None:
        """The bulk calls, each as ``read``/``write`` above, on whichever of its
        descriptors is a pipe or a stream socket (``splice`` reads one, writes the
        other: a write at the destination, stamped before the bytes left, and a read
        at the source)."""
        channel = self

        def bulk(name: str, source: tuple[int, str] | None,
                 destination: tuple[int, str] | None) -> None:
            original = getattr(os, name, None)
            if original is None:
                return

            def fd_at(where: tuple[int, str] | None, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> int | None:
                if where is None:
                    return None
                fd = args[where[0]] if len(args) > where[0] else kwargs.get(where[1])
                return fd if type(fd) is int else None

            def moved(*args: Any, **kwargs: Any) -> Any:
                session = channel.session
                if session is None:
                    return original(*args, **kwargs)
                out, into = fd_at(destination, args, kwargs), fd_at(source, args, kwargs)
                target = channel.sending_on(out) if out is not None else None
                reading = into is not None and channel.is_followed(into)
                if target is None and not reading:
                    return original(*args, **kwargs)
                if reading:
                    try:
                        session.before_blocking()  # a read may wait
                    except Exception:
                        channel.error()
                t0 = monotonic_ns()
                count = original(*args, **kwargs)
                t1 = monotonic_ns()
                if target is not None:
                    channel.moved_out(target, count, t0, t1)
                if reading and count:
                    channel.moved_in(session, into, count, t0, t1)  # type: ignore[arg-type]
                return count

            _look_like(moved, original)
            self.patches.replace(os, name, moved)

        bulk("readv", (0, "fd"), None)
        bulk("writev", None, (0, "fd"))
        bulk("sendfile", (1, "in_fd"), (0, "out_fd"))
        bulk("splice", (0, "src"), (1, "dst"))

    def is_followed(self, fd: int) -> bool:
        """Whether reads of ``fd`` are recorded here: a pipe or a stream socket, and not
        the descriptor of the multiprocessing call running in this thread. Never
        raises: it runs in the program's call, before the call itself."""
        try:
            return self.fds.get(fd, 0) != -1 and not moved_by_multiprocessing(fd) and \
                self.pipe_inode(fd) != -1
        except Exception:
            self.error()
            return False

    def moved_in(self, session: TracerSession, fd: int, received: int, t0: int,
                 t1: int) -> None:
        """Record ``received`` bytes that an ``os`` call read from ``fd``, if it is a pipe
        or a stream socket."""
        if session.finished:
            return
        try:
            ino = self.pipe_inode(fd)
            if ino >= 0:
                record_in(session, self.counts_of(ino), received, t0, t1)
            elif ino == SOCKET:
                record_in(session, self.fd_sockets[fd], received, t0, t1)
        except Exception:
            self.error()

    def sending_on(self, fd: int) -> tuple[TracerSession, _Counts | _Stream, tuple[int, int]
                                           ] | None:
        """Where a write to ``fd`` goes and its stamp, taken now, before the bytes
        leave; None where ``fd`` is not a pipe or stream socket this channel follows."""
        session = self.session
        if (self.fds.get(fd, 0) == -1 or session is None or session.finished
                or moved_by_multiprocessing(fd)):
            return None
        try:
            ino = self.pipe_inode(fd)
            if ino >= 0:
                return session, self.counts_of(ino), session.stamp()
            if ino == SOCKET:
                return session, self.fd_sockets[fd], session.stamp()
        except Exception:
            self.error()
        return None

    def moved_out(self, target: tuple[TracerSession, _Counts | _Stream, tuple[int, int]],
                  written: int, t0: int, t1: int) -> None:
        """Record ``written`` bytes that an ``os`` call wrote where :meth:`sending_on`
        said, at the stamp it took."""
        if not written:
            return
        session, where, reserved = target
        try:
            if isinstance(where, _Counts):
                start = where.written
                where.written = end = start + written
                session.send(KIND, where.name, start, end, {"t": [t0, t1]}, stamp=reserved)
            else:
                start = where.sent
                where.sent = end = start + written
                session.send(where.kind, where.outgoing, start, end, stamp=reserved)
        except Exception:
            self.error()

    def _patch_fd_makers(self) -> None:
        """Keep the fd cache true: new and closed descriptors are forgotten."""
        channel = self

        def wrap_new(name: str) -> None:
            original = getattr(os, name)

            def new_fd(*args: Any, **kwargs: Any) -> Any:
                result = original(*args, **kwargs)
                channel.forget(*(result if isinstance(result, tuple) else (result,)))
                return result

            _look_like(new_fd, original)
            self.patches.replace(os, name, new_fd)

        def wrap_close(name: str) -> None:
            original = getattr(os, name)

            def close_fd(*args: Any, **kwargs: Any) -> Any:
                if name == "close":
                    channel.forget(args[0] if args else kwargs["fd"])
                elif name == "dup2":
                    channel.forget(args[1] if len(args) > 1 else kwargs["fd2"])
                else:  # closerange
                    low, high = args[0], args[1]
                    channel.forget(*[fd for fd in channel.fds if low <= fd < high])
                return original(*args, **kwargs)

            _look_like(close_fd, original)
            self.patches.replace(os, name, close_fd)

        for name in FD_MAKERS:
            if hasattr(os, name):
                wrap_new(name)
        for name in FD_CLOSERS:
            wrap_close(name)

    # -- file objects -------------------------------------------------------------------

    def _patch_open(self) -> None:
        """``io.open``, ``open`` and ``_io.open`` (one function under three names) give a
        file object over a pipe descriptor a counting raw layer; any other call goes
        straight to the original."""
        channel = self
        fds_get = self.fds.get
        original = io.open

        def open(*args: Any, **kwargs: Any) -> Any:
            file = args[0] if args else kwargs.get("file")
            if type(file) is str and file.endswith(CODE_SUFFIXES):
                return original(*args, **kwargs)  # an import, most likely
            if type(file) is int and fds_get(file, 0) != -1:
                session = channel.session
                try:
                    known = (session is not None and not session.finished
                             and channel.pipe_inode(file) != -1 and len(args) <= 8
                             and set(kwargs) <= set(OPEN_PARAMETERS[len(args):]))
                except Exception:
                    channel.error()
                    known = False
                if known:
                    arguments = dict(zip(OPEN_PARAMETERS, args, strict=False)) | kwargs
                    return over_pipe(original, arguments)
                return original(*args, **kwargs)
            stream = original(*args, **kwargs)
            session = channel.session
            if session is not None and not session.finished and type(file) is not int:
                try:
                    if stat.S_ISFIFO(fstat(stream.fileno()).st_mode):
                        return over_fifo(original, stream, args, kwargs)
                except Exception:
                    channel.error()
            return stream

        _look_like(open, original)
        self.patches.replace(io, "open", open)
        self.patches.replace(builtins, "open", open)
        io_module = sys.modules.get("_io")
        if io_module is not None and getattr(io_module, "open", None) is original:
            self.patches.replace(io_module, "open", open)

    def _adopt_std_streams(self) -> None:
        """Rebuild the interpreter's standard streams that are pipes over :class:`FileIO`.

        Only streams that are still the interpreter's own (``sys.stdout is
        sys.__stdout__``, plain io classes over descriptor 0, 1 or 2) are
        touched. What the old stream holds is flushed first; it is kept (the
        patches hold it) and put back at uninstall, unless the process is
        exiting (see :attr:`exiting`).
        """
        for name, fd in STD_STREAMS:
            try:
                stream = getattr(sys, name)
                if (stream is None or stream is not getattr(sys, f"__{name}__")
                        or type(stream) is not io.TextIOWrapper
                        or self.pipe_inode(fd) == -1):
                    continue
                rebuilt = rebuilt_std_stream(stream, fd)
                if rebuilt is None:
                    continue
                if stream.writable():
                    stream.flush()
                self.std_patches.replace(sys, name, rebuilt)
                self.std_patches.replace(sys, f"__{name}__", rebuilt)
                self.std_streams.append(rebuilt)
            except Exception:
                self.error()


def record_in(session: TracerSession, where: _Counts | _Stream, received: int, t0: int,
              t1: int) -> None:
    """Record ``received`` bytes read from a pipe (its counts; bracket ``[t0, t1]``) or a
    stream socket (its stream), at the offset its count stands at."""
    if isinstance(where, _Counts):
        start = where.read
        where.read = start + received
        session.recv(KIND, where.name, start, start + received, {"t": [t0, t1]})
    else:
        start = where.received
        where.received = start + received
        session.recv(where.kind, where.incoming, start, start + received)


def over_pipe(original: Any, arguments: dict[str, Any]) -> Any:
    """``open(**arguments)`` for a pipe descriptor, with a counting raw layer.

    The original builds its layers first without owning the descriptor: it
    checks the arguments (raising what it raises) and decides every default
    (encoding, line buffering); the same layers are then built over
    :class:`FileIO`. The model is dropped; closing it leaves the descriptor
    open. Arguments the original refuses go to the original itself, which
    raises (and closes the descriptor or not) exactly as untraced.
    """
    try:
        model = original(**(arguments | {"closefd": False}))
    except Exception:
        return original(**arguments)  # the same error, with the original's own effects
    text = model if isinstance(model, io.TextIOWrapper) else None
    buffered = text.buffer if text is not None else model
    model_raw = buffered if isinstance(buffered, io.FileIO) else buffered.raw
    raw = FileIO(arguments["file"], model_raw.mode, closefd=arguments.get("closefd", True))
    try:
        result = _same_layers(raw, buffered, model_raw, text, arguments.get("buffering", -1),
                              arguments.get("newline"))
    except BaseException:
        raw.close()
        raise
    model.close()
    return result


def over_fifo(original: Any, stream: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
              ) -> Any:
    """``stream``, which ``open`` made of a FIFO's path, as the same layers over a
    counting raw layer: over a duplicate of its descriptor (the path is not opened
    twice: a FIFO's open waits for its other end), named by the path as before; the
    original stream is closed. Named pipes between processes were recorded at
    neither end when both opened them by path."""
    arguments = dict(zip(OPEN_PARAMETERS, args, strict=False)) | kwargs  # open took them
    duplicate = os.dup(stream.fileno())
    try:
        result = over_pipe(original, arguments | {"file": duplicate, "closefd": True,
                                                  "opener": None})
    except BaseException:
        os.close(duplicate)
        raise
    layer = result
    while not isinstance(layer, io.FileIO):
        layer = getattr(layer, "buffer", None) or layer.raw
    layer.name = arguments["file"]
    stream.close()
    return result


def _same_layers(raw: FileIO, buffered: Any, model_raw: Any, text: Any, buffering: int,
                 newline: str | None) -> Any:
    """Layers over ``raw`` like ``text``/``buffered`` over ``model_raw``."""
    layer: Any = raw
    if buffered is not model_raw:
        size = buffering if buffering > 1 else default_buffer_size(raw)
        layer = type(buffered)(raw, size)
    if text is None:
        return layer
    wrapper = io.TextIOWrapper(layer, encoding=text.encoding, errors=text.errors,
                               newline=newline, line_buffering=text.line_buffering,
                               write_through=text.write_through)
    wrapper.mode = text.mode  # type: ignore[misc]
    return wrapper


def rebuilt_std_stream(stream: io.TextIOWrapper, fd: int) -> io.TextIOWrapper | None:
    """A standard stream like ``stream`` (as the interpreter makes it on POSIX:
    newline ``"\\n"``, buffered unless ``-u``) over a counting raw layer; None
    if ``stream`` is not the plain stack the interpreter makes."""
    buffered = stream.buffer
    model_raw = buffered if type(buffered) is io.FileIO else getattr(buffered, "raw", None)
    if (type(model_raw) is not io.FileIO or model_raw.fileno() != fd or model_raw.closefd
            or type(buffered) not in (io.FileIO, io.BufferedReader, io.BufferedWriter)):
        return None
    raw = FileIO(fd, model_raw.mode, closefd=False)
    raw.name = model_raw.name
    rebuilt: io.TextIOWrapper = _same_layers(raw, buffered, model_raw, stream, -1, "\n")
    return rebuilt


def _look_like(func: Any, original: Any) -> None:
    """A patch answers to the original's name, documentation and signature."""
    func.__wrapped__ = original
    for attribute in ("__name__", "__qualname__", "__module__", "__doc__"):
        with suppress(AttributeError, TypeError):
            setattr(func, attribute, getattr(original, attribute))
