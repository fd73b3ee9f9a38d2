"""The backstop: TCP bytes that moved without the tracer seeing them (Linux).

The channels see bytes where Python code moves them. A C event loop's
protocol writing with ``transport.write``, a C extension with its own
sockets, ``libc.send`` through ctypes: none of them passes through a patched
method. The kernel counts every byte of a TCP connection anyway
(``getsockopt(IPPROTO_TCP, TCP_INFO)``), so the two are compared, per
connection, at a few moments only — no cost per message:

- when a ``socket.socket`` is closed (``_real_close``, under ``close``,
  ``with`` and ``makefile``'s last close);
- at each periodic flush (every 0.5 s while messages flow) and at exit, for
  every TCP connection open in the process (``/proc/self/fd``).

What the program wrote is ``tcpi_bytes_sent - tcpi_bytes_retrans +
tcpi_notsent_bytes`` (payload only; Linux ≥ 4.19, else the sent side is not
checked); what it read is ``tcpi_bytes_received`` less the bytes still
queued (``FIONREAD``) and the peer's FIN, which the kernel counts as one
byte. What the tracer recorded comes from every channel that follows byte
streams (``recorded_streams()``, by channel name; ``recorded_for(sock)``
at a close). A positive difference is written as a SEND of kind
``unseen`` on the connection's outgoing channel name, with the window of
this process's clock in which the bytes moved (``meta["lo"]``, exclusive,
to the record's own clock) and the counts; the analyzer reports it and
orders the connection safely (``distea/analyzer/unseen.py``).

A connection that a library's own transport opened, in C, while building
something whose every operation another channel records (torch.distributed's
gloo pairs, made while a process group is created; see
:func:`claim_transport`), is still compared and reported, with
``meta["via"]`` naming what claimed it; the analyzer decides whether the
claim covers the bytes (:mod:`distea.analyzer.unseen`).

Not compared: connections whose recorded bytes are TLS plaintext (the
kernel counts ciphertext), connections open across a ``fork`` (parent and
child share the kernel's counters), ZeroMQ's and the collector's own
connections (their messages are recorded, or they are ours), and anything
that is not TCP (Unix sockets and pipes have no such counters).
"""

from __future__ import annotations

import os
import sys
from posix import fstat  # not os.fstat: a program may mock that one, and see our calls
from stat import S_ISSOCK
from time import monotonic

from distea.tracer.channels.importhooks import IMPORT_HOOKS
from distea.tracer.channels.patching import Patches
from distea.tracer.session import TracerSession

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

KIND = "unseen"
TCP_INFO_SIZE = 232
RECEIVED_AT, NOTSENT_AT, SENT_AT = 128, 144, 200
"""Offsets in ``struct tcp_info``: ``tcpi_bytes_received`` (Linux 4.1), ``tcpi_notsent_bytes``
(4.6), ``tcpi_bytes_sent`` followed by ``tcpi_bytes_retrans`` (4.19)."""


def native_uint(data: bytes, at: int, size: int) -> int:
    """An unsigned integer of ``struct tcp_info`` (native byte order), without ``struct``
    (an extension module to load at start-up, for a check made at exit)."""
    return int.from_bytes(data[at:at + size], sys.byteorder)

FIN_RECEIVED_STATES = frozenset({6, 8, 9, 11})
"""TIME_WAIT, CLOSE_WAIT, LAST_ACK, CLOSING: the peer's FIN is in tcpi_bytes_received."""
CLOSED_STATE = 7
"""TCP_CLOSE after a reset: a FIN may or may not have come first (one byte of doubt)."""
SCAN_SPACING = 100
"""A periodic scan of every connection waits this many times its own duration."""
C_IO_LIBRARIES = ("uvloop", "grpc", "ray", "torch", "asyncpg", "psycopg", "aiohttp",
                  "pycurl", "confluent_kafka")
"""Libraries that move socket bytes in C, named as the likely reason when loaded."""

CLAIMED: dict[int, Callable[[], str]] = {}
"""Socket inode → the name of what claimed it, asked for when a report is written
(:func:`claim_transport`)."""

_fork_hooked: list[UnseenTrafficDetector] = []
"""The installed detector, told of forks (``os.register_at_fork`` cannot be undone)."""


def open_socket_inodes() -> dict[int, int]:
    """Descriptor → inode of every socket open in this process."""
    out: dict[int, int] = {}
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return out
    for name in names:
        try:
            st = fstat(int(name))
        except OSError:
            continue
        if S_ISSOCK(st.st_mode):
            out[int(name)] = st.st_ino
    return out


