"""A ZeroMQ PUSH socket in plain Python, for the collector's local ``ipc://`` endpoint.

Why not pyzmq here: importing it costs every traced process about 20 ms
(it pulls in ``inspect``, ``pickle``, ``random`` and more), and libzmq's I/O
threads must be stopped before every ``fork`` and started again after. A
local run needs neither: its collector listens on a Unix socket, and all a
traced process does is push messages to it. ZMTP 3.0 with the NULL
mechanism (rfc.zeromq.org/spec/23) is a short greeting, one READY command
each way, then length-prefixed frames, which this module writes itself.
The collector's side stays pyzmq (a PULL socket), which cannot tell the
difference. Runs that reach a remote collector over ``tcp://`` with CURVE
keep using pyzmq (``distea.tracer.zmqpush``).

The socket never blocks the program: it is non-blocking, messages wait in
a byte-bounded queue (like ZeroMQ's high-water mark) while the kernel's
buffer is full or the collector has not answered the greeting yet, and
only :meth:`ZmtpPush.close` waits, for at most its linger time. No thread
is started, so ``fork`` needs no care: the child closes its copy of the
descriptor unused and connects anew (:meth:`ZmtpPush.abandon`).
"""

from __future__ import annotations

import _socket
import time
from _collections import deque

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from collections.abc import Sequence

# Lengths are written with int.to_bytes, not struct, and the queue is
# _collections' deque: struct and collections cost a traced process ~2 ms at
# start-up, and this module is imported by each one (for its first batch).

GREETING = (b"\xff" + bytes(8) + b"\x7f"   # signature
            + bytes((3, 0))                # version 3.0
            + b"NULL".ljust(20, b"\x00")   # mechanism
            + bytes(1 + 31))               # as-server = 0, filler
GREETING_SIZE = len(GREETING)


def command(name: bytes, properties: dict[bytes, bytes]) -> bytes:
    """One ZMTP command frame: its name and its metadata properties."""
    body = bytes((len(name),)) + name + b"".join(
        bytes((len(key),)) + key + len(value).to_bytes(4, "big") + value
        for key, value in properties.items())
    if len(body) < 256:
        return bytes((0x04, len(body))) + body
    return b"\x06" + len(body).to_bytes(8, "big") + body


HELLO = GREETING + command(b"READY", {b"Socket-Type": b"PUSH"})
"""All this side says before its first message."""
MORE, LONG = 0x01, 0x02
RECONNECT_INTERVAL_S = 0.05
"""After the listener's backlog was full, try again no sooner than this."""
HANDSHAKE_WAIT_S = 0.5
"""How long a new connection waits for the collector's greeting (see ``_pump``):
well past what a collector on a loaded machine takes, short for one that is stuck."""
MAX_IOV = 64
"""Buffers handed to one ``sendmsg`` call (far below any system's IOV_MAX)."""


def frame_header(size: int, more: bool) -> bytes:
    flags = MORE if more else 0
    if size < 256:
        return bytes((flags, size))
    return bytes((flags | LONG,)) + size.to_bytes(8, "big")


class PeerRefused(Exception):
    """The peer's handshake is not a ZeroMQ PULL's."""


def parse_handshake(data: bytes | bytearray) -> bool:
    """Whether ``data`` holds the peer's whole greeting and READY command.

    Raises :class:`PeerRefused` when it says something else (an ERROR
    command, another mechanism, a pre-3.0 peer).
    """
    if len(data) >= 1 and data[0] != 0xFF:
        raise PeerRefused("not a ZeroMQ peer")
    if len(data) >= 11 and data[10] < 3:
        raise PeerRefused(f"ZMTP {data[10]}.x peer; 3.0 or later is needed")
    if len(data) < GREETING_SIZE + 2:
        return False
    mechanism = bytes(data[12:32]).rstrip(b"\x00")
    if mechanism != b"NULL":
        raise PeerRefused(f"peer wants the {mechanism.decode(errors='replace')} mechanism")
    flags = data[GREETING_SIZE]
    if not flags & 0x04:
        raise PeerRefused("peer sent a message before its READY command")
    if flags & LONG:
        if len(data) < GREETING_SIZE + 9:
            return False
        size = int.from_bytes(data[GREETING_SIZE + 1:GREETING_SIZE + 9], "big")
        body_at = GREETING_SIZE + 9
    else:
        size, body_at = data[GREETING_SIZE + 1], GREETING_SIZE + 2
    if len(data) < body_at + size:
        return False
    body = bytes(data[body_at:body_at + size])
    if body.startswith(b"\x05ERROR"):
        reason = body[7:7 + body[6]].decode(errors="replace") if len(body) > 6 else ""
        raise PeerRefused(f"peer refused the connection: {reason or 'no reason given'}")
    if not body.startswith(b"\x05READY"):
        raise PeerRefused("peer's first command is not READY")
    return True


