"""Datagrams (UDP, Unix datagram sockets) and socket pairs.

Datagrams (kinds ``udp`` and ``unixgram``): ``sendto``/``recvfrom``/
``recvfrom_into`` are patched here; ``send``/``recv``/``recv_into``/
``sendmsg``/``recvmsg`` on a connected datagram socket are patched by the
stream channel, which hands non-stream sockets to :meth:`DatagramChannel.sent`
and :meth:`DatagramChannel.received`. One datagram is one message. The
channel is the *destination* address, the one thing both ends name alike:
the sender knows where it sent, the receiver where it is bound (a sender's
own address is often a wildcard it cannot see as the receiver does; it goes
in ``meta["src"]`` for people, not for matching). Addresses are normalised
so that the loopback, the wildcard and this host's primary address are one
name (:func:`canonical_host`), and Unix paths are made absolute.
``meta["fp"]`` is the payload's length and CRC-32.

Broadcast and multicast: a datagram sent to ``255.255.255.255`` (or
``<broadcast>``), to a ``*.255`` address from a socket with ``SO_BROADCAST``
set (a subnet's or loopback's broadcast address), or to an IPv4/IPv6
multicast group arrives at every socket bound to that port, which names
itself by its own address. Such a send is written on channel ``*:PORT``
with ``meta["fanout"] = True``, and the analyzer offers it to every UDP
receive on that port (:mod:`distea.analyzer.match_broadcast`).

Socket pairs: every ``socket.socketpair()`` writes a LINK record
(``HOST:sock:INODE`` of each end) where it is created; both the stream
channel and multiprocessing name a socket-pair end that way, so the analyzer
knows that what one end sends the other receives, in every process that
inherits an end.

Pipes and FIFOs are byte streams: :mod:`distea.tracer.channels.pipes`.
"""

from __future__ import annotations

import _socket
import os
import socket
from posix import fstat  # not os.fstat: a program may mock that one, and see our calls
from time import monotonic_ns

from distea.tracer.channels.multiprocessing import fingerprint, socket_end_name
from distea.tracer.channels.patching import Patches
from distea.tracer.channels.sockets import peeks
from distea.tracer.session import TracerSession

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any

LOOPBACK_NAMES = frozenset({"", "*", "0.0.0.0", "::", "localhost", "::1", "ip6-localhost"})
_primary: list[str] = []


def primary_address() -> str:
    """This host's address as others see it (no packet is sent), else 127.0.0.1."""
    if not _primary:
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            probe.connect(("10.254.254.254", 1))
            _primary.append(probe.getsockname()[0])
        except OSError:
            _primary.append("127.0.0.1")
        finally:
            probe.close()
    return _primary[0]


def canonical_host(host: str) -> str:
    """One name for every way of saying "this host"; other hosts as given."""
    host = host.strip("[]")
    if host in LOOPBACK_NAMES or host.startswith("127.") or host == socket.gethostname():
        return primary_address()
    if host.startswith("::ffff:"):
        return canonical_host(host[7:])
    return host


def inet_name(addr: Any) -> str:
    host, port = addr[0], addr[1]
    host = canonical_host(str(host))
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def unix_name(addr: Any) -> str:
    if isinstance(addr, bytes):
        if addr.startswith(b"\0"):
            return "@" + addr[1:].decode(errors="replace")
        addr = addr.decode(errors="replace")
    if not addr:
        return "?"
    if addr.startswith("\0"):
        return "@" + addr[1:]
    return os.path.abspath(addr)


def _peer(sock: socket.socket) -> Any:
    try:
        return sock.getpeername()
    except OSError:
        return None


BROADCAST_PREFIX = "*:"


def _broadcast_name(sock: socket.socket, addr: Any) -> str | None:
    """``*:PORT`` for a datagram that every socket bound to PORT may receive, else None.

    Multicast groups are 224.0.0.0/4 and ff00::/8; a ``*.255`` address is a
    broadcast only if the socket may broadcast (``SO_BROADCAST``, asked only then).
    """
    host = str(addr[0]).strip("[]")
    if host in ("255.255.255.255", "<broadcast>") or (":" in host and
                                                      host.lower().startswith("ff")):
        return f"{BROADCAST_PREFIX}{addr[1]}"
    first = host.split(".", 1)[0]
    if first.isdigit() and 224 <= int(first) <= 239 and host.count(".") == 3:
        return f"{BROADCAST_PREFIX}{addr[1]}"
    if host.endswith(".255") and sock.getsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST):
        return f"{BROADCAST_PREFIX}{addr[1]}"
    return None


