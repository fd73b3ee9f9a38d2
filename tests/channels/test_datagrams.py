"""UDP, Unix datagrams, socket pairs and pipes under a real ``distea run``.

The main process makes every channel, forks one child per scenario, and the
child sends. Before forking, the parent runs ``X_before_recv``; the child
runs ``X_before_send`` just before it sends; the parent runs
``X_after_recv`` on what it received.
"""

from __future__ import annotations

import os
import socket

import pytest

from distea.tracer.channels.datagrams import canonical_host, primary_address, unix_name
from distea.tracer.channels.multiprocessing import fingerprint
from tests.channels.support import run_both

APP = r'''
import os, socket, sys, tempfile

def udp_before_send(): return 1
def udp_before_recv(): return 2
def udp_after_recv(m): return m

def connected_before_send(): return 1
def connected_before_recv(): return 2
def connected_after_recv(m): return m

def unixgram_before_send(): return 1
def unixgram_before_recv(): return 2
def unixgram_after_recv(m): return m

def pair_before_send(): return 1
def pair_before_recv(): return 2
def pair_after_recv(m): return m

def stream_pair_before_send(): return 1
def stream_pair_before_recv(): return 2
def stream_pair_after_recv(m): return m

def pipe_before_send(): return 1
def pipe_before_recv(): return 2
def pipe_after_recv(m): return m

def fifo_before_send(): return 1
def fifo_before_recv(): return 2
def fifo_after_recv(m): return m

def in_child(body):
    pid = os.fork()
    if pid == 0:
        try:
            body()
        finally:
            os._exit(0)
    return pid

def udp():
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("0.0.0.0", 0))
    port = server.getsockname()[1]
    server.settimeout(10)
    udp_before_recv()
    def body():
        c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp_before_send()
        c.sendto(b"udp datagram", ("localhost", port))
    pid = in_child(body)
    data, _ = server.recvfrom(100)
    print(udp_after_recv(data))
    os.waitpid(pid, 0)
    connected_before_recv()
    def body():
        c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        c.connect(("127.0.0.1", port))
        connected_before_send()
        c.send(b"connected datagram")
    pid = in_child(body)
    buffer = bytearray(100)
    n, _ = server.recvfrom_into(buffer)
    print(connected_after_recv(bytes(buffer[:n])))
    os.waitpid(pid, 0)

def unixgram(folder):
    path = os.path.join(folder, "dgram.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(path)
    unixgram_before_recv()
    def body():
        c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        unixgram_before_send()
        c.sendto(b"unix datagram", path)
    pid = in_child(body)
    print(unixgram_after_recv(server.recv(100)))
    os.waitpid(pid, 0)

def pairs():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    pair_before_recv()
    def body():
        pair_before_send()
        b.send(b"pair datagram")
    pid = in_child(body)
    print(pair_after_recv(a.recv(100)))
    os.waitpid(pid, 0)
    a, b = socket.socketpair()
    stream_pair_before_recv()
    def body():
        stream_pair_before_send()
        b.sendall(b"pair stream")
    pid = in_child(body)
    print(stream_pair_after_recv(a.recv(100)))
    os.waitpid(pid, 0)

def pipes(folder):
    r, w = os.pipe()
    pipe_before_recv()
    def body():
        pipe_before_send()
        os.write(w, b"through a pipe")
    pid = in_child(body)
    print(pipe_after_recv(os.read(r, 100)))
    os.waitpid(pid, 0)
    fifo = os.path.join(folder, "fifo")
    os.mkfifo(fifo)
    fifo_before_recv()
    def body():
        fd = os.open(fifo, os.O_WRONLY)
        fifo_before_send()
        os.write(fd, b"through the fifo")
        os.close(fd)
    pid = in_child(body)
    fd = os.open(fifo, os.O_RDONLY)
    print(fifo_after_recv(os.read(fd, 100)))
    os.close(fd)
    os.waitpid(pid, 0)

if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        udp()
        unixgram(folder)
        pairs()
        pipes(folder)
'''

AMBIGUOUS = r'''
import os, socket

def before_send_a(): return 1
def before_send_b(): return 2
def after_recv(m): return m

server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
server.bind(("127.0.0.1", 0))
server.settimeout(10)
port = server.getsockname()[1]
pids = []
for before in (before_send_a, before_send_b):
    pid = os.fork()
    if pid == 0:
        before()
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"same", ("127.0.0.1", port))
        os._exit(0)
    pids.append(pid)
got = [server.recv(10), server.recv(10)]
after_recv(got)
for pid in pids:
    os.waitpid(pid, 0)
print(got)
'''


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("dgram") / "app"
    folder.mkdir()
    script = folder / "dgram_app.py"
    script.write_text(APP)
    return run_both(script)


