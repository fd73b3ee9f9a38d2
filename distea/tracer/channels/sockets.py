"""Stream sockets (TCP, Unix) and SSL, sync and asyncio.

asyncio's selector transports and ``loop.sock_*`` call the same
``socket.socket`` methods, so patching the class covers both. ``ssl``
sockets bypass ``socket.send``/``recv`` (OpenSSL writes the descriptor
itself), so ``SSLSocket.send``/``write``/``read`` are patched too (once the
program imports ``ssl``, not at start-up) and count plaintext offsets, kind
``ssl``. TLS over a memory BIO (``ssl.SSLObject``: asyncio's SSL) is recorded
at that same level, so either end pairs with the other: ``SSLObject.write``
and ``read`` record the plaintext once :mod:`.tls_memory` has tied the
object to the socket carrying it, and that socket's own bytes (ciphertext)
are then counted for the unseen-traffic detector, not recorded.

A channel is one direction of one connection, named ``SRC>DST`` from
addresses both ends can see. Unix sockets often have an unnamed end; it is
named by its owner's pid, which the other end learns through SO_PEERCRED.
An ``SSLSocket`` that is not encrypted (yet) falls back on plain ``socket``
methods: its wrappers step aside then, so nothing is counted twice.
"""

from __future__ import annotations

import os
import select
import socket
import sys
from _weakref import ref
from posix import fstat  # not os.fstat: a program may mock that one, and see our calls
from time import monotonic, monotonic_ns
from types import ModuleType

from distea.tracer.channels.importhooks import IMPORT_HOOKS
from distea.tracer.channels.patching import Patches
from distea.tracer.session import TracerSession

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from distea.tracer.channels.amqp import AmqpStream
    from distea.tracer.channels.pipes import PipeChannel
    from distea.tracer.channels.resp import RespStream
    from distea.tracer.channels.tls_memory import MemoryTls

# _weakref's ref, and no struct: ``weakref`` (with ``_weakrefset``) and ``struct``
# are ~2 ms that a traced process pays when it first imports ``socket``.

STREAM_SENDS = ("send", "sendall", "sendmsg")
STREAM_RECVS = ("recv", "recv_into", "recvmsg", "recvmsg_into")
PEERCRED_SIZE = 12
"""``struct ucred``: pid, uid, gid (three C ints)."""
UNKNOWN: Any = object()
"""A socket not met yet (``None`` in the table means: met, and not a stream we follow)."""


class _Stream:
    """Per-socket state: its two channel names and the bytes moved each way.

    ``timed``: this end spoke first (a client), so its messages carry
    ``meta["t"]``, CLOCK_MONOTONIC in ns — taken before a send leaves and
    after a receive returns — with which the analyzer orders traffic through
    an untraced server in the middle (a relay: Redis, a broker, a database),
    whose clients speak first. Servers that read first pay nothing for it.
    ``resp``: the reader of a Redis or AMQP client connection (:mod:`.resp`,
    :mod:`.amqp`), or None.
    ``carrier``: a socket under TLS whose plaintext an ``ssl.SSLObject`` records:
    its bytes are counted (the kernel's, for the detector), not recorded.
    """

    __slots__ = ("carrier", "incoming", "kind", "outgoing", "peeked", "received", "resp",
                 "sent", "timed")

    def __init__(self, kind: str, outgoing: str, incoming: str) -> None:
        self.kind = kind
        self.outgoing = outgoing
        self.incoming = incoming
        self.sent = 0
        self.received = 0
        self.peeked = 0
        """The furthest byte a ``MSG_PEEK`` receive showed (:func:`_taken`)."""
        self.timed = False
        self.carrier = False
        self.resp: RespStream | AmqpStream | None = None


def _address(addr: Any) -> str:
    """An end's name in a stream's channel names. An IPv4 peer of a dual-stack IPv6
    socket is ``::ffff:a.b.c.d`` there and ``a.b.c.d`` at its own end: both say
    ``a.b.c.d``, so that the two ends' names meet."""
    if isinstance(addr, tuple):
        host = addr[0]
        if type(host) is str and host.startswith("::ffff:") and "." in host:
            host = host[7:]
        return f"{host}:{addr[1]}"
    if isinstance(addr, bytes):
        return addr.decode(errors="replace")
    return str(addr)


