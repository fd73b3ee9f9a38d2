"""Stream sockets whose bytes move through ``os.read``/``os.write`` on their descriptor.

The socket channel follows socket objects' methods. A program may move a
connected stream socket's bytes without them: a child given one end of a
socket pair by number (``pass_fds``) that writes it with ``os.write`` and
never imports ``socket``, a parent that reads it with ``os.read``. Those
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

Limits: a socket whose bytes one process moves both through its object's
methods and through ``os`` is counted twice apart, so the offsets of one
direction overlap; the analyzer then reports the reads it cannot place
(external or uncertain, with their reason). File objects over a socket's
descriptor (``os.fdopen``, ``open(fd)``), ``os.sendfile`` (under
``socket.sendfile``) and ``os.readv``/``os.writev`` are not followed: where
the other end records, its reads are reported as beyond the recorded sends
(and TCP's kernel counts say so too); where neither end records, nothing
is (a Unix socket has no kernel counts to compare).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from distea.tracer.channels.sockets import _Stream


class SocketFds:
    """The stream sockets met through ``os`` calls, by inode (None: not followed)."""

    def __init__(self) -> None:
        self.by_inode: dict[int, _Stream | None] = {}

    def stream(self, fd: int, inode: int) -> _Stream | None:
        """The stream of socket ``inode``, open as ``fd``; None for a socket that is not a
        connected stream (a listener, a datagram socket)."""
        try:
            return self.by_inode[inode]
        except KeyError:
            stream = self.by_inode[inode] = describe_fd(fd)
            return stream

    def recorded_streams(self) -> Iterator[tuple[str, str, int, int]]:
        """(kind, outgoing channel, bytes sent, bytes received), for the unseen-traffic
        detector, which adds them to what the socket channel recorded."""
        for stream in self.by_inode.values():
            if stream is not None:
                yield stream.kind, stream.outgoing, stream.sent, stream.received


    def recorded_for(self, sock: Any) -> tuple[int, int] | None:
        """(bytes sent, bytes received) that ``os`` calls moved on ``sock``'s socket."""
        try:
            stream = self.by_inode.get(os.fstat(sock.fileno()).st_ino)
        except (OSError, ValueError):
            return None
        return None if stream is None else (stream.sent, stream.received)


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