def single_edge(traced, kind: str, method: str, payload: bytes | None = None):
    pairs = [(s, r) for s, r in traced.edges(kind) if r.method == method
             and (payload is None or (r.end - r.start == len(payload) if kind == "pipe"
                                      else r.meta["fp"] == fingerprint(payload)))]
    assert len(pairs) == 1, (kind, method, traced.edges(kind))
    return pairs[0]


SCENARIOS = [
    ("udp", "udp", "udp", b"udp datagram"),
    ("udp", "connected", "udp", b"connected datagram"),
    ("unixgram", "unixgram", "unixgram", b"unix datagram"),
    ("unixgram", "pair", "pairs", b"pair datagram"),
    ("unix", "stream_pair", "pairs", None),
    ("pipe", "pipe", "pipes", b"through a pipe"),
    ("pipe", "fifo", "pipes", b"through the fifo"),
]


def test_output_and_no_tracer_errors(traced) -> None:
    assert traced.stdout == (
        "b'udp datagram'\nb'connected datagram'\nb'unix datagram'\nb'pair datagram'\n"
        "b'pair stream'\nb'through a pipe'\nb'through the fifo'\n")
    assert traced.errors() == 0


@pytest.mark.parametrize(("kind", "name", "receiver", "payload"), SCENARIOS)
def test_pairing_and_impact(traced, kind: str, name: str, receiver: str,
                            payload: bytes | None) -> None:
    send, recv = single_edge(traced, kind, f"dgram_app.{receiver}", payload)
    assert send.process != recv.process
    assert send.method is not None and send.method.endswith(".<locals>.body")
    if kind not in ("unix", "pipe"):  # streams: byte offsets, no fingerprint
        assert send.meta["fp"] == recv.meta["fp"]
    impacted = traced.impacted(f"dgram_app.{name}_before_send")
    assert f"dgram_app.{name}_after_recv" in impacted
    assert f"dgram_app.{name}_before_recv" not in impacted


def test_channel_names(traced) -> None:
    udp = [s for s, _ in traced.edges("udp")]
    assert {s.channel.rsplit(":", 1)[0] for s in udp} == {primary_address()}
    send, recv = single_edge(traced, "unixgram", "dgram_app.unixgram")
    assert send.channel == recv.channel and send.channel.endswith("/dgram.sock")
    send, recv = single_edge(traced, "unixgram", "dgram_app.pairs")
    assert send.channel != recv.channel and ":sock:" in send.channel
    assert any({link.end_a, link.end_b} == {send.channel, recv.channel}
               for link in traced.run.data.links)
    send, recv = single_edge(traced, "pipe", "dgram_app.pipes", b"through a pipe")
    assert send.channel == recv.channel and ":pipe:" in send.channel
    assert (recv.start, recv.end) == (0, len(b"through a pipe"))


def test_identical_datagrams_from_two_senders_are_safe(program) -> None:
    script = program("udp_ambiguous.py", AMBIGUOUS)
    traced = run_both(script)
    counts = traced.run.matching.by_kind["udp"]
    assert counts.ambiguous == 2 and counts.external == 0
    for query in ("udp_ambiguous.before_send_a", "udp_ambiguous.before_send_b"):
        assert "udp_ambiguous.after_recv" in traced.impacted(query)


def test_address_names(tmp_path, monkeypatch) -> None:
    host = primary_address()
    for spelling in ("0.0.0.0", "127.0.0.1", "127.1.2.3", "localhost", "::1", "[::]", "",
                     socket.gethostname(), "::ffff:127.0.0.1", host):
        assert canonical_host(spelling) == host, spelling
    assert canonical_host("10.1.2.3") in ("10.1.2.3", host)
    monkeypatch.chdir(tmp_path)
    assert unix_name("x.sock") == os.path.join(str(tmp_path), "x.sock")
    assert unix_name(b"\0abstract") == "@abstract"
    assert unix_name("") == "?"


BAD_SENDTO = r'''
import socket

def deliver(sock, address):
    sock.sendto(b"after the errors", address)

server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
server.bind(("127.0.0.1", 0))
client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rejected = 0
for bad in ((None,), (0, None), (None, None), (), (0, server.getsockname(), 4)):
    try:
        client.sendto(b"foo", *bad)
    except (TypeError, OSError):
        rejected += 1
deliver(client, server.getsockname())
print(rejected, server.recv(100).decode())
'''


def test_sendto_arguments_the_program_gets_wrong_are_not_tracer_errors(program) -> None:
    """``sendto`` called with arguments it rejects (CPython's
    ``test_socket.testSendtoErrors``): the program's error, raised as untraced, not
    the tracer's; they were counted as 5 tracer errors ("some of its events may be
    missing"). The valid datagram after them is still recorded."""
    traced = run_both(program("badsendto.py", BAD_SENDTO))
    assert traced.stdout == "5 after the errors\n"
    assert traced.errors() == 0, traced.run.problems
    assert [e.method for e in traced.events("udp", "send")] == ["badsendto.deliver"]