def claim_transport(fds: dict[int, int], owner: Callable[[], str],
                    exclude_ports: set[int]) -> None:
    """Claim the connected TCP sockets among ``fds`` (descriptor → inode) for ``owner``
    (which names it when a report is written: a torch group's name is decided at its
    first use), except those with a local or peer port in ``exclude_ports`` (a store's)."""
    import _socket

    for fd, inode in fds.items():
        try:
            probe = _socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            if probe.type == _socket.SOCK_STREAM and \
                    probe.family in (_socket.AF_INET, _socket.AF_INET6):
                local, peer = probe.getsockname(), probe.getpeername()
                if local[1] not in exclude_ports and peer[1] not in exclude_ports:
                    CLAIMED[inode] = owner
        except OSError:
            pass  # not connected: a listening socket
        finally:
            probe.close()


class Counts:
    """Bytes of one connection: what the kernel moved, what the tracer recorded."""

    __slots__ = ("kernel_received", "kernel_sent", "recorded_received", "recorded_sent",
                 "slack")

    def __init__(self, kernel_sent: int | None, kernel_received: int, slack: int,
                 recorded_sent: int, recorded_received: int) -> None:
        self.kernel_sent = kernel_sent
        self.kernel_received = kernel_received
        self.slack = slack
        self.recorded_sent = recorded_sent
        self.recorded_received = recorded_received

    def unseen(self) -> tuple[int, int]:
        sent = 0 if self.kernel_sent is None else self.kernel_sent - self.recorded_sent
        received = self.kernel_received - self.recorded_received
        if received <= self.slack:
            received = 0
        return max(sent, 0), max(received, 0)


def kernel_counts(sock: Any, recorded_sent: int, recorded_received: int) -> Counts | None:
    """The kernel's byte counts of a TCP connection beside the recorded ones, or None
    where the kernel has none. One ``getsockopt`` when nothing is unseen: the
    receive queue is only asked for (``FIONREAD``) when the counters differ."""
    import _socket

    info = sock.getsockopt(_socket.IPPROTO_TCP, _socket.TCP_INFO, TCP_INFO_SIZE)
    if len(info) < RECEIVED_AT + 8:
        return None  # a kernel before 4.1: nothing to compare with
    state = info[0]
    received = native_uint(info, RECEIVED_AT, 8)
    if received == recorded_received + 1 and state not in FIN_RECEIVED_STATES:
        # Linux reads the state before it locks the socket for the counters: a FIN
        # that arrived in between is counted, its state not yet seen (a 1-byte
        # "unseen" receive in the kvstore sample, now and then). Asked again, both
        # agree.
        info = sock.getsockopt(_socket.IPPROTO_TCP, _socket.TCP_INFO, TCP_INFO_SIZE)
        state, received = info[0], native_uint(info, RECEIVED_AT, 8)
    if state in FIN_RECEIVED_STATES:
        received -= 1
    if received > recorded_received:
        import fcntl
        import termios

        queued = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * 4)
        received -= int.from_bytes(queued, sys.byteorder, signed=True)
    sent = None
    if len(info) >= SENT_AT + 16:
        bytes_sent, retransmitted = native_uint(info, SENT_AT, 8), native_uint(info, SENT_AT + 8, 8)
        sent = bytes_sent - retransmitted + native_uint(info, NOTSENT_AT, 4)
    return Counts(sent, received, 1 if state == CLOSED_STATE else 0, recorded_sent,
                  recorded_received)


def likely_reason() -> str:
    loaded = [name for name in C_IO_LIBRARIES if name in sys.modules]
    if loaded:
        return ("moved in C by a library of this process (loaded: " + ", ".join(loaded)
                + "), or by another C extension or a direct system call")
    return "moved by a C extension or a direct system call (ctypes), outside Python's socket"


