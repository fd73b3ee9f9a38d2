"""multiprocessing connections: Pipe, Queue, SimpleQueue, Pool, managers, executors.

Everything multiprocessing moves between processes goes through one class,
``multiprocessing.connection.Connection``: ``Pipe()`` ends, the pipe inside
every ``Queue``/``SimpleQueue``/``JoinableQueue`` (written by the queue's
feeder thread), ``Pool``'s task and result queues, the connections of
manager proxies (``Listener``/``Client`` over Unix or TCP sockets), and
``concurrent.futures.ProcessPoolExecutor``'s queues and wake-up pipe. Its
``_send_bytes``/``_recv_bytes`` carry one whole message each (the length
prefix is theirs), so patching those two methods on the class records every
message exactly once, whatever the start method (fork, spawn, forkserver):
the class is patched in every traced process.

The connection writes its descriptor with ``os.write``/``_multiprocessing``
bound at import, so ``socket.socket`` patches never see it; the pipe
interceptor of :mod:`distea.tracer.channels.pipes` may (``os.write`` is
patched before multiprocessing binds it), and is told to stay out by
:data:`GUARD` ``.in_mp_call``: the connection whose call is running, so that
only its own descriptor is left out (a finalizer that runs inside the call,
such as a semaphore's unregistering write to the resource tracker's pipe,
is still the pipe's). The guard is the channels' own thread-local (``patching``),
not ``session.local``: the session replaces that one in a forked child,
while patches made before the fork keep the object they captured.

Channel identity (kind ``mp``), from the descriptor under the connection:

- a pipe (``Pipe(duplex=False)``, every queue): ``HOST:pipe:INODE``, the
  same at both ends;
- a socket pair (``Pipe()``): ``HOST:sock:INODE`` of each end; the LINK
  record that ties the two ends is written where the pair is created
  (``socket.socketpair``, patched by the datagram channel);
- a connected socket (managers, ``Listener``/``Client``): ``SRC>DST`` from
  the socket's addresses, like the stream channel, one name per direction.

``start`` is the message's index on that channel at this end; ``meta["fp"]``
is the payload's length and CRC-32 (``len << 32 | crc``), computed the same
way by sender and receiver.

On a pipe or a socket-pair end, which several processes may share (every
queue), ``meta["t"] = [t0, t1]`` brackets the operation in
``time.monotonic_ns()``: ``t0`` is read just before ``_send_bytes``/
``_recv_bytes`` touches the descriptor and ``t1`` just after it returned,
both inside the wrapper, and so inside whatever lock the caller holds (the
queue's ``_wlock`` around the feeder's write, ``_rlock`` around ``get``).
Every byte of the message moved between the two readings. On one host
``CLOCK_MONOTONIC`` is one clock for every process, so when two writes'
brackets do not overlap, the earlier bracket's message is the earlier one in
the pipe; likewise for reads. The locks make the brackets disjoint; the
analyzer (:mod:`distea.analyzer.match_queues`) checks that they are before it
relies on it. The readings and their packing cost ~0.4 µs a message; a queue
message costs tens.

multiprocessing is imported after the tracer starts, so the patch is applied
by a post-import hook (:class:`ImportHooks`) the moment
``multiprocessing.connection`` finishes executing; a program that never uses
multiprocessing pays one set lookup per import.
"""

from __future__ import annotations

import os
import socket
import stat
import zlib
from posix import fstat  # not os.fstat: a program may mock that one, and see our calls
from time import monotonic_ns
from types import ModuleType

from distea.tracer.channels.importhooks import IMPORT_HOOKS
from distea.tracer.channels.patching import GUARD, Patches
from distea.tracer.channels.sockets import describe
from distea.tracer.session import HOST, TracerSession

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any

KIND = "mp"
# GUARD (``in_mp_call``, read by the pipe channel) lives in ``patching``: the pipe
# channel is installed at start-up, this one only once multiprocessing is imported.


def fingerprint(data: Any) -> int:
    """Length and CRC-32 of a payload: what both ends of a message can compute."""
    view = data if isinstance(data, bytes | bytearray) else memoryview(data).cast("B")
    return (len(view) << 32) | zlib.crc32(view)


def socket_end_name(ino: int) -> str:
    """The channel name of one end of a socket pair (see LINK records)."""
    return f"{HOST}:sock:{ino}"


def pipe_name(ino: int) -> str:
    return f"{HOST}:pipe:{ino}"


def fd_channels(fd: int) -> tuple[str, str] | None:
    """(send channel, receive channel) of a connection's descriptor, or None."""
    st = fstat(fd)
    if stat.S_ISFIFO(st.st_mode):
        name = pipe_name(st.st_ino)
        return name, name
    if not stat.S_ISSOCK(st.st_mode):
        return None
    sock = socket.socket(fileno=os.dup(fd))
    try:
        if sock.family == socket.AF_UNIX and not sock.getsockname() and not _peer(sock):
            name = socket_end_name(st.st_ino)
            return name, name
        stream = describe(sock, "tcp")
        return (stream.outgoing, stream.incoming) if stream is not None else None
    finally:
        sock.close()


def _peer(sock: socket.socket) -> Any:
    try:
        return sock.getpeername()
    except OSError:
        return None




