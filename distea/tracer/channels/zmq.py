"""ZeroMQ (pyzmq): every socket pattern, sync and zmq.asyncio, message level.

libzmq does its I/O in its own C threads, so nothing is visible at the OS
socket level; messages are recorded where Python hands them to libzmq and
takes them back. Every pyzmq send and receive funnels into
``Socket.send``/``Socket.recv`` (``send_multipart``, ``send_string``,
``send_pyobj``, ``send_json``, ``send_serialized`` and their twins call
them frame by frame), so only those two (and ``recv_into``) are patched:
nothing is counted twice. ``zmq.asyncio`` sockets do their real sends and
receives on a plain "shadow" socket of the same libzmq socket, once the
event loop finds it ready: the message is recorded then, on completion.

One multipart message is one message: recorded at its last frame (no
SNDMORE / no RCVMORE after it). Its fingerprint (``meta["fp"]``, length and
CRC-32) is that of the *last* frame, the only frame both ends surely see
alike: ROUTER adds and strips identity frames, REQ/REP add and strip empty
delimiters, and those never come last.

Channel: the socket's endpoint, normalised so both ends write the same
string: ``bind`` endpoints are read back from ``LAST_ENDPOINT`` (port 0 and
``*`` resolved); the wildcard, ``localhost``, loopback and this host's
address are one name (see :func:`~distea.tracer.channels.datagrams.
canonical_host`); ``ipc://`` paths are absolute; ``inproc://`` names get the
process id. A direction suffix tells the two ways apart:
``"ENDPOINT bind>connect"`` for messages from the bound socket to the
connected ones, ``"ENDPOINT connect>bind"`` the other way. A socket with
several endpoints is named by its first bind, else its first connect (which
peer a message came from is not observable). PUB/XPUB/RADIO sends carry
``meta["fanout"] = True``. ROUTER sends and receives carry ``meta["peer"]``,
the routing id (first frame, hex): a reply sent to peer X goes to the
process whose request the ROUTER received from X, which lets an analyzer
tell apart replies that share a fingerprint.

Fan-out and fan-in (several PULLs behind one PUSH, several REQs before one
ROUTER) are paired with what else both ends can see
(:mod:`distea.analyzer.match_zmq`): ``meta["t"]`` is a ``time.monotonic_ns()``
reading, taken just before a send hands its last frame over and just after a
receive got its last frame (a message cannot be received before it was sent,
and on one host that clock is one for every process); ``meta["sock"]`` numbers
a second, third... socket of this process with the same channel name (the
first has none), so each socket's messages stay one FIFO stream; and
``meta["multi"]`` marks a socket with more than one endpoint, whose messages
may go to peers the channel name does not tell. Three more facts tie
look-alikes to their peer: a DEALER's messages carry ``meta["env"]``, the
hex of their routing frames up to the empty delimiter (what a REP strips
and puts back on its reply; none without a delimiter); a REP socket's carry
``meta["rep"]`` (it answers strictly in turn); and a SUB's receives carry
``meta["since"]``, a ``monotonic_ns()`` reading taken before its first bind
or connect: a PUB's send, which also carries ``meta["t_end"]``, read after
it returned, reaches only subscriptions it knew by then, so nothing whose
send had ended before that can reach the SUB.

A send's clock is taken before the frame is handed over and its record
written after success (``session.stamp()``, then ``session.send(...,
stamp=)``): threads of one process talking over ``inproc://`` keep each
send before its receive.

Never traced: the tracer's own emitter socket, and monitor sockets
(``get_monitor_socket``: libzmq writes their events itself).
"""

from __future__ import annotations

import os
from time import monotonic, monotonic_ns
from typing import Any
from zlib import crc32

import zmq

from distea.tracer.channels.datagrams import canonical_host
from distea.tracer.channels.patching import Patches
from distea.tracer.channels.sockets import WAIT_BEFORE_FLUSH_MS
from distea.tracer.session import TracerSession

KIND = "zmq"
FANOUT_TYPES = frozenset(t for t in (getattr(zmq, "PUB", None), getattr(zmq, "XPUB", None),
                                      getattr(zmq, "RADIO", None)) if t is not None)
