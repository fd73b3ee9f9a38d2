"""UDP broadcast under a real ``distea run``: one datagram, a receive in every
process bound to its port, each paired with certainty.

The loopback broadcast address (127.255.255.255) reaches every socket bound to
it on the port; the limited broadcast (255.255.255.255) leaves by the default
interface, which a sandbox may not have, so its naming is checked without
sending (the analyzer pairs ``*:PORT`` sends alike whatever their address:
tests/analyzer/test_match_queues.py).
"""

from __future__ import annotations

import socket

import pytest

from distea.tracer.channels.datagrams import _broadcast_name
from tests.channels.support import run_both

APP = r'''
import os, socket, sys

ROUNDS = 4

def bcast_before_send(): return 1
def bcast_before_recv(): return 2
def bcast_after_recv(m): return m

def listener(port=0):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.255.255.255", port))
    s.settimeout(20)
    return s

if __name__ == "__main__":
    first = listener()
    port = first.getsockname()[1]
    socks = [first, listener(port)]
    children = []
    for s in socks:
        pid = os.fork()
        if pid == 0:
            bcast_before_recv()
            got = [s.recvfrom(100)[0] for _ in range(ROUNDS)]
            bcast_after_recv(got)
            os._exit(0 if got == [b"who is there?"] * ROUNDS else 1)
        children.append(pid)
    for s in socks:
        s.close()
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    out.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    bcast_before_send()
    for _ in range(ROUNDS):
        out.sendto(b"who is there?", ("127.255.255.255", port))
    print([os.waitpid(pid, 0)[1] for pid in children])
'''


def _loopback_broadcast_works() -> bool:
    recv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    send = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        recv.bind(("127.255.255.255", 0))
        recv.settimeout(2)
        send.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        send.sendto(b"probe", ("127.255.255.255", recv.getsockname()[1]))
        return recv.recvfrom(10)[0] == b"probe"
    except OSError:
        return False
    finally:
        recv.close()
        send.close()


def test_loopback_broadcast_pairs_with_every_receiver(program) -> None:
    if not _loopback_broadcast_works():
        pytest.skip("this sandbox does not deliver loopback UDP broadcasts")
    script = program("bcast.py", APP)
    traced = run_both(script)
    assert traced.stdout == "[0, 0]\n"
    counts = traced.run.matching.by_kind["udp"]
    assert (counts.sends, counts.recvs) == (4, 8)
    assert (counts.matched, counts.ambiguous, counts.external) == (8, 0, 0)
    sends = traced.events("udp", "send")
    assert all(e.channel.startswith("*:") and e.meta and e.meta["fanout"] for e in sends)
    # each receiver's k-th datagram is the k-th broadcast
    by_receiver: dict[str, list[int]] = {}
    for send, recv in sorted(traced.edges("udp"), key=lambda e: e[1].clock):
        by_receiver.setdefault(recv.process, []).append(send.start)
    assert sorted(by_receiver.values()) == [[0, 1, 2, 3], [0, 1, 2, 3]]
    assert "bcast.bcast_after_recv" in traced.impacted("bcast.bcast_before_send")
    assert "bcast.bcast_before_recv" not in traced.impacted("bcast.bcast_before_send")


@pytest.mark.parametrize(("address", "broadcast"), [
    ("255.255.255.255", True), ("<broadcast>", True), ("239.1.2.3", True),
    ("ff02::1", True), ("127.255.255.255", True), ("10.1.2.255", True),
    ("127.0.0.1", False), ("10.1.2.3", False), ("240.0.0.1", False), ("ffhost", False),
])
def test_broadcast_addresses(address: str, broadcast: bool) -> None:
    """Unit: which destinations are named ``*:PORT`` (``*.255`` only with SO_BROADCAST)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        assert (_broadcast_name(sock, (address, 7)) == "*:7") is broadcast
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 0)
        if address.endswith(".255") and address != "255.255.255.255":
            assert _broadcast_name(sock, (address, 7)) is None
    finally:
        sock.close()
