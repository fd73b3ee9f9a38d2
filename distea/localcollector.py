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

One thread, one ``poll`` loop that sleeps until a socket has something; a
pipe wakes it for ``drain`` and ``close``. The sockets are ``_socket``'s (the
``socket`` and ``selectors`` modules would only add imports to every
``distea run``), the thread and its locks ``_thread``'s: ``threading``
imports ``functools`` and ``collections``, about 4 ms of every run, for a
thread that needs none of its machinery.
"""

from __future__ import annotations

import _thread
import os
import select
import struct
import time
from _socket import SO_PEERCRED, SOL_SOCKET
from _socket import socket as Socket

from distea.runwriter import ProcessStream, RunWriter, alive
from distea.suppressing import suppress
from distea.tracer.zmtp import GREETING, GREETING_SIZE, LONG, MORE, command

TYPE_CHECKING = False  # not typing's: distea run imports this module
if TYPE_CHECKING:
    from os import PathLike

HELLO = GREETING + command(b"READY", {b"Socket-Type": b"PULL"})
"""All this side says: its greeting and READY, at once on accepting."""
COMMAND = 0x04
READ_SIZE = 1 << 20
DRAIN_CHECK_S = 0.01
"""How often ``drain`` looks again at processes that outlive the command."""
PEERCRED = struct.Struct("3i")


class Connection:
    """One tracer's connection: bytes not yet parsed, and the message being assembled."""

    def __init__(self, sock: Socket) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.greeted = False
        self.ready = False
        self.parts: list[bytes] = []
        self.pid = 0
        with suppress(OSError):
            self.pid = PEERCRED.unpack(
                sock.getsockopt(SOL_SOCKET, SO_PEERCRED, PEERCRED.size))[0]

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

    def __init__(self, run_dir: str | PathLike[str], endpoint: str, listener_fd: int) -> None:
        """``listener_fd``: the run's socket, bound and listening (``distea.launcher.listen``)."""
        super().__init__(run_dir)
        self.endpoint = endpoint
        self._listener = Socket(fileno=listener_fd)
        self._listener.setblocking(False)
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._poll = select.poll()
        self._poll.register(self._listener.fileno(), select.POLLIN)
        self._poll.register(self._wake_read, select.POLLIN)
        self._connections: dict[int, Connection] = {}
        self._stopping = False
        self._asked = 0
        """How many times ``drain`` has asked for a pass of the loop."""
        self._served = 0
        """The last ``_asked`` that a whole pass of the loop has answered."""
        self._pass_ended = _thread.allocate_lock()
        """Released by the loop at the end of a pass (when held): ``drain`` waits on it.
        Only the loop releases it, so a release never finds it free."""
        self._pass_ended.acquire()
        self._running = _thread.allocate_lock()
        """Held from ``start`` until the loop's thread ends."""

    def start(self) -> LocalCollector:
        self._running.acquire()
        try:
            _thread.start_new_thread(self._run, ())
        except BaseException:
            self._running.release()
            raise
        return self

    def _run(self) -> None:
        """The collector's thread (a daemon, as every ``_thread`` thread: it never
        holds up this process's exit)."""
        try:
            self._loop()
        finally:
            self._running.release()

    def _alive(self) -> bool:
        return self._running.locked()

    def _wait_for_a_pass(self, timeout: float) -> None:
        """Until a pass of the loop ends (perhaps one that ended before this call), or
        ``timeout``: the callers look at what they wait for again either way."""
        self._pass_ended.acquire(timeout=timeout)

    # -- the loop ----------------------------------------------------------------------

    def _loop(self) -> None:
        listener = self._listener.fileno()
        while not self._stopping:
            ready = self._poll.poll()
            with self._lock:
                asked = self._asked  # what drain asked before this pass looked at anything
            for fd, _ in ready:
                if fd == listener:
                    self._accept_all()
                elif fd == self._wake_read:
                    with suppress(OSError):
                        os.read(self._wake_read, 4096)
                elif fd in self._connections:
                    self._read(self._connections[fd])
            self._accept_all()  # what queued in the backlog meanwhile, every pass
            with self._lock:
                self._served = asked
            if self._pass_ended.locked():
                self._pass_ended.release()

    def _accept_all(self) -> None:
        while True:
            try:
                fd, _ = self._listener._accept()  # type: ignore[attr-defined]  # socket.accept
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._problem(f"cannot accept a tracer's connection: {exc.strerror}")
                return
            sock = Socket(fileno=fd)
            try:
                sock.sendall(HELLO)  # ~60 bytes into an empty buffer: never blocks
                sock.setblocking(False)
            except OSError:
                sock.close()
                continue
            self._connections[fd] = Connection(sock)
            self._poll.register(fd, select.POLLIN)

    def _read(self, conn: Connection) -> None:
        try:
            data = conn.sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            if conn.parts:
                self._problem(f"process {conn.pid}: its connection ended inside a message")
            self._forget(conn)
            return
        conn.buffer += data
        try:
            messages = conn.messages()
        except ValueError as exc:
            with self._lock:
                self.stats.rejected += 1
            self._refused(f"pid {conn.pid}", str(exc))
            self._forget(conn)
            return
        for frames in messages:
            self._accept(frames)

    def _forget(self, conn: Connection) -> None:
        fd = conn.sock.fileno()
        self._poll.unregister(fd)
        del self._connections[fd]
        conn.sock.close()

    def _wake(self) -> None:
        with suppress(OSError):  # full: the loop has a wake-up waiting already
            os.write(self._wake_write, b"\0")

    # -- the end of a run ------------------------------------------------------------------

    def drain(self, timeout: float, quiet: float = 0.3) -> list[ProcessStream]:
        """Wait until every connection has ended, or only live processes hold one open.

        A connection ends (end of file) after everything its process wrote:
        once none is left, every batch is stored. A process that outlives the
        command keeps its connection: it is waited for until ``timeout``, and
        then listed as still open, as is a process that connected and died
        without its final batch only once its end of file came (``quiet``
        bounds nothing here: the kernel's end of file is exact).

        No fixed wait: the loop is woken, and one whole pass of it, begun
        after this call, accepts every connection queued in the backlog; from
        then on the connections it knows are all there are.
        """
        del quiet  # kept for the Collector's signature: this side needs no settle time
        deadline = time.monotonic() + timeout
        with self._lock:
            self._asked += 1
            ticket = self._asked
        self._wake()
        while time.monotonic() < deadline and self._alive():
            with self._lock:
                served = self._served >= ticket
                holders = list(self._connections.values())
            if not served:
                self._wait_for_a_pass(DRAIN_CHECK_S)
                continue
            if not holders:
                break
            if all(self._outlives(c) for c in holders) and not self.open_processes():
                break
            self._wait_for_a_pass(DRAIN_CHECK_S)  # the next pass, or a look at the holders again
        return self.open_processes()

    def _outlives(self, conn: Connection) -> bool:
        """A live process whose stream has ended (its final batch came): nothing to wait for."""
        stream = next((s for s in self.streams.values() if s.pid == conn.pid), None)
        return stream is not None and stream.final and alive(stream)

    def close(self) -> None:
        self._stopping = True
        self._wake()
        if self._running.acquire(timeout=5):  # the loop's thread has ended
            self._running.release()
        for conn in list(self._connections.values()):
            with suppress(OSError, KeyError):
                self._forget(conn)
        self._listener.close()
        os.close(self._wake_read)
        os.close(self._wake_write)
        self._close_logs()
