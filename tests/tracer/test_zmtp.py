"""The plain-Python PUSH transport against a real pyzmq PULL socket: messages
arrive whole and in order (queued before the handshake, across fork, past the
kernel's buffer), the queue stays bounded, and every way of failing says so
without blocking the program."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from distea.launcher import listen
from distea.tracer.zmtp import (
    GREETING,
    HANDSHAKE_WAIT_S,
    PeerRefused,
    ZmtpPush,
    command,
    parse_handshake,
)
from tests.tracing import run_traced

LARGE = 1 << 20


@pytest.fixture
def context() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    yield ctx
    ctx.destroy(linger=0)


def pull(context: zmq.Context[zmq.Socket[bytes]], path: Path) -> zmq.Socket[bytes]:
    sock = context.socket(zmq.PULL)
    sock.bind(f"ipc://{path}")
    sock.rcvtimeo = 5000
    return sock


def message(i: int) -> list[bytes]:
    """Three frames: short, empty, and one of varying length across the 255-byte border."""
    return [b"m%d" % i, b"", bytes([i % 251]) * (i % 700)]


def test_messages_arrive_whole_and_in_order(context, tmp_path: Path) -> None:
    receiver = pull(context, tmp_path / "c.ipc")
    push = ZmtpPush(str(tmp_path / "c.ipc"), LARGE)
    for i in range(500):
        assert push.send(message(i), None)
    # close() writes what is still queued (on a busy machine the greeting may
    # come after connect's short wait; nothing but the tracer's next flush or
    # close moves the queue then)
    assert push.close(5000)
    got = [receiver.recv_multipart() for _ in range(500)]
    assert got == [message(i) for i in range(500)]


def test_what_is_queued_before_the_collector_takes_the_socket_is_delivered(
        context, tmp_path: Path) -> None:
    """distea run's quick path: the tracer connects while only the kernel listens."""
    path = tmp_path / "c.ipc"
    fd = listen(f"ipc://{path}")
    push = ZmtpPush(str(path), LARGE)
    started = time.monotonic()
    for i in range(50):
        assert push.send(message(i), None)  # queued: nobody has answered the greeting
    assert time.monotonic() - started < HANDSHAKE_WAIT_S + 1  # one wait, at connect
    receiver = context.socket(zmq.PULL)
    receiver.setsockopt(zmq.USE_FD, fd)
    receiver.bind(f"ipc://{path}")
    receiver.rcvtimeo = 5000
    assert push.close(5000)
    assert [receiver.recv_multipart() for _ in range(50)] == [message(i) for i in range(50)]


def test_the_queue_is_bounded_and_close_reports_what_could_not_leave(tmp_path: Path) -> None:
    """A collector that answers the handshake, then never reads a byte."""
    path = tmp_path / "c.ipc"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(1)
    bound = 4 << 20
    push = ZmtpPush(str(path), bound)
    frame = b"x" * 10_000
    assert push.send([frame], None)  # connects; nobody has answered yet
    stalled, _ = listener.accept()
    stalled.sendall(GREETING + command(b"READY", {b"Socket-Type": b"PULL"}))
    accepted = 1
    while push.send([frame], None):
        accepted += 1
        assert accepted < 10_000, "the queue never filled"
    assert not push.has_room()
    assert bound <= push._queued_bytes < bound + len(frame) + 16
    started = time.monotonic()
    assert not push.close(200)
    assert 0.15 < time.monotonic() - started < 2
    stalled.close()
    listener.close()


def test_the_kernel_buffer_filling_up_loses_nothing(context, tmp_path: Path) -> None:
    receiver = pull(context, tmp_path / "c.ipc")
    push = ZmtpPush(str(tmp_path / "c.ipc"), 64 << 20)
    big = [b"y" * 200_000]  # a few of these fill a Unix socket's buffer
    got: list[list[bytes]] = []
    reader = threading.Thread(target=lambda: got.extend(
        receiver.recv_multipart() for _ in range(100)))
    for _ in range(100):
        assert push.send(big, None)
    reader.start()
    assert push.close(10_000)
    reader.join(timeout=30)
    assert got == [big] * 100


def test_no_listener_fails_at_once_and_says_why(tmp_path: Path) -> None:
    stale = tmp_path / "gone.ipc"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(stale))
    listener.close()  # the file stays, nobody listens
    push = ZmtpPush(str(stale), LARGE)
    assert not push.send([b"x"], None)
    assert not push.send([b"x"], 1000)
    assert push.failure is not None and "cannot connect" in push.failure
    started = time.monotonic()
    assert push.close(1000)  # nothing was queued
    assert time.monotonic() - started < 0.5