def broker_protocol(first: Any) -> RespStream | AmqpStream | None:
    """The broker protocol (Redis's RESP, AMQP 0-9-1) that a client's first bytes open,
    followed message by message (``resp.py``, ``amqp.py``); None for any other.

    Their modules are imported here, at a process's first client stream, not with
    ``socket``: a process that imports it and never connects (a multiprocessing
    worker) does not load them."""
    from distea.tracer.channels.amqp import AmqpStream, looks_like_amqp
    from distea.tracer.channels.resp import RespStream, looks_like_resp

    if looks_like_resp(first):
        return RespStream()
    if looks_like_amqp(first):
        return AmqpStream()
    return None


def _unix_names(sock: socket.socket) -> tuple[str, str]:
    local, peer = sock.getsockname(), sock.getpeername()
    try:
        credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, PEERCRED_SIZE)
        peer_pid = int.from_bytes(credentials[:4], sys.byteorder, signed=True)
    except OSError:
        peer_pid = 0
    return (_address(local) or f"pid{os.getpid()}", _address(peer) or f"pid{peer_pid}")


def describe(sock: socket.socket, kind: str) -> _Stream | None:
    """Channel names for a connected stream socket, or None if not a stream we follow."""
    try:
        if sock.type != socket.SOCK_STREAM:
            return None
        if sock.family == socket.AF_UNIX:
            kind = "ssl" if kind == "ssl" else "unix"
            if not sock.getsockname() and not sock.getpeername():
                # Both ends unnamed: a socket pair. Each end is named by its own
                # inode, both directions; the LINK record written where the pair
                # was created (datagrams.py) ties the two ends together.
                name = f"{socket.gethostname()}:sock:{fstat(sock.fileno()).st_ino}"
                return _Stream(kind, name, name)
            local, peer = _unix_names(sock)
        elif sock.family in (socket.AF_INET, socket.AF_INET6):
            local, peer = _address(sock.getsockname()), _address(sock.getpeername())
        else:
            return None
    except OSError:
        return None
    return _Stream(kind, f"{local}>{peer}", f"{peer}>{local}")


def tls_plaintext(stream: _Stream) -> _Stream:
    """The stream of TLS plaintext over ``stream``'s connection: its names, kind ``ssl``,
    offsets from 0 (the TLS session's first byte), as an ``SSLSocket`` counts them."""
    return _Stream("ssl", stream.outgoing, stream.incoming)


