"""The emitter's connection through pyzmq: for a remote collector (``tcp://`` + CURVE).

Local runs use :mod:`distea.tracer.zmtp` instead; this module is imported
only when a run needs encryption, so pyzmq's import and libzmq's threads
are paid only there.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Sequence
from typing import Any

import zmq


class PyzmqPush:
    """A ZeroMQ PUSH socket in its own context, with the emitter's limits.

    libzmq's I/O thread must not live across ``fork``: the emitter closes
    this transport before every fork (``closes_at_fork``) and connects anew
    after.
    """

    closes_at_fork = True

    def __init__(self, endpoint: str, curve: tuple[str, str, str] | None, high_water_mark: int,
                 linger_ms: int) -> None:
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        try:
            # libzmq starts its threads with the first socket, and threads
            # inherit this thread's signal mask: with every signal blocked
            # here, a signal meant for the program is never taken by ours (a
            # program that blocks SIGINT and waits with sigwait would
            # otherwise get a KeyboardInterrupt).
            self._context: zmq.Context[Any] = zmq.Context(io_threads=1)
            sock = self._context.socket(zmq.PUSH)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        sock.setsockopt(zmq.SNDHWM, high_water_mark)
        sock.setsockopt(zmq.LINGER, linger_ms)
        sock.setsockopt(zmq.IMMEDIATE, 0)
        if curve is not None:
            server_key, public_key, secret_key = curve
            sock.curve_serverkey = server_key.encode()
            sock.curve_publickey = public_key.encode()
            sock.curve_secretkey = secret_key.encode()
        sock.connect(endpoint)
        self.socket: zmq.Socket[Any] = sock

    def has_room(self) -> bool:
        return bool(int(self.socket.getsockopt(zmq.EVENTS)) & zmq.POLLOUT)

    def send(self, frames: Sequence[bytes | memoryview], timeout_ms: int | None) -> bool:
        # copy=True: a zero-copy send of a large frame starts pyzmq's garbage
        # collector *thread*, which the program would see in threading.enumerate().
        try:
            if timeout_ms is None:
                self.socket.send_multipart(frames, flags=zmq.NOBLOCK, copy=True)
            else:
                self.socket.setsockopt(zmq.SNDTIMEO, timeout_ms)
                self.socket.send_multipart(frames, copy=True)
        except zmq.ZMQError:
            return False
        return True

    def close(self, linger_ms: int) -> bool:
        """``Context.term()`` returns once every queued message has left, or at the linger.

        Returning at the deadline is taken to mean something was still queued;
        with no linger at all, nothing can be told, and False says so.
        """
        started = time.monotonic()
        self.socket.close(linger=linger_ms)
        self._context.term()
        waited_ms = (time.monotonic() - started) * 1000
        return linger_ms > 0 and waited_ms < linger_ms * 0.95

    def abandon(self) -> None:
        """In a forked child: a context that crossed the fork (only if the emitter
        could not close it first) is never touched again; closing it could hang
        on the parent's threads."""