# Plain ints: ``flags & zmq.SNDMORE`` goes through enum.Flag.__and__, ~2 µs a message.
SNDMORE = int(zmq.SNDMORE)
NOBLOCK = int(zmq.NOBLOCK)
RCVMORE = int(zmq.RCVMORE)
RCVTIMEO = int(zmq.RCVTIMEO)
POLLIN = int(zmq.POLLIN)
ROUTER = zmq.ROUTER
DEALER = zmq.DEALER
REP = zmq.REP
SUB = zmq.SUB
MAX_ENVELOPE_FRAMES = 8
"""Routing frames kept per message: a longer envelope is not recorded."""


def normalise_endpoint(addr: str) -> str:
    """One spelling of an endpoint for both of its ends."""
    transport, sep, rest = addr.partition("://")
    if not sep:
        return addr
    if transport in ("tcp", "ws", "wss", "udp"):
        if ";" in rest:  # "tcp://source;destination"
            rest = rest.split(";", 1)[1]
        host, colon, port = rest.rpartition(":")
        if not colon:
            return addr
        suffix = ""
        if "/" in port:  # ws://host:port/path
            port, slash, path = port.partition("/")
            suffix = slash + path
        host = canonical_host(host)
        host = f"[{host}]" if ":" in host else host
        return f"{transport}://{host}:{port}{suffix}"
    if transport == "ipc":
        if rest.startswith("@"):
            return addr
        return f"ipc://{os.path.abspath(rest)}"
    if transport == "inproc":
        return f"{addr}@{os.getpid()}"
    return addr


def _ready_soon(sock: Any) -> bool:
    """Whether a message arrives within ``WAIT_BEFORE_FLUSH_MS`` (waits at most that,
    and never longer than the socket's own ``RCVTIMEO``). A failing poll answers
    False: the receive itself will report the problem."""
    try:
        timeout = int(sock.get(RCVTIMEO))
        wait_ms = WAIT_BEFORE_FLUSH_MS if timeout < 0 else min(WAIT_BEFORE_FLUSH_MS, timeout)
        if wait_ms <= 0:
            return True
        return bool(zmq.zmq_poll([(sock, POLLIN)], wait_ms))
    except zmq.ZMQError:
        return False


def frame_fingerprint(frame: Any) -> int:
    """Length and CRC-32 of a frame, in one int. The send and receive wrappers
    compute a ``bytes`` frame's inline, the same way (one call less per message)."""
    if type(frame) is bytes:
        view: Any = frame
    elif isinstance(frame, zmq.Frame):
        view = frame.buffer
    else:
        view = memoryview(frame).cast("B")
    return (len(view) << 32) | crc32(view)


def _next_received(state: _SocketState, fingerprint: int) -> tuple[str, int, int,
                                                                  dict[str, Any]]:
    """``session.recv``'s arguments after ``KIND`` for a whole message received
    on a socket with channels (its last frame's ``fingerprint``)."""
    meta: dict[str, Any] = {"fp": fingerprint, "t": monotonic_ns()}
    if state.extra:
        meta.update(state.extra)
    if state.router:
        meta["peer"], state.recv_peer = state.recv_peer, None
    elif state.recv_envelope is not None:
        envelope = state.recv_envelope.take()
        if envelope is not None:
            meta["env"] = envelope
    index = state.received
    state.received = index + 1
    return state.channels[1], index, index + 1, meta  # type: ignore[index]


class _Envelope:
    """The routing frames of the message a DEALER is sending or receiving, up to the
    first empty frame (the delimiter a REP strips and puts back on its reply)."""

    COLLECTING, DELIMITED, TOO_LONG = 0, 1, 2
    __slots__ = ("frames", "state")

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        """Each routing frame so far (its first 64 bytes)."""
        self.state = self.COLLECTING

    def add(self, frame: Any) -> None:
        """One more frame, not the message's last."""
        if self.state:
            return
        data = frame[:64] if type(frame) is bytes else _frame_bytes(frame)
        if not data:
            self.state = self.DELIMITED
        elif len(self.frames) < MAX_ENVELOPE_FRAMES:
            self.frames.append(data)
        else:
            self.state = self.TOO_LONG

    def take(self) -> str | None:
        """The envelope (its frames' hex joined by "."), None without a delimiter;
        then ready for the next message."""
        envelope = (".".join([f.hex() for f in self.frames])
                    if self.state == self.DELIMITED else None)
        self.frames, self.state = [], self.COLLECTING
        return envelope