def test_a_peer_that_never_answers_costs_one_bounded_wait(tmp_path: Path) -> None:
    path = tmp_path / "c.ipc"
    fd = listen(f"ipc://{path}")
    try:
        push = ZmtpPush(str(path), LARGE)
        started = time.monotonic()
        for _ in range(100):
            push.send([b"x"], None)
        elapsed = time.monotonic() - started
        assert HANDSHAKE_WAIT_S * 0.9 < elapsed < HANDSHAKE_WAIT_S + 1  # one wait, not 100
        assert not push.close(100)
    finally:
        os.close(fd)


def test_a_curve_collector_is_refused_with_the_reason(context, tmp_path: Path) -> None:
    server = context.socket(zmq.PULL)
    public, secret = zmq.curve_keypair()
    server.curve_server = True
    server.curve_secretkey = secret
    server.curve_publickey = public
    server.bind(f"ipc://{tmp_path / 'c.ipc'}")
    push = ZmtpPush(str(tmp_path / "c.ipc"), LARGE)
    deadline = time.monotonic() + 5
    while push.failure is None and time.monotonic() < deadline:
        push.send([b"x"], None)
        time.sleep(0.01)
    # libzmq may hang up before its whole greeting (which names CURVE) is read: a reset
    # where our READY was still unread on its side, an end of file where it was read
    assert push.failure in ("peer wants the CURVE mechanism",
                            "handshake failed: Connection reset by peer",
                            "handshake failed: the collector closed the connection"), push.failure
    push.close(0)


def test_handshake_errors_are_named() -> None:
    greeting = b"\xff" + bytes(8) + b"\x7f" + bytes((3, 0)) + b"NULL".ljust(20, b"\0") + bytes(32)
    ready = command(b"READY", {b"Socket-Type": b"PULL"})
    assert not parse_handshake(greeting[:40])
    assert not parse_handshake(greeting + ready[:-1])
    assert parse_handshake(greeting + ready)
    with pytest.raises(PeerRefused, match="refused the connection: busy"):
        parse_handshake(greeting + b"\x04\x0b\x05ERROR\x04busy")
    with pytest.raises(PeerRefused, match="not a ZeroMQ peer"):
        parse_handshake(b"HTTP/1.1 400")
    with pytest.raises(PeerRefused, match=r"ZMTP 2\.x"):
        parse_handshake(greeting[:10] + b"\x02\x00")


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_fork_parent_keeps_its_stream_and_child_connects_anew(context, tmp_path: Path) -> None:
    receiver = pull(context, tmp_path / "c.ipc")
    push = ZmtpPush(str(tmp_path / "c.ipc"), LARGE)
    assert push.send([b"parent", b"before"], None)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        status = 1
        try:
            push.abandon()
            child = ZmtpPush(str(tmp_path / "c.ipc"), LARGE)
            child.send([b"child", b"x" * 5000], None)
            status = 0 if child.close(5000) else 2
        finally:
            os._exit(status)
    for i in range(200):
        assert push.send([b"parent", b"%d" % i], None)
    assert os.waitpid(pid, 0)[1] == 0
    assert push.close(5000)
    got = [receiver.recv_multipart() for _ in range(202)]
    assert [b"child", b"x" * 5000] in got
    parent = [frames for frames in got if frames[0] == b"parent"]
    assert parent == [[b"parent", b"before"]] + [[b"parent", b"%d" % i] for i in range(200)]


def test_a_local_run_traces_without_importing_pyzmq(tmp_path: Path) -> None:
    """Until the program imports zmq itself: then its channel is installed."""
    probe = ("import sys\n"
             "def main():\n"
             "    before = 'zmq' in sys.modules\n"
             "    import zmq\n"
             "    ctx = zmq.Context()\n"
             "    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)\n"
             "    a.bind('inproc://x'); b.connect('inproc://x')\n"
             "    a.send(b'hello'); print(before, b.recv())\n"
             "    a.close(); b.close(); ctx.term()\n"
             "main()\n")
    (tmp_path / "probe.py").write_text(probe)
    traced = run_traced([sys.executable, "probe.py"], tmp_path, tmp_path / "run")
    assert traced.result.stdout == "False b'hello'\n", traced.result.stderr
    data = traced.data
    (info,) = data.processes.values()
    zmq_messages = sorted(m.direction for m in data.messages[info.key] if m.kind == "zmq")
    assert zmq_messages == ["recv", "send"]