class SocketChannel:
    def __init__(self) -> None:
        self.patches = Patches()
        self.datagrams: Any = None
        """Set by the datagram channel: told of ``send``/``recv`` calls on non-streams."""
        self.memory_tls: MemoryTls | None = None
        self.pipes: PipeChannel | None = None
        """The pipe channel (installed at start-up): its descriptor cache and the
        sockets it met through ``os`` calls."""
        """asyncio's TLS in memory, once ``asyncio.sslproto`` is imported."""
        self.streams: dict[int, _Stream | None] = {}
        """By ``id(sock)``; None: a socket that is not a stream we follow. A plain dict
        lookup by id is several times cheaper per message than a WeakKeyDictionary;
        the weak reference kept in ``_watch`` drops the entry while the socket is
        being freed, before CPython can give its id to another object."""
        self._watch: dict[int, ref[socket.socket]] = {}
        self._by_name: dict[str, int] = {}
        """Outgoing channel name → ``id`` of the newest socket object with that stream
        (:meth:`same_connection`)."""
        self._handshaken: dict[int, tuple[str, ref[Any]]] = {}
        """By ``id(sock)``: the outgoing name of every ``SSLSocket`` that began a handshake,
        so that the unseen-traffic detector knows it as TLS before it moves plaintext."""
        self._tls_names: dict[int, tuple[str, str, ref[Any]]] = {}
        """By ``id(ssl_object)``: the channel names :meth:`carry_tls` gave a TLS object
        that has not moved bytes yet."""

    def install(self, session: TracerSession) -> None:
        self.session = session
        for name in STREAM_SENDS:
            self._patch_send(socket.socket, name, "tcp")
        for name in STREAM_RECVS:
            self._patch_recv(socket.socket, name, "tcp")
        from distea.tracer.channels.pipes import PipeChannel

        self.pipes = next((c for c in session.channels if isinstance(c, PipeChannel)), None)
        if self.pipes is not None:
            self.pipes.sockets = self
            self._patch_init(self.pipes.fds)
        IMPORT_HOOKS.when_imported("ssl", self._patch_ssl)
        IMPORT_HOOKS.when_imported("asyncio.sslproto", self._patch_sslproto)

    def _patch_init(self, cache: dict[int, int]) -> None:
        """``socket.socket.__init__``: a new socket's descriptor number leaves the pipe
        channel's descriptor ``cache``, which may still know it as "not a pipe or
        socket": C closed its last holder (a file object, a socket) without
        ``os.close``, and ``os.read``/``os.write`` on the new socket's number would go
        unrecorded at both ends."""
        original = socket.socket.__init__
        session = self.session

        def __init__(sock: Any, *args: Any, **kwargs: Any) -> None:
            original(sock, *args, **kwargs)
            if cache:
                try:
                    cache.pop(sock.fileno(), None)
                except Exception:
                    session.tracer_error()

        for attribute in ("__name__", "__qualname__", "__doc__"):
            setattr(__init__, attribute, getattr(original, attribute))
        __init__.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(socket.socket, "__init__", __init__)

    def _patch_sslproto(self, sslproto: ModuleType) -> None:
        """asyncio's TLS in memory (``tls_memory.py``), loaded only with asyncio."""
        from distea.tracer.channels.tls_memory import MemoryTls

        self.memory_tls = MemoryTls(self)
        self.memory_tls.patch(self.session, sslproto)

    def _patch_ssl(self, ssl: ModuleType) -> None:
        self._patch_send(ssl.SSLSocket, "send", "ssl")
        self._patch_send(ssl.SSLSocket, "write", "ssl")  # not through send: its own call
        self._patch_recv(ssl.SSLSocket, "read", "ssl")
        self._patch_handshake(ssl.SSLSocket)
        self._patch_send(ssl.SSLObject, "write", "ssl", in_memory=True)
        self._patch_recv(ssl.SSLObject, "read", "ssl", in_memory=True)

    def uninstall(self) -> None:
        IMPORT_HOOKS.forget("ssl")
        IMPORT_HOOKS.forget("asyncio.sslproto", self._patch_sslproto)
        if self.memory_tls is not None:
            self.memory_tls.uninstall()
        self.patches.restore()

    def carry_tls(self, tls_object: Any, sock: socket.socket) -> bool:
        """Tie an ``ssl.SSLObject`` to the socket that carries its bytes (tls_memory.py).

        From now on the object's plaintext is recorded under the socket's channel
        names, kind ``ssl``, as an ``SSLSocket`` records it, and the socket's own
        bytes (ciphertext) are only counted. False, and nothing changes, where the
        socket is not a stream this channel follows or the object moved bytes already.
        """
        if id(tls_object) in self.streams:
            return False
        stream = self.streams.get(id(sock), UNKNOWN)
        if stream is UNKNOWN:
            stream = self._new_stream(sock, "tcp")
        if stream is None:
            return False
        stream.carrier = True
        key, names = id(tls_object), self._tls_names

        def forget(_: object) -> None:
            names.pop(key, None)

        names[key] = (stream.outgoing, stream.incoming, ref(tls_object, forget))
        return True

    def recorded_streams(self) -> list[tuple[str, str, int, int]]:
        """(kind, outgoing channel, bytes sent, bytes received) of every followed socket.

        For the unseen-traffic detector; an ``SSLSocket`` says ``ssl`` even where
        its plain layer met it first (its counts are not the kernel's then). A socket
        carrying TLS for an ``SSLObject`` says ``tcp``: its counts are the ciphertext."""
        ssl = sys.modules.get("ssl")
        out = []
        listed: set[int] = set()  # a stream several objects share counts once
        for key, stream in list(self.streams.items()):
            if stream is None or id(stream) in listed:
                continue
            listed.add(id(stream))
            ref = self._watch.get(key)
            sock = ref() if ref is not None else None
            if ssl is not None and isinstance(sock, ssl.SSLObject):
                continue  # plaintext: its carrier's counts are the kernel's
            kind = "ssl" if ssl is not None and isinstance(sock, ssl.SSLSocket) else stream.kind
            out.append((kind, stream.outgoing, stream.sent, stream.received))
        out.extend(("ssl", name, 0, 0) for key, (name, ref) in list(self._handshaken.items())
                   if key not in self.streams and ref() is not None)
        return out

    def sent_on(self, sock: socket.socket, sent: int, t: int,
                taken: tuple[int, int]) -> None:
        """``sent`` bytes that ``sendto`` moved on the stream socket ``sock`` (the datagram
        channel patches it; ``t``, ``taken``: the time and clock taken before the call)."""
        stream = self.streams.get(id(sock), UNKNOWN)
        if stream is UNKNOWN:
            stream = self._new_stream(sock, "tcp")
            if stream is not None:
                stream.timed = True  # this end spoke first: a client
        if stream is None or not sent:
            return
        start = stream.sent
        stream.sent = end = start + sent
        self.session.send(stream.kind, stream.outgoing, start, end,
                          {"t": t} if stream.timed else None, taken)

    def received_on(self, sock: socket.socket, received: int, peek: bool = False) -> None:
        """``received`` bytes that ``recvfrom``/``recvfrom_into`` moved (or showed, ``peek``)
        on the stream socket ``sock`` (the datagram channel patches them; CPython allows
        them on streams)."""
        stream = self.streams.get(id(sock), UNKNOWN)
        if stream is UNKNOWN:
            stream = self._new_stream(sock, "tcp")
        if stream is None or not received:
            return
        if stream.carrier:
            if not peek:
                stream.received += received  # TLS ciphertext, as in recv
            return
        start, end = _taken(stream, received, peek)
        if start < end:
            self.session.recv(stream.kind, stream.incoming, start, end,
                              {"t": monotonic_ns()} if stream.timed else None)

    def recorded_for(self, sock: socket.socket) -> tuple[int, int] | None:
        """(bytes sent, bytes received) recorded on this socket object's connection, if it
        was followed: through the object, or through another object of the same
        connection where this one moved nothing (``socket.fromfd``, ``dup``; closed
        already, maybe: the counts are the connection's all the same)."""
        stream = self.streams.get(id(sock), UNKNOWN)
        if stream is UNKNOWN:
            described = describe(sock, "tcp")
            stream = self.same_connection(described, open_only=False) \
                if described is not None else None
        return (stream.sent, stream.received) if isinstance(stream, _Stream) else None

    def _new_stream(self, sock: Any, kind: str) -> _Stream | None:
        """Describe a socket seen for the first time and keep it until it is freed."""
        stream = self._described(sock, kind)
        self._keep(sock, stream)
        return stream

    def _described_ahead(self, sock: Any, kind: str) -> Any:
        """A socket met for the first time, described (and kept) before its call moves
        bytes; ``UNKNOWN`` where it cannot be described yet (not connected: described
        after the call, as :meth:`_new_stream`).

        After the call may be too late: another thread may close the socket
        meanwhile (a child watcher's thread wakes asyncio's self-pipe while the
        loop closes), and bytes that left would go unrecorded."""
        stream = self._described(sock, kind)
        if stream is None:
            return UNKNOWN
        self._keep(sock, stream)
        return stream

    def _described(self, sock: Any, kind: str) -> _Stream | None:
        """The stream of ``sock``'s connection: where another open socket object of this
        process (a duplicate, one made with ``socket(fileno=...)``) or ``os`` calls
        (``.socket_fds``) already moved bytes on it, theirs, counted on from where they
        are: one connection, one count."""
        stream = describe(sock, kind)
        if stream is not None:
            stream = self.same_connection(stream) or self._moved_by_os(stream) or stream
        return stream

    def same_connection(self, described: _Stream, open_only: bool = True) -> _Stream | None:
        """The stream of another socket object on the connection ``described`` names,
        still open (a closed one's connection may be gone, its names reused) unless
        ``open_only`` is False."""
        key = self._by_name.get(described.outgoing)
        if key is None:
            return None
        ref = self._watch.get(key)
        other = ref() if ref is not None else None
        stream = self.streams.get(key)
        if other is None or stream is None or stream.carrier or stream.kind != described.kind:
            return None
        try:
            still_open = not open_only or other.fileno() != -1
        except Exception:  # a socket being torn down
            return None
        return stream if still_open else None

    def _moved_by_os(self, described: _Stream) -> _Stream | None:
        """The stream ``os`` calls counted the connection on (``.socket_fds``), if any."""
        socket_fds = self.pipes.socket_fds if self.pipes is not None else None
        return socket_fds.share(described) if socket_fds is not None else None

    def _new_tls_stream(self, tls_object: Any, kind: str) -> _Stream | None:
        """An ``SSLObject`` seen for the first time: the names :meth:`carry_tls` gave it,
        or None (not followed) if nothing tied it to a socket."""
        names = self._tls_names.pop(id(tls_object), None)
        stream = _Stream(kind, names[0], names[1]) if names is not None else None
        self._keep(tls_object, stream)
        return stream

    def _keep(self, sock: Any, stream: _Stream | None) -> None:
        """Keep ``stream`` as the entry of ``sock`` until ``sock`` is freed."""
        key = id(sock)
        streams, watch, by_name = self.streams, self._watch, self._by_name
        name = stream.outgoing if stream is not None else None

        def forget(_: object) -> None:
            streams.pop(key, None)
            watch.pop(key, None)
            if name is not None and by_name.get(name) == key:
                del by_name[name]

        watch[key] = ref(sock, forget)
        streams[key] = stream
        if name is not None:
            by_name[name] = key  # the newest: the likeliest still open

    def _patch_handshake(self, cls: type) -> None:
        """``SSLSocket.do_handshake``: note the connection as TLS before OpenSSL moves its
        first (ciphertext) bytes, once per socket: not a message, and the plaintext
        wrappers still meet the socket as new (their first send tells a client)."""
        original = cls.do_handshake  # type: ignore[attr-defined]
        session = self.session
        handshaken = self._handshaken

        def do_handshake(sock: Any, *args: Any, **kwargs: Any) -> Any:
            key = id(sock)
            if key not in handshaken:
                try:
                    stream = describe(sock, "ssl")
                    if stream is not None:
                        handshaken[key] = (stream.outgoing, ref(
                            sock, lambda _: handshaken.pop(key, None)))
                except Exception:
                    session.tracer_error()
            return original(sock, *args, **kwargs)

        do_handshake.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(cls, "do_handshake", do_handshake)

    # The wrappers below run at every send and receive. They keep what they need
    # in closure variables and take no thread-local guard: nested calls only
    # happen through SSLSocket, whose wrappers step aside when the socket is not
    # (yet) encrypted and plain ``socket`` methods do the work (and the counting).
    # ``in_memory``: an ``ssl.SSLObject``, followed only once tied to its carrier.

    def _patch_send(self, cls: type, name: str, kind: str, in_memory: bool = False) -> None:
        original = getattr(cls, name)
        session = self.session
        stamp, record = session.stamp, session.send
        streams_get = self.streams.get
        new_stream = self._new_tls_stream if in_memory else self._new_stream
        describe_ahead = None if in_memory else self._described_ahead
        channel = self
        counted = SENT_BYTES[name]
        plain_sendall = name == "sendall"  # bytes in: the commonest send, counted inline
        ssl_layer = kind == "ssl"

        def send(sock: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
            if ssl_layer and sock._sslobj is None:
                return original(sock, data, *args, **kwargs)
            stream = streams_get(id(sock), UNKNOWN)
            if stream is not UNKNOWN and stream is not None and stream.carrier:
                result = original(sock, data, *args, **kwargs)
                try:  # TLS ciphertext: its plaintext is recorded (counted for the detector)
                    stream.sent += counted(data, result)
                except Exception:
                    session.tracer_error()
                return result
            first = stream is UNKNOWN
            if first and describe_ahead is not None:
                try:
                    stream = describe_ahead(sock, kind)
                except Exception:
                    session.tracer_error()
            # before the bytes leave: a reader's later receive must not look earlier
            t = monotonic_ns() if first or (stream is not None and stream.timed) else 0
            taken = stamp()
            result = original(sock, data, *args, **kwargs)
            try:
                if stream is UNKNOWN:
                    stream = new_stream(sock, kind)
                if first and stream is not None:
                    stream.timed = True  # this end spoke first: a client
                    if name != "sendmsg":
                        stream.resp = broker_protocol(data)
                if stream is not None:
                    sent = (len(data) if plain_sendall and type(data) is bytes
                            else counted(data, result))
                    if sent:
                        start = stream.sent
                        stream.sent = end = start + sent
                        meta = None
                        if stream.timed:
                            meta = {"t": t}
                            if stream.resp is not None:
                                stream.resp.sent(data, sent, meta)
                        record(stream.kind, stream.outgoing, start, end, meta, taken)
                elif not ssl_layer and channel.datagrams is not None:
                    channel.datagrams.sent(sock, name, data, args, result, taken)
            except Exception:
                session.tracer_error()
            return result

        send.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(cls, name, send)

    def _patch_recv(self, cls: type, name: str, kind: str, in_memory: bool = False) -> None:
        original = getattr(cls, name)
        session = self.session
        before_blocking, record = session.before_blocking, session.recv
        streams_get = self.streams.get
        new_stream = self._new_tls_stream if in_memory else self._new_stream
        describe_ahead = None if in_memory else self._described_ahead
        channel = self
        counted = RECEIVED_BYTES[name]
        flags_at = FLAGS_ARG.get(name)
        plain_recv = name == "recv"  # bytes back: the commonest receive, counted inline
        ssl_layer = kind == "ssl"
        may_block = not in_memory  # a memory BIO answers at once

        def recv(sock: Any, *args: Any, **kwargs: Any) -> Any:
            if ssl_layer and sock._sslobj is None:
                return original(sock, *args, **kwargs)
            # The program may block here: our records leave first, unless the data
            # comes within a few milliseconds (request/reply loops then do not pay
            # a flush per round trip). before_blocking guards its own work; what a
            # signal handler raises during the short wait propagates, as it would
            # have from the receive itself.
            if may_block and monotonic() >= session.blocking_check_at:
                before_blocking(_ready_soon, sock, name, args, kwargs)
            stream = streams_get(id(sock), UNKNOWN)
            if stream is UNKNOWN and describe_ahead is not None:  # see _described_ahead
                try:
                    stream = describe_ahead(sock, kind)
                except Exception:
                    session.tracer_error()
            result = original(sock, *args, **kwargs)
            try:
                if stream is UNKNOWN:
                    stream = new_stream(sock, kind)
                peek = flags_at is not None and (len(args) > flags_at or bool(kwargs)) and \
                    peeks(name, args, kwargs)
                if stream is not None:
                    received = len(result) if plain_recv else counted(result)
                    if received and stream.carrier:
                        if not peek:
                            stream.received += received  # TLS ciphertext, as in send
                    elif received:
                        whole = not peek and stream.peeked <= stream.received
                        if whole:  # the common case, inline
                            start = stream.received
                            stream.received = end = start + received
                        else:
                            start, end = _taken(stream, received, peek)
                        if start < end:
                            meta = None
                            if stream.timed:
                                meta = {"t": monotonic_ns()}
                                if stream.resp is not None and whole:
                                    stream.resp.received(
                                        _received_bytes(name, args, kwargs, result, received),
                                        meta)
                            record(stream.kind, stream.incoming, start, end, meta)
                elif not ssl_layer and channel.datagrams is not None:
                    channel.datagrams.received(sock, name, args, result, peek)
            except Exception:
                session.tracer_error()
            return result

        recv.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(cls, name, recv)


WAIT_BEFORE_FLUSH_MS = 5
"""A receive whose data is not there within this long flushes the tracer before it waits."""
FLAGS_ARG = {"recv": 1, "recv_into": 2, "recvmsg": 2, "recvmsg_into": 2, "recvfrom": 1,
             "recvfrom_into": 2}
"""Where each receive method takes its ``flags`` positionally."""


def peeks(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a receive call asked for ``MSG_PEEK``: its bytes stay in the socket."""
    index = FLAGS_ARG.get(name)
    flags = kwargs.get("flags", args[index] if index is not None and len(args) > index else 0)
    try:
        return bool(int(flags) & socket.MSG_PEEK)
    except (TypeError, ValueError):
        return False


def _taken(stream: _Stream, received: int, peek: bool) -> tuple[int, int]:
    """The bytes ``[start, end)`` to record of a receive of ``received`` bytes, moving
    the stream's count on (a ``MSG_PEEK`` receive takes nothing, but moves how far
    peeks have shown). Only bytes no peek showed already are recorded, so that a
    peek and the read that then takes the same bytes never record one byte twice
    (a stream's receives stay one sequence of offsets). A peek is a receive: what
    the process does after it may depend on what it saw (a server sniffing the
    protocol before it reads)."""
    start = stream.received
    end = start + received
    seen = stream.peeked
    if peek:
        stream.peeked = max(seen, end)
    else:
        stream.received = end
    return max(start, seen), end


def _ready_soon(sock: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether this receive returns within ``WAIT_BEFORE_FLUSH_MS`` (waits at most that).

    Non-blocking receives (a 0 timeout, ``MSG_DONTWAIT``) and SSL sockets with
    decrypted data pending never wait. A failing poll answers False: the
    receive itself will report the problem.
    """
    try:
        index = FLAGS_ARG.get(name)
        flags = kwargs.get("flags", args[index] if index is not None and len(args) > index
                           else 0)
        timeout = sock.gettimeout()
        if int(flags) & socket.MSG_DONTWAIT:
            return True
        # never wait longer than the program's own timeout would
        wait_ms = WAIT_BEFORE_FLUSH_MS if timeout is None else min(WAIT_BEFORE_FLUSH_MS,
                                                                   int(timeout * 1000))
        if wait_ms <= 0:
            return True
        ssl = sys.modules.get("ssl")
        if ssl is not None and isinstance(sock, ssl.SSLSocket) and sock.pending():
            return True
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN | select.POLLPRI)
    except (ValueError, OSError, TypeError, AttributeError):
        return False
    try:
        return bool(poller.poll(wait_ms))
    except OSError:
        return False


def _received_bytes(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any,
                    count: int) -> bytes | None:
    """The bytes a receive returned, for the RESP parser (only on Redis connections);
    None where they cannot be read back (the parser then stops: safe rule)."""
    try:
        if name in ("recv", "read") and isinstance(result, bytes | bytearray):
            return bytes(result)
        if name == "recvmsg":
            return bytes(result[0])
        at = 1 if name == "read" else 0  # read(len, buffer), recv_into(buffer, ...)
        buffer = args[at] if len(args) > at else kwargs.get("buffer")
        if name in ("recv_into", "read") and buffer is not None:
            return bytes(memoryview(buffer).cast("B")[:count])
    except (TypeError, ValueError, IndexError):
        pass
    return None


def _received_count(result: Any) -> int:
    """``recv``/``read``: the bytes returned, or (``read`` into a buffer) their count."""
    return len(result) if isinstance(result, bytes | bytearray) else int(result or 0)


SENT_BYTES: dict[str, Callable[[Any, Any], int]] = {
    "send": lambda data, result: int(result),
    "sendmsg": lambda data, result: int(result),
    "sendall": lambda data, result: memoryview(data).nbytes,
    "write": lambda data, result: int(result),
}
"""How many bytes a successful call of each send method moved (from its data and result)."""
RECEIVED_BYTES: dict[str, Callable[[Any], int]] = {
    "recv": _received_count,
    "read": _received_count,
    "recv_into": int,
    "recvmsg": lambda result: len(result[0]),
    "recvmsg_into": lambda result: int(result[0]),
}
"""How many bytes a receive method's result says arrived."""
