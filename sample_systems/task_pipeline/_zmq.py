"""Small ZeroMQ helpers shared by the pipeline roles: bounded waits everywhere."""

from __future__ import annotations

import zmq
from zmq.utils.monitor import recv_monitor_message

LINGER_MS = 2000
RECV_TIMEOUT_MS = 10_000


def endpoint(port: int) -> str:
    """The loopback TCP endpoint for `port`."""
    return f"tcp://127.0.0.1:{port}"


def make_socket(ctx: zmq.Context[zmq.Socket[bytes]], kind: int) -> zmq.Socket[bytes]:
    """A socket that never blocks forever: bounded linger and receive timeout."""
    sock = ctx.socket(kind)
    sock.setsockopt(zmq.LINGER, LINGER_MS)
    sock.setsockopt(zmq.RCVTIMEO, RECV_TIMEOUT_MS)
    return sock


def bind_loopback(sock: zmq.Socket[bytes]) -> int:
    """Bind to an OS-chosen loopback port and return it."""
    return sock.bind_to_random_port("tcp://127.0.0.1")


def connect_and_wait(sock: zmq.Socket[bytes], port: int) -> None:
    """Connect and wait until the ZMTP handshake has completed.

    ZeroMQ connects in the background; a worker that says "ready" before its
    task connection is up could miss its share of the work, and a SUB socket
    whose subscription has not reached the publisher would miss the stop
    message. Waiting for the handshake closes both gaps.
    """
    monitor = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
    try:
        sock.connect(endpoint(port))
        if not monitor.poll(RECV_TIMEOUT_MS):
            raise TimeoutError(f"no handshake with port {port}")
        recv_monitor_message(monitor)
    finally:
        sock.disable_monitor()
        monitor.close(linger=0)
