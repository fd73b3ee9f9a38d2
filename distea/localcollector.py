"""The collector of a local run: the run's Unix socket, ZMTP 3.0 (NULL), in plain Python.

Every traced process of a local run pushes its batches with
:class:`distea.tracer.zmtp.ZmtpPush` over the ``ipc://`` socket that
``distea run`` bound before starting the command. This side speaks the
same small protocol — a greeting and a READY command each way, then
length-prefixed frames — so ``distea run`` imports no pyzmq and starts no
libzmq threads (about 20 ms and a context per run, idle; far more on a busy
machine), which ``distea collect`` (CURVE over tcp, :mod:`distea.collector`)
still needs.

Knowing each connection is what makes the end of a run exact: the kernel
closes a process's socket when it exits, after everything it wrote, so once
every connection has reached its end of file, every batch is stored. What
still holds a connection open is a process that outlives the command; it is
waited for, up to the flush timeout, as before. ``SO_PEERCRED`` names the
process behind a connection before its first batch arrives.

One thread, one ``selectors`` loop; a socket pair wakes it for ``close``.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
import time
from pathlib import Path

from distea.runwriter import ProcessStream, RunWriter, alive
from distea.tracer.zmtp import GREETING, GREETING_SIZE, LONG, MORE, command

HELLO = GREETING + command(b"READY", {b"Socket-Type": b"PULL"})
"""All this side says: its greeting and READY, at once on accepting."""
COMMAND = 0x04
READ_SIZE = 1 << 20
POLL_S = 0.05
PEERCRED = struct.Struct("3i")


class Connection:
    """One tracer's connection: bytes not yet parsed, and the message being assembled."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.greeted = False
        self.ready = False
        self.parts: list[bytes] = []
        self.pid = 0
        with contextlib.suppress(OSError):
            self.pid = PEERCRED.unpack(
                sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, PEERCRED.size))[0]

    def messages(self) -> list[list[bytes]]:
        """Whole messages now in the buffer; raises ValueError on what is not ZMTP."""
        out: list[list[bytes]] = []
        data, at = self.buffer, 0
        if not self.greeted:
            if len(data) < GREETING_SIZE:
                return out
            if data[0] != 0xFF or data[10] < 3 or bytes(data[12:16]) != b"NULL":
                raise ValueError("not a ZMTP 3 NULL peer")
            self.greeted, at = True, GREETING_SIZE
        while True:
            if len(data) - at < 2:
                break
            flags = data[at]
            if flags & LONG:
                if len(data) - at < 9:
                    break
                (size,) = struct.unpack_from(">Q", data, at + 1)
                body = at + 9
            else:
                size, body = data[at + 1], at + 2
            if len(data) < body + size:
                break
            frame = bytes(data[body:body + size])
            at = body + size
            if flags & COMMAND:
                self.ready = self.ready or frame.startswith(b"\x05READY")
                continue  # READY, or a PING we need not answer on a local socket
            if not self.ready:
                raise ValueError("a message before the READY command")
            self.parts.append(frame)
            if not flags & MORE:
                out.append(self.parts)
                self.parts = []
        del data[:at]
        return out


class LocalCollector(RunWriter):
    """Stores every batch that the run's traced processes push over its Unix socket."""

    def __init__(self, run_dir: Path, endpoint: str, listener_fd: int) -> None:
        """``listener_fd``: the run's socket, bound and listening (``distea.launcher.listen``)."""
        super().__init__(run_dir)
        self.endpoint = endpoint
        self._listener = socket.socket(fileno=listener_fd)
        self._listener.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)
        self._selector.register(self._wake_read, selectors.EVENT_READ)
        self._connections: dict[int, Connection] = {}
        self._stop = threading.Event()
        self._passes = 0
        self._pass = threading.Condition(self._lock)
        """Notified at the end of every pass of the loop (``_passes`` counts them)."""
        self._thread = threading.Thread(target=self._loop, name="distea-collector", daemon=True)

    def start(self) -> LocalCollector:
        self._thread.start()
        return self

    # -- the loop ----------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(POLL_S):
                sock = key.fileobj
                if sock is self._listener:
                    self._accept_all()
                elif sock is self._wake_read:
                    with contextlib.suppress(OSError):
                        self._wake_read.recv(4096)
                else:
                    assert isinstance(sock, socket.socket)
                    self._read(sock)
            self._accept_all()  # what queued in the backlog meanwhile, every pass
            with self._pass:
                self._passes += 1
                self._pass.notify_all()

    def _accept_all(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._problem(f"cannot accept a tracer's connection: {exc.strerror}")
                return
            try:
                sock.sendall(HELLO)  # ~60 bytes into an empty buffer: never blocks
                sock.setblocking(False)
            except OSError:
                sock.close()
                continue
            self._connections[sock.fileno()] = Connection(sock)
            self._selector.register(sock, selectors.EVENT_READ)

    def _read(self, sock: socket.socket) -> None:
        conn = self._connections[sock.fileno()]
        try:
            data = sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            if conn.parts:
                self._problem(f"process {conn.pid}: its connection ended inside a message")
            self._forget(sock)
            return
        conn.buffer += data
        try:
            messages = conn.messages()
        except ValueError as exc:
            with self._lock:
                self.stats.rejected += 1
            self._refused(f"pid {conn.pid}", str(exc))
            self._forget(sock)
            return
        for frames in messages:
            self._accept(frames)

    def _forget(self, sock: socket.socket) -> None:
        self._selector.unregister(sock)
        del self._connections[sock.fileno()]
        sock.close()

    # -- the end of a run ------------------------------------------------------------------

    def drain(self, timeout: float, quiet: float = 0.3) -> list[ProcessStream]:
        """Wait until every connection has ended, or only live processes hold one open.

        A connection ends (end of file) after everything its process wrote:
        once none is left, every batch is stored. A process that outlives the
        command keeps its connection: it is waited for until ``timeout``, and
        then listed as still open, as is a process that connected and died
        without its final batch only once its end of file came (``quiet``
        bounds nothing here: the kernel's end of file is exact).
        """
        del quiet  # kept for the Collector's signature: this side needs no settle time
        deadline = time.monotonic() + timeout
        with self._pass:
            seen = self._passes
        self._wake_write.send(b"\0")
        while time.monotonic() < deadline and self._thread.is_alive():
            with self._pass:
                self._pass.wait(0.01)
                if self._passes < seen + 2:
                    continue  # a whole pass after this call began: the backlog is accepted
                holders = list(self._connections.values())
            if not holders:
                break
            if all(self._outlives(c) for c in holders) and not self.open_processes():
                break
        return self.open_processes()

    def _outlives(self, conn: Connection) -> bool:
        """A live process whose stream has ended (its final batch came): nothing to wait for."""
        stream = next((s for s in self.streams.values() if s.pid == conn.pid), None)
        return stream is not None and stream.final and alive(stream)

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._wake_write.send(b"\0")
        self._thread.join(timeout=5)
        for conn in list(self._connections.values()):
            with contextlib.suppress(OSError, KeyError):
                self._forget(conn.sock)
        self._selector.close()
        self._listener.close()
        self._wake_read.close()
        self._wake_write.close()
        self._close_logs()
