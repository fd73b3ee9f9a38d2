"""TLS run in memory (asyncio's SSL), tied to the socket that carries it.

asyncio does TLS in memory: its ``SSLProtocol`` hands the ciphertext its
socket transport reads to an ``ssl.MemoryBIO``, and an ``ssl.SSLObject``
turns it into plaintext (and back). The other end of the connection may be
an ``ssl.SSLSocket``, whose ciphertext OpenSSL reads and writes in C, out of
Python's sight: plaintext is the one level both ends can record, so both
record it. When an ``SSLProtocol`` is given its transport
(``connection_made``, before the handshake: ``create_connection``,
``create_server``, ``start_tls`` alike), its ``SSLObject`` is tied to the
transport's socket (:meth:`SocketChannel.carry_tls`); from then on the
object's ``write``/``read`` record plaintext under the socket's channel
names, kind ``ssl``, and the socket's own bytes are only counted, for the
unseen-traffic detector.

TLS inside TLS (``start_tls`` on a transport that is itself TLS): only the
outer layer, the one on the socket, is tied; its plaintext is the inner
layer's ciphertext, which is what an ``SSLSocket`` peer records (CPython's
``test_asyncio.test_ssl``, ``test_create_server_ssl_over_ssl``, recorded
both layers under one channel, and 6,355 receives could not pair).

An ``SSLObject`` that nothing tied to a socket (a library running TLS in
memory by itself; uvloop, whose asyncio boundary records the plaintext the
protocol sees) records nothing: the bytes of its carrier are recorded as
they are. Where that leaves ciphertext at one end and plaintext at the
other, the analyzer says so and orders the connection safely
(:mod:`distea.analyzer.match_tls`).
"""

from __future__ import annotations

import socket
from types import ModuleType

from distea.tracer.channels.patching import Patches
from distea.tracer.session import TracerSession

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any

    from distea.tracer.channels.sockets import SocketChannel


class MemoryTls:
    """Ties each asyncio ``SSLProtocol``'s ``SSLObject`` to its transport's socket."""

    def __init__(self, sockets: SocketChannel) -> None:
        self.sockets = sockets
        self.patches = Patches()

    def patch(self, session: TracerSession, sslproto: ModuleType) -> None:
        """Patch ``asyncio.sslproto`` (the socket channel calls this once it is imported)."""
        self.session = session
        protocol_cls = sslproto.SSLProtocol
        original = protocol_cls.connection_made
        session, tie = self.session, self.tie
        tls_transport = getattr(sslproto, "_SSLProtocolTransport", ())

        def connection_made(protocol: Any, transport: Any) -> Any:
            try:
                if not isinstance(transport, tls_transport):
                    tie(protocol._sslobj, transport)
            except Exception:
                session.tracer_error()
            return original(protocol, transport)

        connection_made.__wrapped__ = original  # type: ignore[attr-defined]
        self.patches.replace(protocol_cls, "connection_made", connection_made)

    def uninstall(self) -> None:
        self.patches.restore()

    def tie(self, tls_object: Any, transport: Any) -> bool:
        """Record ``tls_object``'s plaintext as the connection of ``transport``'s socket.

        Only a real ``socket.socket`` (asyncio's ``TransportSocket`` wraps one) can
        carry it: the socket channel counts that socket's bytes."""
        wrapped = transport.get_extra_info("socket")
        sock = getattr(wrapped, "_sock", wrapped)
        if tls_object is None or not isinstance(sock, socket.socket):
            return False
        return self.sockets.carry_tls(tls_object, sock)