def unnamed_unix_end(name: str) -> bool:
    """Whether a connected socket's channel ``SRC>DST`` has an unnamed Unix end
    (``pidN``): every connection of that process to that path has this name."""
    return any(end.startswith("pid") and end[3:].isdigit() for end in name.split(">"))


class _Ends:
    """Per-connection state: channel names and message counts at this end."""

    __slots__ = ("incoming", "outgoing", "received", "sent", "timed")

    def __init__(self, outgoing: str, incoming: str) -> None:
        self.outgoing = outgoing
        self.incoming = incoming
        self.sent = 0
        self.received = 0
        self.timed = outgoing == incoming
        """A pipe or socket-pair end (one name for both ways): its messages carry
        ``meta["t"]``, since several processes may share it (a queue). A connected
        socket's name (``SRC>DST``) may stand for several connections at once
        (``pidN>PATH``), so brackets could not order its messages: none taken."""

    def connection_name(self, name: str, fp: int) -> str:
        """``name`` made one connection's, by the first message in its direction.

        A client process's connections to one Unix path (a manager client with
        several threads: one connection each) share ``pidN>PATH``, and FIFO per
        sender paired a thread's replies with another thread's look-alike ones.
        Both ends of a direction see its first message, so both suffix its
        fingerprint: ``pidN>PATH#FP``. A manager's (and any authenticated
        ``Listener``'s) first message each way is a random challenge or its
        digest, so every connection gets its own name; where first messages
        repeat, connections share a name as before.
        """
        return f"{name}#{fp:x}" if unnamed_unix_end(name) else name


class MultiprocessingChannel:
    def __init__(self) -> None:
        # here, not at the top: the datagram channel imports this module's helpers with
        # ``socket``, and a program that imports only ``socket`` need not load these
        import threading
        import weakref

        self.patches = Patches()
        self.ends: weakref.WeakKeyDictionary[Any, _Ends | None] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def install(self, session: TracerSession) -> None:
        self.session = session
        IMPORT_HOOKS.when_imported("multiprocessing.connection", self._patch_module)

    def uninstall(self) -> None:
        IMPORT_HOOKS.forget("multiprocessing.connection")
        self.patches.restore()

    def _patch_module(self, module: ModuleType) -> None:
        cls = getattr(module, "Connection", None)
        if cls is None or not hasattr(cls, "_send_bytes") or self.session.finished:
            return
        self._patch_send(cls)
        self._patch_recv(cls)

    def _ends_of(self, conn: Any) -> _Ends | None:
        try:
            return self.ends[conn]
        except KeyError:
            pass
        channels = fd_channels(conn.fileno())
        ends = _Ends(*channels) if channels is not None else None
        with self._lock:
            self.ends[conn] = ends
        return ends

    def _patch_send(self, cls: type) -> None:
        original = cls._send_bytes  # type: ignore[attr-defined]
        session = self.session
        local = GUARD
        channel = self

        def _send_bytes(conn: Any, buf: Any) -> None:
            if getattr(local, "in_mp_call", False):
                return original(conn, buf)
            reserved = ends = None
            try:
                ends = channel._ends_of(conn)
                if ends is not None:
                    reserved = session.stamp()
            except Exception:
                session.tracer_error()
            local.in_mp_call = conn  # truthy; the pipe channel skips its descriptor only
            t0 = monotonic_ns()
            try:
                original(conn, buf)
            finally:
                t1 = monotonic_ns()
                local.in_mp_call = False
            if ends is not None and reserved is not None:
                try:
                    index = ends.sent
                    ends.sent += 1
                    meta: dict[str, Any] = {"fp": fingerprint(buf)}
                    if index == 0:
                        ends.outgoing = ends.connection_name(ends.outgoing, meta["fp"])
                    if ends.timed:
                        meta["t"] = [t0, t1]
                    session.send(KIND, ends.outgoing, index, index + 1, meta, stamp=reserved)
                except Exception:
                    session.tracer_error()

        _send_bytes.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(cls, "_send_bytes", _send_bytes)

    def _patch_recv(self, cls: type) -> None:
        original = cls._recv_bytes  # type: ignore[attr-defined]
        session = self.session
        local = GUARD
        channel = self

        def _recv_bytes(conn: Any, maxsize: Any = None) -> Any:
            if getattr(local, "in_mp_call", False):
                return original(conn, maxsize)
            try:
                session.before_blocking()  # the program may wait here: records leave first
            except Exception:
                session.tracer_error()
            local.in_mp_call = conn  # truthy; the pipe channel skips its descriptor only
            t0 = monotonic_ns()
            try:
                result = original(conn, maxsize)
            finally:
                t1 = monotonic_ns()
                local.in_mp_call = False
            try:
                ends = channel._ends_of(conn)
                if ends is not None:
                    with result.getbuffer() as view:
                        meta: dict[str, Any] = {"fp": fingerprint(view)}
                    if ends.timed:
                        meta["t"] = [t0, t1]
                    index = ends.received
                    ends.received += 1
                    if index == 0:
                        ends.incoming = ends.connection_name(ends.incoming, meta["fp"])
                    session.recv(KIND, ends.incoming, index, index + 1, meta)
            except Exception:
                session.tracer_error()
            return result

        _recv_bytes.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(cls, "_recv_bytes", _recv_bytes)
