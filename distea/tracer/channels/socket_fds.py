"""Stream sockets whose bytes move through ``os`` calls on their descriptor.

The socket channel follows socket objects' methods. A program may move a
connected stream socket's bytes without them: a child given one end of a
socket pair by number (``pass_fds``) that writes it with ``os.write`` and
never imports ``socket``, a parent that reads it with ``os.read``;
``socket.sendfile``, which moves a file's bytes with ``os.sendfile``;
``os.readv``/``os.writev``/``os.splice``. Those
calls reach the pipe channel's ``os`` patches (:mod:`.pipes`); for a
descriptor that is a connected stream socket they are recorded with what
this module gives: the names the socket channel gives that connection
(``unix``/``tcp``, ``SRC>DST``; a socket pair's end by its inode, tied to
the other end by the LINK written where the pair was made), and byte
offsets counted per socket (inode) in this process. Before this, such bytes
were recorded at neither end: a cross-process effect missed, and nothing
said so for a Unix socket (TCP has the kernel's counts, :mod:`.unseen`).

The names are found once per socket with the socket channel's own
:func:`~distea.tracer.channels.sockets.describe`, which imports ``socket``:
only a process that moves socket bytes through ``os`` pays for it.

One connection, one count: where the process also has a socket object for
the connection that the socket channel follows (an HTTP server that reads
the request and writes the headers through the object, then the body
through ``os.sendfile`` under ``socket.sendfile``), the ``os`` calls count
on that object's stream, whichever of the two met the connection first
(:meth:`SocketFds.share`); the two never count one direction apart.

File objects over a socket's descriptor (a child whose standard streams
are the connection, inetd's way; ``os.fdopen``, ``open(fd)``) get the pipe
channel's counting raw layer, which counts on the same stream.

Limits: bytes moved in C at both ends (a C extension's own I/O) are not
seen: where the other end records, its reads are reported as beyond the
recorded sends (and TCP's kernel counts say so too); where neither end
records, nothing is (a Unix socket has no kernel counts to compare).
"""

from __future__ import annotations

from posix import fstat  # not os.fstat: a program may mock that one, and see our calls

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from distea.tracer.channels.sockets import SocketChannel, _Stream


class SocketFds:
    """The stream sockets met through ``os`` calls, by inode (None: not followed)."""

    def __init__(self) -> None:
        self.by_inode: dict[int, _Stream | None] = {}
        self.shared: set[int] = set()
        """``id`` of the streams that are also a socket object's (the socket channel
        reports their counts)."""

    def stream(self, fd: int, inode: int, sockets: SocketChannel | None) -> _Stream | None:
        """The stream of socket ``inode``, open as ``fd``: the socket channel's, where it
        follows an open object of the connection (``sockets``, once it is installed);
        None for a socket that is not a connected stream (a listener, a datagram
        socket)."""
        try:
            return self.by_inode[inode]
        except KeyError:
            stream = describe_fd(fd)
            if stream is not None and sockets is not None:
                found = sockets.same_connection(stream)
                if found is not None:
                    self.shared.add(id(found))
                    stream = found
            self.by_inode[inode] = stream
            return stream

    def share(self, described: _Stream) -> _Stream | None:
        """This module's stream of the connection the socket channel has just met as a
        socket object (by its names), to count on from now on; None if none."""
        for stream in self.by_inode.values():
            if (stream is not None and stream.outgoing == described.outgoing
                    and stream.kind == described.kind):
                self.shared.add(id(stream))
                return stream
        return None

    def recorded_streams(self) -> Iterator[tuple[str, str, int, int]]:
        """(kind, outgoing channel, bytes sent, bytes received), for the unseen-traffic
        detector, which adds them to what the socket channel recorded."""
        for stream in self.by_inode.values():
            if stream is not None and id(stream) not in self.shared:
                yield stream.kind, stream.outgoing, stream.sent, stream.received

    def recorded_for(self, sock: Any) -> tuple[int, int] | None:
        """(bytes sent, bytes received) that ``os`` calls moved on ``sock``'s socket, apart
        from its object's."""
        try:
            stream = self.by_inode.get(fstat(sock.fileno()).st_ino)
        except (OSError, ValueError):
            return None
        if stream is None or id(stream) in self.shared:
            return None
        return stream.sent, stream.received


def describe_fd(fd: int) -> _Stream | None:
    """The socket channel's stream (names, counts from 0) for the connected stream
    socket open as ``fd``."""
    import socket  # only in a process that moves socket bytes through ``os``

    from distea.tracer.channels.sockets import describe

    sock = socket.socket(fileno=fd)
    try:
        return describe(sock, "tcp")
    finally:
        sock.detach()  # the descriptor stays the program's