class UnseenTrafficDetector:
    def __init__(self) -> None:
        self.patches = Patches()
        self.checked: dict[str, tuple[int, int, int]] = {}
        """Connection (outgoing name) → (clock of its last check, unseen bytes sent and
        received reported so far)."""
        self.suspect: dict[str, tuple[int, int]] = {}
        """Differences found at the last periodic check, reported only if they last."""
        self.last_scan = 0
        """Clock of the last scan of every connection: one not met then was not open."""
        self.shared: set[int] = set()
        """Socket inodes open at a fork: their kernel counters are shared, not checked."""
        self.next_scan_at = 0.0
        """``time.monotonic()`` before which a periodic check is skipped (``SCAN_SPACING``)."""
        self.session: TracerSession | None = None

    def install(self, session: TracerSession) -> None:
        if not sys.platform.startswith("linux"):
            return  # (Linux has TCP_INFO since 2.6)
        self.session = session
        session.audits.append(self.audit)
        IMPORT_HOOKS.when_imported("socket", self._patch_close)  # C code needs no socket module
        if not _fork_hooked:
            os.register_at_fork(before=_before_fork)
        _fork_hooked[:] = [self]

    def uninstall(self) -> None:
        IMPORT_HOOKS.forget("socket", self._patch_close)
        self.patches.restore()
        CLAIMED.clear()
        if self.session is not None and self.audit in self.session.audits:
            self.session.audits.remove(self.audit)
        _fork_hooked.clear()

    # -- when to look ------------------------------------------------------------

    def _patch_close(self, socket: Any) -> None:
        original = socket.socket._real_close
        detector = self

        def _real_close(sock: Any, *args: Any, **kwargs: Any) -> Any:
            session = detector.session
            if session is not None and not session.finished:
                try:
                    if sock.type == socket.SOCK_STREAM and sock.fileno() >= 0 and \
                            sock.family in (socket.AF_INET, socket.AF_INET6):
                        detector.check_closing(sock)
                except Exception:
                    session.tracer_error()
            return original(sock, *args, **kwargs)

        _real_close.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(socket.socket, "_real_close", _real_close)

    def audit(self, reason: str) -> None:
        """Every open TCP connection: at the periodic flushes (spaced so that scans take
        at most 1% of the time) and at the end."""
        session = self.session
        if session is None or (reason == "periodic" and monotonic() < self.next_scan_at):
            return
        began = monotonic()
        now = session.clock.value
        recorded = self._recorded_by_name()
        seen: set[str] = set()
        for name, counts, inode in self._open_connections(self._covered_ports(), recorded):
            seen.add(name)
            owner = CLAIMED.get(inode)
            self._compare(name, counts, now, reason, lasting=reason != "periodic",
                          via=owner() if owner is not None else None)
        for name in [n for n in self.checked if n not in seen]:
            del self.checked[name]  # closed without us (in C): its last check stands
        self.last_scan = now
        self.next_scan_at = monotonic() + SCAN_SPACING * (monotonic() - began)

    def check_closing(self, sock: Any) -> None:
        """One socket the program is closing: its last chance to be compared.

        Costs one ``getsockopt`` when nothing is unseen; names, shared and
        covered connections are only looked at when the counters differ."""
        ssl = sys.modules.get("ssl")
        if ssl is not None and isinstance(sock, ssl.SSLSocket):
            return
        recorded_sent = recorded_received = 0
        for channel in self._stream_channels():
            found = getattr(channel, "recorded_for", None)
            mine = found(sock) if found is not None else None
            if mine is not None:
                recorded_sent += mine[0]
                recorded_received += mine[1]
        try:
            counts = kernel_counts(sock, recorded_sent, recorded_received)
        except OSError:
            return  # not connected (a listening socket, a failed connect)
        if counts is None or counts.unseen() == (0, 0):
            return
        try:
            local, peer = sock.getsockname(), sock.getpeername()
        except OSError:
            return
        if self._inode(sock.fileno()) in self.shared or \
                local[1] in self._covered_ports() or peer[1] in self._covered_ports():
            return
        from distea.tracer.channels.sockets import _address

        name = f"{_address(local)}>{_address(peer)}"
        session = self.session
        if session is not None:
            self._compare(name, counts, session.clock.value, "close", lasting=True)
        self.checked.pop(name, None)
        self.suspect.pop(name, None)

    # -- comparing -----------------------------------------------------------------

    def _compare(self, name: str, counts: Counts, now: int, reason: str, lasting: bool,
                 via: str | None = None) -> None:
        lo, reported_sent, reported_received = self.checked.get(name, (self.last_scan, 0, 0))
        sent, received = counts.unseen()
        clean = sent <= reported_sent and received <= reported_received
        if not lasting:
            # between a call's return and its record, another thread may be checking:
            # a difference counts only if the previous periodic check saw it too
            before = self.suspect.get(name, (0, 0))
            self.suspect[name] = (sent, received)
            sent, received = min(sent, before[0]), min(received, before[1])
        new_sent, new_received = max(sent - reported_sent, 0), max(received - reported_received, 0)
        session = self.session
        if session is None:
            return
        if not (new_sent or new_received):
            # the window of the next report starts here only if nothing new is pending
            # (a difference still waiting to be confirmed moved before this check)
            if clean:
                self.checked[name] = (now, reported_sent, reported_received)
            else:
                self.checked.setdefault(name, (lo, reported_sent, reported_received))
            return
        meta = {
            "lo": lo,
            "sent": new_sent,
            "received": new_received,
            "kernel_sent": counts.kernel_sent,
            "kernel_received": counts.kernel_received,
            "recorded_sent": counts.recorded_sent,
            "recorded_received": counts.recorded_received,
            "at": reason,
            "reason": likely_reason(),
        }
        if via:
            meta["via"] = via
        session.send(KIND, name, 0, 1, meta)
        self.checked[name] = (session.clock.value, max(sent, reported_sent),
                              max(received, reported_received))

    # -- what is open, what was recorded ---------------------------------------------

    def _stream_channels(self) -> list[Any]:
        session = self.session
        if session is None:
            return []
        channels = [getattr(c, "channel", None) or c for c in session.channels]
        return [c for c in channels if hasattr(c, "recorded_streams")]

    def _recorded_by_name(self) -> dict[str, tuple[bool, int, int]]:
        """Outgoing channel name → (any of it TLS plaintext, bytes sent, bytes received)."""
        out: dict[str, tuple[bool, int, int]] = {}
        for channel in self._stream_channels():
            for kind, name, sent, received in channel.recorded_streams():
                tls, s, r = out.get(name, (False, 0, 0))
                out[name] = (tls or kind == "ssl", s + sent, r + received)
        return out

    def _covered_ports(self) -> set[int]:
        """Ports of connections whose bytes are ours or recorded as messages (ZeroMQ)."""
        session = self.session
        ports: set[int] = set()
        if session is None:
            return ports
        endpoint = session.config.endpoint
        if endpoint.startswith("tcp://") and endpoint.rsplit(":", 1)[-1].isdigit():
            ports.add(int(endpoint.rsplit(":", 1)[-1]))
        for channel in session.channels:
            channel = getattr(channel, "channel", None) or channel
            covered = getattr(channel, "covered_ports", None)
            if covered is not None:
                ports |= covered()
        return ports

    def _inode(self, fd: int) -> int | None:
        try:
            st = fstat(fd)
        except OSError:
            return None
        return st.st_ino if S_ISSOCK(st.st_mode) else None

    def socket_inodes(self) -> list[tuple[int, int]]:
        """(descriptor, inode) of every socket open in this process."""
        return list(open_socket_inodes().items())

    def _open_connections(self, covered: set[int],
                          recorded: dict[str, tuple[bool, int, int]],
                          ) -> list[tuple[str, Counts, int]]:
        """(outgoing name, counts, inode) of every TCP connection open in this process
        whose bytes can be compared (not TLS plaintext, not covered, not shared)."""
        out: list[tuple[str, Counts, int]] = []
        inodes = self.socket_inodes()
        if not inodes:
            return out
        import _socket

        for fd, inode in inodes:
            if inode in self.shared:
                continue
            try:
                probe = _socket.socket(fileno=os.dup(fd))  # a duplicate: closing it is safe
            except OSError:
                continue
            try:
                if probe.type != _socket.SOCK_STREAM or \
                        probe.family not in (_socket.AF_INET, _socket.AF_INET6):
                    continue
                local, peer = probe.getsockname(), probe.getpeername()
                if local[1] in covered or peer[1] in covered:
                    continue
                # here, not above: the collector's Unix socket must not load socket
                from distea.tracer.channels.sockets import _address

                name = f"{_address(local)}>{_address(peer)}"
                tls, sent, received = recorded.get(name, (False, 0, 0))
                if tls:
                    continue  # TLS plaintext: not the kernel's bytes
                counts = kernel_counts(probe, sent, received)
                if counts is not None:
                    out.append((name, counts, inode))
            except OSError:
                continue  # not connected
            finally:
                probe.close()
        return out

    def before_fork(self) -> None:
        self.shared.update(inode for _, inode in self.socket_inodes())


def _before_fork() -> None:
    for detector in _fork_hooked:
        session = detector.session
        if session is not None and not session.finished:
            try:
                detector.before_fork()
            except Exception:
                session.tracer_error()