class ZmtpPush:
    """One PUSH connection to a PULL socket listening on a Unix socket path.

    The socket is a bare ``_socket.socket``, not the ``socket.socket`` subclass
    whose methods the socket channel wraps: the tracer's own bytes are never
    traced. Not thread-safe: the emitter calls it under its lock.
    """

    closes_at_fork = False
    """No thread to stop: the connection may cross a fork (the child abandons it)."""

    def __init__(self, path: str, max_queued_bytes: int) -> None:
        self.path = path
        self.max_queued_bytes = max_queued_bytes
        self.failure: str | None = None
        """Why the connection is gone for good (refused, reset, not ZeroMQ)."""
        self._sock: _socket.socket | None = None
        self._peer_ready = False
        self._handshake = bytearray()
        self._out: deque[bytes | memoryview] = deque()
        """Bytes written by ``send`` that the kernel has not taken yet."""
        self._queued_bytes = 0
        self._retry_at = 0.0

    def has_room(self) -> bool:
        """Whether a message may be queued now (the queue is under its bound)."""
        self._pump()
        return self.failure is None and self._queued_bytes < self.max_queued_bytes

    def send(self, frames: Sequence[bytes | memoryview], timeout_ms: int | None) -> bool:
        """Queue one multipart message, and write what the kernel takes now.

        Without ``timeout_ms`` it is refused (False) when the queue is full;
        with it (the final message) it is queued anyway, for ``close`` to
        deliver within its linger. False also once the connection is gone.
        """
        if timeout_ms is None and not self.has_room():
            return False
        if self.failure is not None:
            return False
        last = len(frames) - 1
        for index, frame in enumerate(frames):
            header = frame_header(len(frame), index < last)
            self._out.append(header)
            if frame:  # no empty buffer in the queue: a write always moves it on
                self._out.append(frame)
            self._queued_bytes += len(header) + len(frame)
        self._pump()
        return self.failure is None

    def close(self, linger_ms: int) -> bool:
        """Wait at most ``linger_ms`` for the queue to leave, then close; True if it did."""
        deadline = time.monotonic() + linger_ms / 1000
        delivered = self._wait(deadline, written=True)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._out.clear()
        self._queued_bytes = 0
        return delivered

    def abandon(self) -> None:
        """In a forked child: close this process's copy of the parent's connection.

        Nothing is written on it: the parent's stream goes on, whole.
        """
        if self._sock is not None:
            self._sock.close()  # the child's descriptor only: no shutdown, nothing sent
            self._sock = None
        self._out.clear()
        self._queued_bytes = 0

    # -- the connection -----------------------------------------------------------

    def _connect(self) -> None:
        now = time.monotonic()
        if now < self._retry_at:
            return
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(self.path)
            sock.send(HELLO)  # a new socket's buffer takes these 96 bytes whole
        except BlockingIOError:
            sock.close()  # the listener's backlog is full: try again a little later
            self._retry_at = now + RECONNECT_INTERVAL_S
            return
        except OSError as exc:
            sock.close()
            self.failure = f"cannot connect to {self.path}: {exc.strerror or exc}"
            return
        self._sock = sock

    def _pump(self) -> None:
        """Move the connection on as far as it goes without waiting."""
        if self.failure is not None:
            return
        if self._sock is None:
            self._connect()
            if self._sock is None:
                return
            # Wait a little for the collector's answer, so that the first batch
            # leaves now: the collector normally answers within a millisecond,
            # and records left queued until the program's next flush would be
            # lost with a process (or a collector) killed early. One that does
            # not answer in time costs each new process this wait once.
            self._wait(time.monotonic() + HANDSHAKE_WAIT_S, written=False)
            return
        if not self._peer_ready:
            self._read_handshake(self._sock)
        if self._peer_ready and self._out:
            self._write(self._sock)

    def _read_handshake(self, sock: _socket.socket) -> None:
        try:
            data = sock.recv(256)
        except BlockingIOError:
            return
        except OSError as exc:
            self._fail(f"handshake failed: {exc.strerror or exc}")
            return
        if not data:
            self._fail("handshake failed: the collector closed the connection")
            return
        self._handshake += data
        try:
            self._peer_ready = parse_handshake(self._handshake)
        except PeerRefused as exc:
            self._fail(str(exc))

    def _write(self, sock: _socket.socket) -> None:
        out = self._out
        while out:
            chunks = [out[i] for i in range(min(len(out), MAX_IOV))]
            try:
                written = sock.sendmsg(chunks, (), _socket.MSG_NOSIGNAL)
            except BlockingIOError:
                return
            except OSError as exc:
                self._fail(f"connection lost: {exc.strerror or exc}")
                return
            self._queued_bytes -= written
            while written:
                head = out[0]
                if len(head) <= written:
                    written -= len(head)
                    out.popleft()
                else:
                    out[0] = memoryview(head)[written:]
                    written = 0

    def _wait(self, deadline: float, *, written: bool) -> bool:
        """Move the connection on, waiting on the socket until ``deadline``, until
        the collector's handshake is in and (with ``written``) the queue written out.

        Whether it got there; after a failure, whether nothing was left queued.
        """
        while True:
            self._pump()
            if self.failure is not None:
                return not self._out
            if self._peer_ready and not (written and self._out):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            sock = self._sock
            if sock is None:  # waiting to connect again
                time.sleep(min(remaining, RECONNECT_INTERVAL_S))
                continue
            if self._peer_ready:
                import select  # here: only a full kernel buffer (a stuck collector) waits so

                poller = select.poll()
                poller.register(sock, select.POLLOUT)
                poller.poll(max(1, int(remaining * 1000)))  # PEP 475: signals do not end it
            else:
                _wait_readable(sock, remaining)

    def _fail(self, reason: str) -> None:
        self.failure = reason
        if self._sock is not None:
            self._sock.close()
            self._sock = None



def _wait_readable(sock: _socket.socket, timeout: float) -> None:
    """Until ``sock`` has bytes (or its end, or an error) to read, at most ``timeout``
    seconds: a timed peek at one byte, left for the read that follows. The
    collector's greeting is waited for so in every traced process, which then
    needs no ``select`` (an extension module) to start."""
    sock.settimeout(timeout)  # PEP 475: a signal does not end the wait
    try:
        sock.recv(1, _socket.MSG_PEEK)
    except OSError:  # timed out, or the error the read that follows will meet
        return
    finally:
        sock.setblocking(False)