def whole_datagram(sock: socket.socket, shown: Any) -> Any:
    """The whole datagram a ``MSG_PEEK`` receive showed part of (``shown``, cut to the
    program's buffer), looked at again the same way, so that its fingerprint is the
    sender's; ``shown`` where it was whole or cannot be looked at again."""
    look = socket.MSG_PEEK | socket.MSG_DONTWAIT
    try:  # the interpreter's own methods: not recorded
        size = _socket.socket.recv_into(sock, bytearray(1), 1, look | socket.MSG_TRUNC)
        if size > memoryview(shown).nbytes:
            return _socket.socket.recv(sock, size, look)
    except OSError:
        pass
    return shown


class DatagramChannel:
    def __init__(self) -> None:
        self.patches = Patches()
        self.sock_counts: dict[str, list[int]] = {}
        self.peeked: dict[int, bytes] = {}
        """By ``id(sock)``: the datagram a ``MSG_PEEK`` receive recorded, not yet taken
        (:meth:`_record_recv`)."""
        self.session: TracerSession | None = None
        self._stream_channel: Any = None

    def install(self, session: TracerSession) -> None:
        self.session = session
        for channel in session.channels:
            channel = getattr(channel, "channel", None) or channel  # a loaded DeferredChannel
            if hasattr(channel, "datagrams") and hasattr(channel, "streams"):
                channel.datagrams = self
                self._stream_channel = channel
        cls = socket.socket
        self._patch_sendto(cls)
        self._patch_recvfrom(cls, "recvfrom")
        self._patch_recvfrom(cls, "recvfrom_into")
        self._patch_socketpair()

    def uninstall(self) -> None:
        if self._stream_channel is not None:
            self._stream_channel.datagrams = None
        self.patches.restore()

    # -- datagram sockets ---------------------------------------------------------

    @staticmethod
    def _kind(sock: socket.socket) -> str | None:
        if sock.type != socket.SOCK_DGRAM:
            return None
        if sock.family == socket.AF_UNIX:
            return "unixgram"
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            return "udp"
        return None

    @staticmethod
    def _name(kind: str, addr: Any) -> str:
        return unix_name(addr) if kind == "unixgram" else inet_name(addr)

    def _next(self, key: str, slot: int) -> int:
        counts = self.sock_counts.get(key)
        if counts is None:
            counts = self.sock_counts[key] = [0, 0]
        index = counts[slot]
        counts[slot] = index + 1
        return index

    def _pair_end(self, sock: socket.socket) -> str | None:
        """A socket-pair end (both ends unnamed Unix sockets) is named by its inode."""
        if sock.family != socket.AF_UNIX or sock.getsockname():
            return None
        try:
            if sock.getpeername():
                return None
        except OSError:
            return None
        return socket_end_name(fstat(sock.fileno()).st_ino)

    def _prepare_send(self, sock: socket.socket, dst: Any, stamp: tuple[int, int] | None = None
                      ) -> tuple[str, str, tuple[int, int]] | None:
        """Before a datagram leaves: its kind, channel and reserved clock, or None."""
        kind = self._kind(sock)
        if kind is None or self.session is None or self.session.finished:
            return None
        channel = self._pair_end(sock) if dst is None else None
        if channel is None:
            addr = dst if dst is not None else sock.getpeername()
            channel = (kind == "udp" and _broadcast_name(sock, addr)) or self._name(kind, addr)
        return kind, channel, stamp if stamp is not None else self.session.stamp()

    def _commit_send(self, sock: socket.socket, prepared: tuple[str, str, tuple[int, int]],
                     payload: Any) -> None:
        kind, channel, reserved = prepared
        meta: dict[str, Any] = {"fp": fingerprint(payload)}
        try:
            source = sock.getsockname()
        except OSError:  # closed meanwhile: no source to name
            source = None
        if source is not None:
            meta["src"] = self._name(kind, source)
        if channel.startswith(BROADCAST_PREFIX):
            meta["fanout"] = True
        index = self._next(channel, 0)
        if self.session is not None:
            self.session.send(kind, channel, index, index + 1, meta, stamp=reserved)

    def _on_stream(self, sock: socket.socket) -> bool:
        """A stream socket that ``sendto``/``recvfrom`` moved bytes on (CPython allows
        them there): the stream channel records those bytes, as it records ``send``."""
        session = self.session
        return (self._stream_channel is not None and session is not None
                and not session.finished and sock.type == socket.SOCK_STREAM)

    def _record_recv(self, sock: socket.socket, payload: Any, src: Any,
                     peek: bool = False) -> None:
        """One datagram received (or peeked at). A peek is recorded as the receive,
        once; the receive that then takes the same datagram (its bytes begin with the
        peeked ones: a peek may be truncated) is not recorded again."""
        kind = self._kind(sock)
        if kind is None and self._on_stream(sock):
            self._stream_channel.received_on(sock, memoryview(payload).nbytes, peek)
            return
        if kind is None or self.session is None:
            return
        if peek:
            payload = whole_datagram(sock, payload)
        pending = self.peeked.pop(id(sock), None) if self.peeked else None
        if pending is not None:
            got = bytes(payload)
            shorter = min(len(got), len(pending))
            if got[:shorter] == pending[:shorter]:  # the datagram the peek recorded
                if peek:
                    self.peeked[id(sock)] = pending  # peeked again: still there
                return
        if peek:
            self.peeked[id(sock)] = bytes(payload)
        channel = self._pair_end(sock) or self._name(kind, sock.getsockname())
        meta: dict[str, Any] = {"fp": fingerprint(payload)}
        if src is not None:
            meta["src"] = self._name(kind, src)
        index = self._next(channel, 1)
        self.session.recv(kind, channel, index, index + 1, meta)

    def sent(self, sock: socket.socket, name: str, data: Any, args: tuple[Any, ...],
             result: Any, stamp: tuple[int, int] | None = None) -> None:
        """A ``send``/``sendall``/``sendmsg`` on a non-stream socket succeeded.

        ``stamp`` is the clock the stream channel took before the call.
        """
        dst = None
        if name == "sendmsg":
            payload: Any = b"".join(bytes(b) for b in data)
            if len(args) >= 3 and args[2] is not None:
                dst = args[2]
        else:
            payload = data
        prepared = self._prepare_send(sock, dst, stamp)
        if prepared is not None:
            self._commit_send(sock, prepared, payload)

    def received(self, sock: socket.socket, name: str, args: tuple[Any, ...],
                 result: Any, peek: bool = False) -> None:
        """A ``recv``/``recv_into``/``recvmsg``/``recvmsg_into`` on a non-stream socket."""
        if name == "recv":
            payload, src = result, _peer(sock)
        elif name == "recv_into":
            payload, src = memoryview(args[0]).cast("B")[:result], _peer(sock)
        elif name == "recvmsg":
            payload, src = result[0], result[3]
        else:  # recvmsg_into
            buffers = [memoryview(b).cast("B") for b in args[0]]
            payload = b"".join(bytes(b) for b in buffers)[:result[0]]
            src = result[3]
        self._record_recv(sock, payload, src or None, peek)

    def _patch_sendto(self, cls: type) -> None:
        original = cls.sendto  # type: ignore[attr-defined]
        channel = self

        def sendto(sock: Any, data: Any, *args: Any) -> Any:
            prepared = stream_stamp = None
            unprepared = False
            try:
                prepared = channel._prepare_send(sock, args[-1] if args else None)
                if prepared is None and channel._on_stream(sock):
                    stream_stamp = monotonic_ns(), channel.session.stamp()  # type: ignore[union-attr]
            except Exception:
                unprepared = True
            result = original(sock, data, *args)  # arguments it rejects: the program's error
            if unprepared:
                channel._error()  # a call that went through, and the tracer failed on it
            try:
                if prepared is not None:
                    channel._commit_send(sock, prepared, data)
                elif stream_stamp is not None:
                    channel._stream_channel.sent_on(sock, int(result), *stream_stamp)
            except Exception:
                channel._error()
            return result

        sendto.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(cls, "sendto", sendto)

    def _patch_recvfrom(self, cls: type, name: str) -> None:
        original = getattr(cls, name)
        channel = self
        into = name == "recvfrom_into"

        def recvfrom(sock: Any, *args: Any, **kwargs: Any) -> Any:
            session = channel.session
            if session is not None:
                try:
                    session.before_blocking()  # the program may wait here: records leave
                except Exception:
                    channel._error()
            result = original(sock, *args, **kwargs)
            try:
                if into:
                    buffer = args[0] if args else kwargs["buffer"]
                    payload = memoryview(buffer).cast("B")[:result[0]]
                else:
                    payload = result[0]
                channel._record_recv(sock, payload, result[1] or None,
                                     bool(args or kwargs) and peeks(name, args, kwargs))
            except Exception:
                channel._error()
            return result

        recvfrom.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(cls, name, recvfrom)

    def _error(self) -> None:
        if self.session is not None:
            self.session.tracer_error()

    # -- socket pairs ---------------------------------------------------------------

    def _patch_socketpair(self) -> None:
        original = socket.socketpair
        channel = self

        def socketpair(*args: Any, **kwargs: Any) -> Any:
            pair = original(*args, **kwargs)
            session = channel.session
            if session is not None and not session.finished:
                try:
                    a, b = (socket_end_name(fstat(s.fileno()).st_ino) for s in pair)
                    session.link("socketpair", a, b)
                except Exception:
                    session.tracer_error()
            return pair

        socketpair.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(socket, "socketpair", socketpair)