def _frame_bytes(frame: Any) -> bytes:
    """A frame's first 64 bytes."""
    data = frame.bytes if isinstance(frame, zmq.Frame) else bytes(memoryview(frame))
    return data[:64]


def _peer_id(frame: Any) -> str:
    """A ROUTER's routing id (its message's first frame), as hex."""
    return _frame_bytes(frame).hex()


class _SocketState:
    """What one libzmq socket has bound and connected, and its message counts."""

    __slots__ = ("bound", "channels", "connected", "extra", "fanout", "received",
                 "recv_envelope", "recv_peer", "rep", "router", "send_envelope", "send_peer",
                 "sent", "serial", "since")

    def __init__(self, socket_type: int) -> None:
        self.bound: list[str] = []
        self.connected: list[str] = []
        self.fanout = socket_type in FANOUT_TYPES
        self.router = socket_type == ROUTER
        self.send_peer: str | None = None
        """ROUTER: routing id (first frame) of the message being sent, once seen."""
        self.recv_peer: str | None = None
        dealer = socket_type == DEALER
        self.send_envelope = _Envelope() if dealer else None
        """DEALER: the routing frames of the message being sent (``meta["env"]``)."""
        self.recv_envelope = _Envelope() if dealer else None
        self.rep = socket_type == REP
        self.since: int | None = 0 if socket_type == SUB else None
        """SUB: ``monotonic_ns()`` before its first bind or connect (0 until then)."""
        self.sent = 0
        self.received = 0
        self.channels: tuple[str, str] | None = None
        """(send channel, receive channel); None before any bind/connect."""
        self.serial = 0
        """This socket's number among the process's sockets with its channel names."""
        self.extra: dict[str, Any] = {}
        """``meta`` items every message of this socket carries (``sock``, ``multi``)."""

    def add(self, endpoint: str, binding: bool, serials: dict[str, int], before: int) -> None:
        """One more endpoint, asked for at ``before`` (``monotonic_ns()``); ``serials``
        counts this process's sockets per name."""
        (self.bound if binding else self.connected).append(endpoint)
        if self.since == 0:
            self.since = before
        if self.bound:
            channels = (f"{self.bound[0]} bind>connect", f"{self.bound[0]} connect>bind")
        else:
            channels = (f"{self.connected[0]} connect>bind", f"{self.connected[0]} bind>connect")
        if channels != self.channels:
            self.channels = channels
            self.serial = serials.get(channels[0], 0)
            serials[channels[0]] = self.serial + 1
        self.extra = {}
        if self.serial:
            self.extra["sock"] = self.serial
        if len(self.bound) + len(self.connected) > 1:
            self.extra["multi"] = True
        if self.rep:
            self.extra["rep"] = True
        if self.since:
            self.extra["since"] = self.since


