"""ZeroMQ PULL → run directory, for runs whose processes are on several hosts.

``distea collect --listen tcp://HOST:PORT`` serves tracers on other hosts
over ZeroMQ with CURVE keys (a local ``distea run`` uses the plain-Python
:mod:`distea.localcollector` instead: no pyzmq, no libzmq threads). Storage
is :class:`distea.runwriter.RunWriter`'s. The collector runs as a thread of
``distea collect`` (or of a test); it is never inside a traced process.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import zmq

from distea.runwriter import ProcessStream, RunWriter, alive

if TYPE_CHECKING:
    from zmq.auth.thread import ThreadAuthenticator

__all__ = ["Collector", "CurveKeys", "ProcessStream"]

POLL_MS = 10
"""How often the receiving thread looks up from an idle socket (close() and drain() wake it
at once where they can)."""
SETTLE_S = 0.03
"""Silence after which a drained socket is taken as empty: batches already sent
over ipc or loopback arrive within milliseconds. Local runs rarely wait for it:
see :meth:`Collector.drain`."""
SYNC_MAGIC = b"distea-sync"
"""First frame of the collector's own wake-up/sync message (never stored)."""
SYNC_TIMEOUT_S = 1.0
"""How long drain() waits for its sync message before relying on the settle alone."""
CONNECTION_EVENTS = zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED
RECEIVE_HIGH_WATER_MARK = 1024
"""Batches ZeroMQ may queue per connected tracer before it pushes back (and they drop)."""
HANDSHAKE_FAILURES = (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                      | zmq.EVENT_HANDSHAKE_FAILED_AUTH)


@dataclass(frozen=True)
class CurveKeys:
    """One run's CURVE keys (z85 bytes): the collector's pair and the one client's pair."""

    server_public: bytes
    server_secret: bytes
    client_public: bytes
    client_secret: bytes

    @classmethod
    def generate(cls) -> CurveKeys:
        server_public, server_secret = zmq.curve_keypair()
        client_public, client_secret = zmq.curve_keypair()
        return cls(server_public, server_secret, client_public, client_secret)


def _run_authenticator(context: zmq.Context[Any], client_key: bytes,
                       on_refusal: Any) -> ThreadAuthenticator:
    """ZAP handler: only the run's client key may write; every refusal is remembered.

    Made only for CURVE runs (``distea collect``): its module brings asyncio,
    which a local ``distea run`` need not import.
    """
    import logging

    from zmq.auth.thread import ThreadAuthenticator

    class RunAuthenticator(ThreadAuthenticator):
        def __init__(self) -> None:
            super().__init__(context, log=logging.getLogger("distea.collector.zap"))
            self._address = ""

        async def handle_zap_message(self, msg: list[bytes]) -> None:
            if len(msg) >= 6:
                self._address = msg[3].decode("utf-8", "replace")
            await super().handle_zap_message(msg)

        def _send_zap_reply(self, request_id: bytes, status_code: bytes, status_text: bytes,
                            user_id: str = "anonymous") -> None:
            if status_code != b"200":
                on_refusal(self._address, status_text.decode("utf-8", "replace"))
            super()._send_zap_reply(request_id, status_code, status_text, user_id)

        def allows(self, domain: str, key: bytes) -> bool:
            return key == client_key

        callback = allows

    return RunAuthenticator()


