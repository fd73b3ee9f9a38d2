"""The detector's bookkeeping: when a difference is reported, and with which window.

A report's window ``(lo, clock]`` must hold every moment the unseen bytes may
have moved: it starts at the last check that found nothing new, never at a
check that found a difference still waiting to be confirmed.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

from distea.tracer.channels.unseen import Counts, UnseenTrafficDetector, kernel_counts


@dataclass
class Clock:
    value: int = 0


@dataclass
class FakeSession:
    """What the detector uses of a session: its clock and its send recorder."""

    clock: Clock = field(default_factory=Clock)
    sent: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def send(self, kind: str, channel: str, start: int, end: int,
             meta: dict[str, Any] | None = None) -> None:
        self.clock.value += 1
        self.sent.append((kind, channel, meta or {}))


def detector() -> tuple[UnseenTrafficDetector, FakeSession]:
    d = UnseenTrafficDetector()
    session = FakeSession()
    d.session = session  # type: ignore[assignment]
    return d, session


def check(d: UnseenTrafficDetector, session: FakeSession, at: int, unseen_sent: int,
          reason: str = "periodic") -> None:
    session.clock.value = at
    counts = Counts(100 + unseen_sent, 50, 0, 100, 50)
    d._compare("a:1>b:2", counts, at, reason, lasting=reason != "periodic")


def test_a_periodic_difference_is_reported_once_confirmed_with_the_earlier_window() -> None:
    d, session = detector()
    check(d, session, 10, 0)   # clean: the window of later bytes starts here
    check(d, session, 20, 7)   # found, not yet confirmed (a call may be mid-record)
    assert session.sent == []
    check(d, session, 30, 7)   # confirmed: the bytes moved after 10, not after 20
    ((kind, channel, meta),) = session.sent
    assert (kind, channel, meta["lo"], meta["sent"], meta["at"]) == \
        ("unseen", "a:1>b:2", 10, 7, "periodic")
    check(d, session, 40, 7)   # nothing new
    assert len(session.sent) == 1
    check(d, session, 50, 9)
    check(d, session, 60, 9)   # 2 more bytes, after the check at 40
    assert [(m["lo"], m["sent"]) for _, _, m in session.sent] == [(10, 7), (40, 2)]


def test_a_passing_difference_is_not_reported() -> None:
    d, session = detector()
    check(d, session, 10, 3)
    check(d, session, 20, 0)
    check(d, session, 30, 0)
    assert session.sent == []


def test_at_close_and_exit_a_difference_is_reported_at_once() -> None:
    d, session = detector()
    check(d, session, 10, 0)
    check(d, session, 20, 5, reason="close")
    ((_, _, meta),) = session.sent
    assert (meta["lo"], meta["sent"], meta["at"]) == (10, 5, "close")


def test_kernel_counts_of_a_real_connection() -> None:
    """Bytes written and read through the socket methods, and 4 bytes queued unread:
    the kernel's counts equal what the program moved, the FIN not counted."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        conn, _ = server.accept()
        with client, conn:
            client.sendall(b"x" * 10)
            assert conn.recv(6) == b"x" * 6
            conn.sendall(b"y" * 3)
            assert client.recv(3) == b"yyy"
            client.shutdown(socket.SHUT_WR)
            conn_counts = kernel_counts(conn, 3, 6)
            client_counts = kernel_counts(client, 10, 3)
    assert conn_counts is not None and client_counts is not None
    assert (conn_counts.kernel_sent, conn_counts.unseen()) == (3, (0, 0))
    assert (client_counts.kernel_sent, client_counts.kernel_received) == (10, 3)
    assert client_counts.unseen() == (0, 0)