class ZmqChannel:
    def __init__(self) -> None:
        self.patches = Patches()
        self.states: dict[int, _SocketState] = {}
        """libzmq socket address (``Socket.underlying``) → state; shadows share it."""
        self.ignored: set[int] = set()
        self.serials: dict[str, int] = {}
        """Send channel name → how many sockets of this process took it (``meta["sock"]``)."""
        self.session: TracerSession | None = None

    def install(self, session: TracerSession) -> None:
        self.session = session
        cls = zmq.Socket
        self._patch_endpoint(cls, "bind")
        self._patch_endpoint(cls, "connect")
        self._patch_close(cls)
        self._patch_monitor(cls)
        self._patch_send(cls)
        self._patch_recv(cls)
        if hasattr(cls, "recv_into"):
            self._patch_recv_into(cls)

    def uninstall(self) -> None:
        self.patches.restore()

    def covered_ports(self) -> set[int]:
        """TCP ports of this process's ZeroMQ endpoints: libzmq moves their bytes in C,
        and this channel records their messages, so the unseen-traffic detector
        leaves those connections alone."""
        ports: set[int] = set()
        for state in list(self.states.values()):
            for endpoint in state.bound + state.connected:
                tail = endpoint.rsplit(":", 1)[-1]
                if endpoint.startswith("tcp://") and tail.isdigit():
                    ports.add(int(tail))
        return ports

    def _error(self) -> None:
        if self.session is not None:
            self.session.tracer_error()

    # -- endpoints ----------------------------------------------------------------

    def _patch_endpoint(self, cls: type, name: str) -> None:
        original = getattr(cls, name)
        channel = self
        binding = name == "bind"

        def endpoint(sock: Any, addr: Any, *args: Any, **kwargs: Any) -> Any:
            before = monotonic_ns()
            result = original(sock, addr, *args, **kwargs)
            try:
                session = channel.session
                text = addr.decode() if isinstance(addr, bytes) else str(addr)
                emitter = session.emitter if session is not None else None
                # the emitter's own socket (when it uses pyzmq) is known by its endpoint
                if emitter is not None and text != emitter.endpoint:
                    if binding:
                        last = sock.get(zmq.LAST_ENDPOINT)
                        if last:
                            text = last.decode() if isinstance(last, bytes) else str(last)
                    address = sock.underlying
                    if address not in channel.ignored:
                        state = channel.states.get(address)
                        if state is None:
                            state = channel.states[address] = _SocketState(sock.get(zmq.TYPE))
                        state.add(normalise_endpoint(text), binding, channel.serials, before)
            except Exception:
                channel._error()
            return result

        endpoint.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(cls, name, endpoint)

    def _patch_close(self, cls: type) -> None:
        original = cls.close  # type: ignore[attr-defined]
        channel = self

        def close(sock: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                if not sock.closed:
                    address = sock.underlying
                    # A shadow closing does not end the socket it shadows.
                    if not getattr(sock, "_shadow", False):
                        channel.states.pop(address, None)
                        channel.ignored.discard(address)
            except Exception:
                channel._error()
            return original(sock, *args, **kwargs)

        close.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(cls, "close", close)

    def _patch_monitor(self, cls: type) -> None:
        original = getattr(cls, "get_monitor_socket", None)
        if original is None:
            return
        channel = self

        def get_monitor_socket(sock: Any, *args: Any, **kwargs: Any) -> Any:
            monitor = original(sock, *args, **kwargs)
            try:
                # it connected (through our wrapper) before we could tell it apart
                channel.states.pop(monitor.underlying, None)
                channel.ignored.add(monitor.underlying)
            except Exception:
                channel._error()
            return monitor

        get_monitor_socket.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(cls, "get_monitor_socket", get_monitor_socket)

    # -- messages -----------------------------------------------------------------

    # The message wrappers below run at every frame. A socket is traced when it is
    # in ``states`` (made by our bind/connect wrappers, which skip the emitter's
    # socket and monitor sockets), so one dict lookup by libzmq address decides.

    def _patch_send(self, cls: type) -> None:
        original = cls.send  # type: ignore[attr-defined]
        channel = self
        states_get = self.states.get

        def send(sock: Any, data: Any, flags: int = 0, *args: Any, **kwargs: Any) -> Any:
            session = channel.session
            if flags & SNDMORE:
                result = original(sock, data, flags, *args, **kwargs)
                try:
                    state = states_get(sock.underlying)
                    if state is not None:
                        if state.router:
                            if state.send_peer is None:
                                state.send_peer = _peer_id(data)
                        elif state.send_envelope is not None:
                            state.send_envelope.add(data)
                except Exception:
                    channel._error()
                return result
            state = taken = None
            try:
                state = states_get(sock.underlying)
                if state is not None and session is not None:
                    taken = session.stamp()
            except Exception:
                channel._error()
            t = monotonic_ns()
            result = original(sock, data, flags, *args, **kwargs)
            if taken is not None and session is not None:
                try:
                    channels = state.channels  # type: ignore[union-attr]
                    if channels is not None:
                        meta: dict[str, Any] = {"fp": (len(data) << 32) | crc32(data)
                                                if type(data) is bytes
                                                else frame_fingerprint(data), "t": t}
                        if state.extra:  # type: ignore[union-attr]
                            meta.update(state.extra)  # type: ignore[union-attr]
                        if state.fanout:  # type: ignore[union-attr]
                            meta["fanout"] = True
                            # by now it went to every subscription the publisher knew
                            meta["t_end"] = monotonic_ns()
                        if state.router:  # type: ignore[union-attr]
                            meta["peer"], state.send_peer = state.send_peer, None  # type: ignore[union-attr]
                        elif state.send_envelope is not None:  # type: ignore[union-attr]
                            envelope = state.send_envelope.take()  # type: ignore[union-attr]
                            if envelope is not None:
                                meta["env"] = envelope
                        index = state.sent  # type: ignore[union-attr]
                        state.sent = index + 1  # type: ignore[union-attr]
                        session.send(KIND, channels[0], index, index + 1, meta, taken)
                except Exception:
                    channel._error()
            return result

        send.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(cls, "send", send)

    def _patch_recv(self, cls: type) -> None:
        original = cls.recv  # type: ignore[attr-defined]
        channel = self
        states_get = self.states.get
        get_option = cls.get  # type: ignore[attr-defined]

        def recv(sock: Any, flags: int = 0, *args: Any, **kwargs: Any) -> Any:
            session = channel.session
            if (session is not None and not flags & NOBLOCK
                    and monotonic() >= session.blocking_check_at):
                channel._before_blocking(session, sock)
            frame = original(sock, flags, *args, **kwargs)
            try:
                state = states_get(sock.underlying)
                if state is not None and session is not None:
                    copied = type(frame) is bytes
                    if get_option(sock, RCVMORE) if copied else frame.more:
                        if state.router:
                            if state.recv_peer is None:
                                state.recv_peer = _peer_id(frame)
                        elif state.recv_envelope is not None:
                            state.recv_envelope.add(frame)
                    elif state.channels is not None:
                        fingerprint = ((len(frame) << 32) | crc32(frame) if copied
                                       else frame_fingerprint(frame))
                        # recorded here, not in a helper: the recorder finds the
                        # program's frame right above this one
                        session.recv(KIND, *_next_received(state, fingerprint))
            except Exception:
                channel._error()
            return frame

        recv.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(cls, "recv", recv)

    def _patch_recv_into(self, cls: type) -> None:
        original = cls.recv_into  # type: ignore[attr-defined]
        channel = self
        states_get = self.states.get

        def recv_into(sock: Any, buffer: Any, *args: Any, **kwargs: Any) -> Any:
            session = channel.session
            flags = args[1] if len(args) > 1 else kwargs.get("flags", 0)
            if (session is not None and not flags & NOBLOCK
                    and monotonic() >= session.blocking_check_at):
                channel._before_blocking(session, sock)
            nbytes = original(sock, buffer, *args, **kwargs)
            try:
                state = states_get(sock.underlying)
                if (state is not None and session is not None and state.channels is not None
                        and not sock.get(RCVMORE)):
                    view = memoryview(buffer).cast("B")
                    fingerprint = frame_fingerprint(view[:min(nbytes, len(view))])
                    session.recv(KIND, *_next_received(state, fingerprint))
            except Exception:
                channel._error()
            return nbytes

        recv_into.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(cls, "recv_into", recv_into)

    def _before_blocking(self, session: TracerSession, sock: Any) -> None:
        """A receive that may wait: let the records gathered so far leave first,
        unless a message comes within ``WAIT_BEFORE_FLUSH_MS`` (see ``_ready_soon``)."""
        try:
            traced = sock.underlying in self.states
        except Exception:
            self._error()
            return
        if traced:
            session.before_blocking(_ready_soon, sock)
