"""Byte streams at the asyncio boundary, for event loops that move bytes in C (uvloop).

The standard asyncio loop reads and writes with ``socket.socket`` methods,
which the socket channel patches. uvloop (and any loop written in C) moves
the bytes in libuv, below anything Python can patch, but it still hands
them to Python code and takes them from it:

- ``StreamReaderProtocol.data_received`` (asyncio streams) and
  ``StreamWriter.write``/``writelines``, patched on their classes;
- any other protocol created through ``uvloop.Loop``'s ``create_server``,
  ``create_connection``, ``create_unix_server``, ``create_unix_connection``
  and ``connect_accepted_socket``: its factory is wrapped so that each new
  protocol gets ``data_received`` (or, for a ``BufferedProtocol``,
  ``buffer_updated``) wrapped on the instance, before the transport caches
  the bound method. Bytes such a protocol writes with ``transport.write``
  on a C transport are not seen (the transport's type cannot be patched):
  the unseen-traffic detector (``unseen.py``) reports them;
- a datagram protocol's ``datagram_received`` (``create_datagram_endpoint``),
  recorded as the datagram channel records a ``recvfrom``;
- children started by ``uvloop.Loop.subprocess_exec``/``subprocess_shell``
  (libuv forks, execs and reaps them in C): their spawn and exit.

Bytes are recorded as stream events with the names and offsets the socket
channel would give them (``SRC>DST`` from the transport's socket, kind
``tcp``/``unix``, ``ssl`` for plaintext over TLS), so a uvloop server pairs
with a standard-loop client and the other way round.

Never twice: a transport whose class comes from the ``asyncio`` package
reads and writes through patched ``socket`` methods, so the boundary
records nothing for it (the choice is made once per protocol and cached).
"""

from __future__ import annotations

import contextlib
import os
import weakref
from types import ModuleType

from distea.tracer.channels.importhooks import IMPORT_HOOKS
from distea.tracer.channels.patching import Patches
from distea.tracer.channels.sockets import describe, tls_plaintext
from distea.tracer.config import PARENT_TOKEN_ENV
from distea.tracer.session import HOST, TracerSession

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any

    from distea.tracer.channels.sockets import _Stream

UNKNOWN: Any = object()
"""A protocol not met yet (None in the table: met, and its bytes are seen elsewhere)."""
LOOP_FACTORY_METHODS = ("create_server", "create_connection", "create_unix_server",
                        "create_unix_connection", "connect_accepted_socket",
                        "create_datagram_endpoint")
"""``uvloop.Loop`` methods that take a protocol factory as their first argument."""
SUBPROCESS_METHODS = ("subprocess_exec", "subprocess_shell")
"""``uvloop.Loop`` methods that start a child in C (libuv's ``uv_spawn``)."""


def seen_by_sockets(transport: Any) -> bool:
    """Whether the socket channel already sees this transport's bytes (a stdlib one)."""
    return type(transport).__module__.startswith("asyncio.")


def describe_transport(transport: Any) -> _Stream | None:
    """Channel names for a transport whose bytes only the boundary sees, else None."""
    if transport is None or seen_by_sockets(transport):
        return None
    sock = transport.get_extra_info("socket")
    if sock is None:
        return None
    ssl = transport.get_extra_info("sslcontext") is not None
    return describe(sock, "ssl" if ssl else "tcp")