class Collector(RunWriter):
    """Receives every tracer's batches for one run directory over ZeroMQ.

    With ``keys`` the socket is a CURVE server and a ZAP handler admits only
    ``keys.client_public``; anyone else is refused and counted.
    """

    def __init__(self, run_dir: Path, endpoint: str, keys: CurveKeys | None = None,
                 listener_fd: int | None = None) -> None:
        """``listener_fd``: a socket already bound to ``endpoint`` and listening
        (``distea.launcher.listen``), which ZeroMQ takes over (``ZMQ_USE_FD``)."""
        super().__init__(run_dir)
        self.endpoint = endpoint
        self._context: zmq.Context[Any] = zmq.Context()
        self._auth: ThreadAuthenticator | None = None
        self._monitor: zmq.Socket[Any] | None = None
        self._waker: zmq.Socket[Any] | None = None
        """drain()'s and close()'s PUSH to our own endpoint (local runs)."""
        self._socket = self._context.socket(zmq.PULL)
        try:
            self._socket.setsockopt(zmq.LINGER, 0)
            self._socket.setsockopt(zmq.RCVHWM, RECEIVE_HIGH_WATER_MARK)
            if keys is not None:
                self._auth = _run_authenticator(self._context, keys.client_public,
                                                self._refused)
                self._auth.start()
                self._auth.configure_curve_callback("*", credentials_provider=self._auth)
                self._socket.curve_server = True
                self._socket.curve_secretkey = keys.server_secret
                self._socket.curve_publickey = keys.server_public
                self._monitor = self._socket.get_monitor_socket(HANDSHAKE_FAILURES)
            else:
                self._monitor = self._socket.get_monitor_socket(CONNECTION_EVENTS)
            if listener_fd is not None:
                self._socket.setsockopt(zmq.USE_FD, listener_fd)
            self._socket.bind(endpoint)
        except BaseException:
            self._shutdown()
            raise
        if endpoint.startswith("tcp://"):
            self.endpoint = self._socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="distea-collector", daemon=True)
        self._tracks_connections = keys is None
        """Local runs count their writers' connections (see :meth:`drain`)."""
        self._connections = 0
        """Connections accepted and not yet disconnected (as the loop has seen them)."""
        self._accepted = 0
        self._pass = threading.Condition(self._lock)
        """Notified at the end of every pass of the loop."""
        self._settled: tuple[int, int] = (0, -1)
        """(latest sync token seen, open connections) at the end of the loop's latest
        pass: every message of a connection counted closed had been stored by then."""
        self._sync_seq = 0

    def start(self) -> Collector:
        self._thread.start()
        return self

    def _loop(self) -> None:
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        if self._monitor is not None:
            poller.register(self._monitor, zmq.POLLIN)
        synced = 0
        while not self._stop.is_set():
            ready = dict(poller.poll(POLL_MS))
            if self._monitor is not None and self._monitor in ready:
                self._monitor_events()
            # Always, not only when the poll said so: what a connection sent comes
            # before its DISCONNECTED event, and must be stored in the same pass.
            token = self._receive_all()
            if token and self._monitor is not None:
                # The sync message came through the listener after every
                # connection queued before it was accepted: their ACCEPTED
                # events are in the monitor's queue now; count them, then
                # take what their DISCONNECTED ones may have left behind.
                self._monitor_events()
                token = max(token, self._receive_all())
            synced = max(synced, token)
            with self._pass:
                # every process connects at least once: fewer accepted connections
                # than processes means events were lost (never let the count
                # look lower than it is)
                trusted = self._accepted >= len(self.streams)
                self._settled = (synced, self._connections if trusted else -1)
                self._pass.notify_all()

    def _receive_all(self) -> int:
        """Store every message waiting in the socket; return the latest sync token seen."""
        token = 0
        while True:
            try:
                frames = self._socket.recv_multipart(zmq.NOBLOCK, copy=True)
            except zmq.Again:
                return token
            if len(frames) == 2 and frames[0] == SYNC_MAGIC:
                with contextlib.suppress(ValueError):
                    token = max(token, int(frames[1]))
                continue
            self._accept(frames)

    def _monitor_events(self) -> None:
        """Connections opened and closed (local runs); failed handshakes (CURVE runs)."""
        assert self._monitor is not None
        while True:
            try:
                frames = self._monitor.recv_multipart(zmq.NOBLOCK)
                event = int.from_bytes(frames[0][:2], "little")
                value = int.from_bytes(frames[0][2:6], "little")
            except zmq.Again:
                return
            except Exception:
                return
            if event == zmq.EVENT_ACCEPTED:
                self._connections += 1
                self._accepted += 1
            elif event == zmq.EVENT_DISCONNECTED:
                self._connections = max(0, self._connections - 1)
            elif event & (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                          | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL):
                # not CURVE at all, or a wrong server key: ZAP never saw it
                self._refused("", f"handshake failed (code {value})")

    def drain(self, timeout: float, quiet: float = 0.3) -> list[ProcessStream]:
        """Wait for open processes on this host to finish or die; return the still-open ones.

        A process that is gone without a final batch was killed: waiting
        longer gains nothing once its last batches had time to arrive.

        A local run ends as soon as nothing can be on its way: every known
        process has sent its final batch or is gone, and every connection
        ever made to the socket is closed, which the loop has seen after
        the sync message that this call sends through the same listener
        (so no connection still waiting to be accepted is missed). ZeroMQ
        reports a closed connection only after it has read all of it, and
        the loop stores what was read before it counts the connection
        closed. Otherwise (CURVE runs, or no sync within a second) the old
        rule holds: ``SETTLE_S`` of silence. A process still running that has
        not connected yet (it started just as the command ended and outlives
        it) is not waited for, as it was not before unless its first batch
        came within ``SETTLE_S``.
        """
        began = time.monotonic()
        deadline = began + timeout
        token = self._send_sync()
        while (now := time.monotonic()) < deadline:
            waiting = [s for s in self.open_processes()
                       if alive(s) or now - s.last_seen < quiet]
            if not waiting:
                if token and self._settled[0] >= token and 0 <= self._settled[1] <= 1:
                    break  # nothing connected but our own sync socket: all is stored
                if self.idle_for(since=began) >= min(quiet, SETTLE_S):
                    break  # nothing alive to wait for, and nothing left in the socket
                if token and now - began > SYNC_TIMEOUT_S:
                    token = 0
            with self._pass:
                self._pass.wait(0.01)
        return self.open_processes()

    def _send_sync(self) -> int:
        """Send a sync message through the listener (local runs); its token, or 0."""
        if not self._tracks_connections or not self._thread.is_alive():
            return 0
        try:
            if self._waker is None:
                waker = self._context.socket(zmq.PUSH)
                waker.setsockopt(zmq.LINGER, 0)
                waker.connect(self.endpoint)
                self._waker = waker
            self._sync_seq += 1
            self._waker.send_multipart([SYNC_MAGIC, str(self._sync_seq).encode()],
                                       zmq.NOBLOCK)
        except zmq.ZMQError:
            return 0
        return self._sync_seq

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._send_sync()  # wakes the loop, which then sees the stop
            self._thread.join(timeout=5)
        self._close_logs()
        self._shutdown()

    def _shutdown(self) -> None:
        if self._waker is not None:
            self._waker.close(linger=0)
        if self._monitor is not None:
            with contextlib.suppress(zmq.ZMQError):
                self._socket.disable_monitor()
            self._monitor.close(linger=0)
        self._socket.close(linger=0)
        if self._auth is not None:
            self._auth.stop()
        self._context.term()