class AsyncioBoundaryChannel:
    def __init__(self) -> None:
        self.patches = Patches()
        self.flows: dict[int, _Stream | None] = {}
        """By ``id(protocol)``; None: the protocol's bytes are seen by the socket channel
        (or it has no socket). Dropped when the protocol is freed, as in sockets.py."""
        self._watch: dict[int, weakref.ref[Any]] = {}

    def install(self, session: TracerSession) -> None:
        self.session = session
        IMPORT_HOOKS.when_imported("asyncio.streams", self._patch_streams)
        IMPORT_HOOKS.when_imported("uvloop", self._patch_uvloop)

    def uninstall(self) -> None:
        IMPORT_HOOKS.forget("asyncio.streams")
        IMPORT_HOOKS.forget("uvloop")
        self.patches.restore()

    def recorded_streams(self) -> list[tuple[str, str, int, int]]:
        """(kind, outgoing channel, bytes sent, bytes received) of every live flow."""
        return [(f.kind, f.outgoing, f.sent, f.received) for f in self.flows.values()
                if f is not None]

    def _flow(self, protocol: Any, transport: Any) -> _Stream | None:
        """The flow of a protocol met for the first time, kept until it is freed."""
        key = id(protocol)
        flow = describe_transport(transport)
        flows, watch = self.flows, self._watch

        def forget(_: object) -> None:
            flows.pop(key, None)
            watch.pop(key, None)

        with contextlib.suppress(TypeError):  # no weak references (__slots__): kept
            watch[key] = weakref.ref(protocol, forget)
        flows[key] = flow
        return flow

    # -- asyncio streams ---------------------------------------------------------

    def _patch_streams(self, streams: ModuleType) -> None:
        session = self.session
        flows_get = self.flows.get
        new_flow = self._flow
        stamp, record_send, record_recv = session.stamp, session.send, session.recv
        protocol_cls, writer_cls = streams.StreamReaderProtocol, streams.StreamWriter
        data_received = protocol_cls.data_received
        write, writelines = writer_cls.write, writer_cls.writelines

        def received(protocol: Any, data: Any) -> None:
            # recorded first: what the protocol does with the bytes comes after them
            try:
                flow = flows_get(id(protocol), UNKNOWN)
                if flow is UNKNOWN:
                    flow = new_flow(protocol, protocol._transport)
                if flow is not None and data:
                    start = flow.received
                    flow.received = end = start + memoryview(data).nbytes
                    record_recv(flow.kind, flow.incoming, start, end, None)
            except Exception:
                session.tracer_error()
            data_received(protocol, data)

        def flow_of(writer: Any) -> _Stream | None:
            """The writer's flow, if the boundary records it and it is not closing."""
            try:
                flow = flows_get(id(writer._protocol), UNKNOWN)
                if flow is UNKNOWN:
                    flow = new_flow(writer._protocol, writer._transport)
                if flow is not None and not writer._transport.is_closing():
                    return flow
            except Exception:
                session.tracer_error()
            return None

        def sent(flow: _Stream, data: Any, taken: tuple[int, int]) -> None:
            try:
                count = sum(memoryview(d).nbytes for d in data)
                if count:
                    start = flow.sent
                    flow.sent = end = start + count
                    record_send(flow.kind, flow.outgoing, start, end, None, taken)
            except Exception:
                session.tracer_error()

        def stream_write(writer: Any, data: Any) -> None:
            flow = flow_of(writer)
            if flow is None:  # a stdlib transport: the socket channel sees the bytes
                return write(writer, data)
            taken = stamp()  # before the bytes leave: a reply may come back at once
            write(writer, data)
            sent(flow, (data,), taken)

        def stream_writelines(writer: Any, data: Any) -> None:
            flow = flow_of(writer)
            if flow is None:
                return writelines(writer, data)
            if not isinstance(data, list | tuple):
                data = list(data)  # the transport would iterate it once too
            taken = stamp()
            writelines(writer, data)
            sent(flow, data, taken)

        replacements: tuple[tuple[type, str, Any, Any], ...] = (
            (protocol_cls, "data_received", received, data_received),
            (writer_cls, "write", stream_write, write),
            (writer_cls, "writelines", stream_writelines, writelines))
        for owner, name, replacement, original in replacements:
            replacement.__wrapped__ = original
            self.patches.replace(owner, name, replacement)
        self._stream_protocol = protocol_cls

    # -- protocols of a C event loop --------------------------------------------

    def _patch_uvloop(self, uvloop: ModuleType) -> None:
        loop_cls = getattr(uvloop, "Loop", None)
        if loop_cls is None:
            return
        for name in LOOP_FACTORY_METHODS:
            if hasattr(loop_cls, name):
                self._patch_factory_method(loop_cls, name)
        for name in SUBPROCESS_METHODS:
            if hasattr(loop_cls, name):
                self._patch_subprocess_method(loop_cls, name)
        if hasattr(loop_cls, "start_tls"):
            self._patch_start_tls(loop_cls)

    def _patch_start_tls(self, cls: type) -> None:
        """``start_tls``: the protocol's bytes from now on are TLS plaintext, counted from 0.

        That is what the other end records: an ``SSLSocket`` made from the plain
        socket, or asyncio's TLS (tls_memory.py), start a new ``ssl`` stream of the
        same names at the upgrade; the plain bytes before it stay ``tcp``/``unix``."""
        original = cls.start_tls  # type: ignore[attr-defined]
        session, upgrade = self.session, self._upgrade_to_tls

        async def start_tls(loop: Any, transport: Any, protocol: Any, *args: Any,
                            **kwargs: Any) -> Any:
            try:
                upgrade(protocol, transport)
            except Exception:
                session.tracer_error()
            return await original(loop, transport, protocol, *args, **kwargs)

        start_tls.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(cls, "start_tls", start_tls)

    def _upgrade_to_tls(self, protocol: Any, transport: Any) -> None:
        flow = self.flows.get(id(protocol), UNKNOWN)
        if flow is UNKNOWN:
            flow = self._flow(protocol, transport)
        if flow is not None:
            self.flows[id(protocol)] = tls_plaintext(flow)

    def _patch_factory_method(self, cls: type, name: str) -> None:
        original = getattr(cls, name)
        wrap = self._wrap_factory

        def method(loop: Any, protocol_factory: Any, *args: Any, **kwargs: Any) -> Any:
            return original(loop, wrap(protocol_factory), *args, **kwargs)

        method.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(cls, name, method)

    def _wrap_factory(self, factory: Any) -> Any:
        """A factory making the same protocols, each with its receiving method wrapped."""
        channel = self

        def make_protocol() -> Any:
            protocol = factory()
            try:
                channel._watch_protocol(protocol)
            except Exception:
                channel.session.tracer_error()
            return protocol

        return make_protocol

    def _watch_protocol(self, protocol: Any) -> None:
        """Wrap ``connection_made`` and the receiving method on this one instance.

        asyncio streams' protocol is patched on its class already. The wrappers
        are instance attributes: the transport looks them up when it is
        created, after the factory returned.
        """
        streams_protocol = getattr(self, "_stream_protocol", None)
        if streams_protocol is not None and isinstance(protocol, streams_protocol):
            return
        mine = getattr(protocol, "__dict__", None)
        if mine is None or "connection_made" in mine:
            # no instance attributes (__slots__): its bytes are left to the detector;
            # already watched (a factory handing out one protocol twice): not twice
            return
        if hasattr(protocol, "datagram_received") and not hasattr(protocol, "data_received"):
            self._watch_datagrams(protocol)
            return
        session = self.session
        record_recv = session.recv
        flows = self.flows
        new_flow = self._flow
        connection_made = protocol.connection_made
        buffered = hasattr(protocol, "buffer_updated") and hasattr(protocol, "get_buffer")

        def made(transport: Any) -> None:
            try:
                new_flow(protocol_ref(), transport)
            except Exception:
                session.tracer_error()
            connection_made(transport)

        def count(data: Any) -> None:
            try:
                nbytes = data if type(data) is int else memoryview(data).nbytes
                flow = flows.get(id(protocol_ref()))
                if flow is not None and nbytes:
                    start = flow.received
                    flow.received = end = start + nbytes
                    record_recv(flow.kind, flow.incoming, start, end, None)
            except Exception:
                session.tracer_error()

        if buffered:
            buffer_updated = protocol.buffer_updated

            def updated(nbytes: int) -> None:
                count(nbytes)  # first: what the protocol does with the bytes comes after
                buffer_updated(nbytes)

            receive: Any = updated
            name = "buffer_updated"
        else:
            data_received = protocol.data_received

            def received(data: Any) -> None:
                count(data)
                data_received(data)

            receive, name = received, "data_received"
        # a weak reference: the wrappers live on the protocol and must not keep it alive
        try:
            protocol_ref: Any = weakref.ref(protocol)
        except TypeError:  # __slots__ with __dict__ but no __weakref__: a cycle, collected
            protocol_ref = lambda: protocol  # noqa: E731
        protocol.connection_made = made
        setattr(protocol, name, receive)

    def _watch_datagrams(self, protocol: Any) -> None:
        """A datagram protocol: each datagram it is handed is recorded as the datagram
        channel records a ``recvfrom`` on the same socket (channel, index, fingerprint).

        Datagrams it sends with ``transport.sendto`` on a C transport are not seen,
        and no kernel counter tells of them (docs/channels.md)."""
        session = self.session
        channels = [getattr(c, "channel", None) or c for c in session.channels]  # DeferredChannel
        datagrams = next((c for c in channels if hasattr(c, "_record_recv")), None)
        if datagrams is None:
            return
        connection_made = protocol.connection_made
        datagram_received = protocol.datagram_received
        transports: list[Any] = []

        def made(transport: Any) -> None:
            try:
                if not seen_by_sockets(transport):
                    transports.append(transport.get_extra_info("socket"))
            except Exception:
                session.tracer_error()
            connection_made(transport)

        def received(data: Any, addr: Any) -> None:
            if transports:
                try:
                    datagrams._record_recv(transports[0], data, addr)
                except Exception:
                    session.tracer_error()
            datagram_received(data, addr)

        protocol.connection_made = made
        protocol.datagram_received = received

    # -- subprocesses of a C event loop -----------------------------------------

    def _patch_subprocess_method(self, cls: type, name: str) -> None:
        """A child that libuv starts: the spawn and the exit, as the process channel
        records them for ``subprocess`` (its fork and wait happen in C here).

        The spawn token goes into the child's environment, taken when the call
        starts running (just before libuv spawns); the exit is received when the
        loop tells the protocol (``process_exited``), with the pid the transport
        gave at ``connection_made``.
        """
        original = getattr(cls, name)
        session = self.session
        watch = self._watch_subprocess
        shell = name == "subprocess_shell"

        async def method(loop: Any, protocol_factory: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                if not session.finished:
                    argv = ["/bin/sh", "-c", os.fsdecode(args[0])] if shell else \
                        [os.fsdecode(a) for a in args]
                    token = session.spawn_token({"argv": argv[:8]})
                    env = kwargs.get("env")
                    kwargs["env"] = {**(os.environ if env is None else env),
                                     PARENT_TOKEN_ENV: token}
                    protocol_factory = watch(protocol_factory)
            except Exception:
                session.tracer_error()
            return await original(loop, protocol_factory, *args, **kwargs)

        method.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(cls, name, method)

    def _watch_subprocess(self, factory: Any) -> Any:
        session = self.session

        def make_protocol() -> Any:
            protocol = factory()
            try:
                connection_made = protocol.connection_made
                process_exited = protocol.process_exited
                pids: list[int] = []

                def made(transport: Any) -> None:
                    session.guarded(lambda: pids.append(transport.get_pid()))
                    connection_made(transport)

                def exited() -> None:
                    if pids:
                        session.guarded(lambda: session.recv(
                            "exit", f"{HOST}:{pids[0]}", 0, 1,
                            {"call": "process_exited"}))
                    process_exited()

                protocol.connection_made = made
                protocol.process_exited = exited
            except Exception:
                session.tracer_error()
            return protocol

        return make_protocol
