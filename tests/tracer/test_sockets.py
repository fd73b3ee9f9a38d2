"""TCP and Unix stream sockets, sync and asyncio: byte ranges on both ends."""

from __future__ import annotations

import itertools
import socket
import sys
from pathlib import Path

import pytest

import distea
from distea.model import MessageEvent, RunData
from tests.channels.support import CONNECTED_PAIR
from tests.tracing import run_traced, run_untraced

SERVER_CLIENT = """
import socket, subprocess, sys

def serve(listener):
    conn, _ = listener.accept()
    with conn:
        request = read_request(conn)
        conn.sendall(handle(request))

def read_request(conn):
    data = b""
    while not data.endswith(b"\\n"):
        data += conn.recv(3)
    return data

def handle(request):
    return request.upper()

def client(address):
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    with socket.socket(family) as sock:
        sock.connect(address)
        sock.sendall(b"hello ")
        sock.send(b"world\\n")
        print(sock.recv(100).decode().strip(), flush=True)

if __name__ == "__main__":
    if sys.argv[1] == "client":
        client(sys.argv[2] if sys.argv[2].startswith("/") else ("127.0.0.1", int(sys.argv[2])))
    else:
        if sys.argv[1] == "unix":
            listener = socket.socket(socket.AF_UNIX)
            listener.bind(sys.argv[2])
            where = sys.argv[2]
        else:
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            where = str(listener.getsockname()[1])
        listener.listen()
        child = subprocess.Popen([sys.executable, __file__, "client", where])
        serve(listener)
        child.wait()
"""


def streams(data: RunData, kind: str) -> dict[tuple[str, str], list[MessageEvent]]:
    out: dict[tuple[str, str], list[MessageEvent]] = {}
    for events in data.messages.values():
        for e in events:
            if e.kind == kind:
                out.setdefault((e.channel, e.direction), []).append(e)
    return out


@pytest.mark.parametrize("family", ["tcp", "unix"])
def test_stream_byte_ranges_on_both_ends(program, tmp_path: Path, family: str) -> None:
    script = program("echo.py", SERVER_CLIENT)
    where = str(tmp_path / "sock") if family == "unix" else "0"
    traced = run_traced([sys.executable, script.name, family, where], script.parent,
                        tmp_path / "run")
    assert traced.result.stdout == "HELLO WORLD\n", traced.result.stderr
    data = traced.data
    found = streams(data, family)
    assert len(found) == 4, found.keys()
    requests = [k for k in found if k[1] == "send" and len(found[k]) == 2]
    (request_channel, _) = requests[0]
    sends = found[(request_channel, "send")]
    recvs = found[(request_channel, "recv")]
    assert [(s.start, s.end) for s in sends] == [(0, 6), (6, 12)]
    assert [s.method for s in sends] == ["echo.client", "echo.client"]
    assert recvs[0].start == 0 and recvs[-1].end == 12
    assert all(b.start == a.end for a, b in itertools.pairwise(recvs))
    assert {r.method for r in recvs} == {"echo.read_request"}
    assert {s.process for s in sends} != {r.process for r in recvs}
    reply = [k for k in found if k[0] != request_channel]
    assert {(e.start, e.end) for k in reply for e in found[k]} == {(0, 12)}


ASYNC = """
import asyncio

async def handle(reader, writer):
    while line := await reader.readline():
        writer.write(line.upper())
        await writer.drain()
    writer.close()

async def talk(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for word in (b"a\\n", b"bb\\n", b"ccc\\n"):
        writer.write(word)
    await writer.drain()
    replies = [await reader.readline() for _ in range(3)]
    writer.close()
    await writer.wait_closed()
    return replies

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(await talk(port))
    server.close()
    await server.wait_closed()

asyncio.run(main())
"""


def test_asyncio_streams(program, tmp_path: Path) -> None:
    script = program("aio.py", ASYNC)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    untraced = run_untraced([sys.executable, script.name], script.parent)
    assert traced.result.stdout == untraced.stdout == "[b'A\\n', b'BB\\n', b'CCC\\n']\n"
    found = streams(traced.data, "tcp")
    totals = {k: max(e.end for e in v) for k, v in found.items()}
    assert sorted(totals.values()) == [9, 9, 9, 9]


SSL_PROGRAM = """
import socket, ssl, sys, threading

def serve(listener, context):
    conn, _ = listener.accept()
    with context.wrap_socket(conn, server_side=True) as tls:
        tls.sendall(tls.recv(100)[::-1])

def main(cert, key):
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.load_verify_locations(cert)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    thread = threading.Thread(target=serve, args=(listener, server_ctx))
    thread.start()
    with client_ctx.wrap_socket(socket.create_connection(listener.getsockname()),
                                server_hostname="localhost") as tls:
        tls.sendall(b"secret")
        print(tls.recv(100))
    thread.join()

main(sys.argv[1], sys.argv[2])
"""


def test_ssl_plaintext_offsets(program, tmp_path: Path) -> None:
    trustme = pytest.importorskip("trustme", reason="trustme makes the test certificate")
    authority = trustme.CA()
    cert = authority.issue_cert("localhost")
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    authority.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    trusted = f"load_verify_locations({str(tmp_path / 'ca.pem')!r})"
    script = program("tls.py", SSL_PROGRAM.replace("load_verify_locations(cert)", trusted))
    traced = run_traced([sys.executable, script.name, str(cert_file), str(key_file)],
                        script.parent, tmp_path / "run")
    assert traced.result.stdout == "b'terces'\n", traced.result.stderr
    found = streams(traced.data, "ssl")
    assert {(k[1], e.start, e.end) for k, v in found.items() for e in v} == {
        ("send", 0, 6), ("recv", 0, 6)}
    assert len(found) == 4


ID_REUSE = """
import gc, socket

def exchange(listener, payload):
    with socket.create_connection(listener.getsockname()) as sock:
        conn, _ = listener.accept()
        with conn:
            sock.sendall(payload)
            received = conn.recv(100)
        return id(sock), received

listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
seen, reused = set(), 0
for round in range(200):
    ident, received = exchange(listener, b"x" * (round % 7 + 1))
    gc.collect()
    reused += ident in seen
    seen.add(ident)
print(reused > 0)
"""


def test_a_socket_whose_id_is_reused_gets_its_own_channel(program, tmp_path: Path) -> None:
    """CPython hands a freed socket's id to the next one: the channel table must
    forget the dead socket first, or the new connection would inherit its name
    and byte offsets."""
    script = program("reuse.py", ID_REUSE)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert traced.result.stdout == "True\n", traced.result.stderr  # ids were reused
    found = streams(traced.data, "tcp")
    sends = {k[0]: v for k, v in found.items() if k[1] == "send"}
    recvs = {k[0]: v for k, v in found.items() if k[1] == "recv"}
    assert len(sends) == len(recvs) == 200  # one channel per connection
    for channel, events in sends.items():
        size = events[0].end
        assert [(e.start, e.end) for e in events] == [(0, size)]
        assert [(e.start, e.end) for e in recvs[channel]] == [(0, size)]


CLOSED_MEANWHILE = """
import socket, sys, threading

sys.setswitchinterval(1e-6)  # threads take turns as often as they can

def wake(end):
    end.send(b"!")  # asyncio's _write_to_self, from a child watcher's thread

total = 0
for _ in range(1000):
    reader, writer = socket.socketpair()
    thread = threading.Thread(target=wake, args=(writer,))
    thread.start()
    total += len(reader.recv(10))
    writer.close()  # the loop closes while the thread may still be in its send
    thread.join()
    reader.close()
print(total)
"""


def test_a_send_whose_socket_another_thread_closes_meanwhile_is_recorded(
        program, tmp_path: Path) -> None:
    """A thread's first send on a socket, which another thread closes as soon as the
    byte arrived (asyncio's self-pipe, woken by a child watcher's thread while the
    loop closes; CPython's ``test_asyncio.test_subprocess``). The socket was
    described after the send returned, by then often closed: the byte went
    unrecorded and its read had no send (external), a few times in 1,000 rounds."""
    script = program("closing.py", CLOSED_MEANWHILE)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert traced.result.stdout == "1000\n", traced.result.stderr
    found = streams(traced.data, "unix")
    sends = {k[0]: v for k, v in found.items() if k[1] == "send"}
    assert len(sends) == 1000, len(sends)  # every pair's one byte
    assert all([(e.start, e.end) for e in events] == [(0, 1)] for events in sends.values())


TWO_OBJECTS = """
import os, socket

mine, theirs = socket.socketpair()
pid = os.fork()
if pid == 0:
    mine.close()
    data = b""
    while len(data) < 5:
        data += theirs.recv(10)
    print(data.decode(), flush=True)
    os._exit(0)
theirs.close()
twin = socket.socket(fileno=os.dup(mine.fileno()))  # a second object, one connection
mine.send(b"ab")
twin.send(b"cde")
os.waitpid(pid, 0)
"""


def test_two_objects_of_one_connection_count_one_stream(program, tmp_path: Path) -> None:
    """Two socket objects over one connection (a duplicate descriptor): one count, so
    their sends are bytes 0-2 and 2-5 of the stream the child reads; each counted
    from 0 before, and the child's read of byte 4 had no recorded send."""
    script = program("twins.py", TWO_OBJECTS)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert traced.result.stdout == "abcde\n", traced.result.stderr
    found = streams(traced.data, "unix")
    sends = [(e.start, e.end) for k, v in found.items() if k[1] == "send" for e in v]
    assert sorted(sends) == [(0, 2), (2, 5)]


DUAL_STACK = """
import os, socket

def produce():
    return b"over ipv4"

def consume(data):
    return data.upper()

server = socket.create_server(("::", 0), family=socket.AF_INET6, dualstack_ipv6=True)
port = server.getsockname()[1]
pid = os.fork()
if pid == 0:
    with socket.create_connection(("127.0.0.1", port)) as client:  # plain IPv4
        client.sendall(produce())
    os._exit(0)
conn, peer = server.accept()  # peer: ('::ffff:127.0.0.1', ...)
data = b""
while len(data) < 9:
    data += conn.recv(100)
os.waitpid(pid, 0)
print(peer[0], consume(data).decode())
"""


def test_an_ipv4_client_of_a_dual_stack_server_pairs(program, tmp_path: Path) -> None:
    """A dual-stack IPv6 server (``create_server(..., dualstack_ipv6=True)``) sees an
    IPv4 client as ``::ffff:127.0.0.1``; the client sees itself as ``127.0.0.1``. The
    two ends named the connection differently, so every receive was external
    ("untraced peer") at both ends (CPython's ``test_socket``); one name now."""
    if not socket.has_dualstack_ipv6():
        pytest.skip("this host has no dual-stack IPv6")
    script = program("dual.py", DUAL_STACK)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert traced.result.stdout == "::ffff:127.0.0.1 OVER IPV4\n", traced.result.stderr
    found = streams(traced.data, "tcp")
    channels = {name for name, direction in found if direction == "recv"}
    assert len(channels) == 1 and {name for name, _ in found} == channels, found
    run = distea.load(traced.run_dir)
    assert run.matching.external == 0, run.problems
    assert "dual.consume" in {name for names in run.impact("dual.produce").impacted.values()
                              for name in names}


PEEK = CONNECTED_PAIR + """
import os, socket, sys

def produce():
    return b"HTTP/1.1 hello"

def pick(head):
    return "http" if head == b"HTTP" else "other"

def consume(kind, data):
    return f"{kind}:{data.decode()}"

server_end, client_end = connected_pair(sys.argv[1])
pid = os.fork()
if pid == 0:
    client_end.sendall(produce())
    os._exit(0)
head = b""
while len(head) < 4:
    head = server_end.recv(4, socket.MSG_PEEK)  # the bytes stay in the socket
kind = pick(head)  # decided on what the peek showed
data = b""
while len(data) < 14:
    data += server_end.recv(100)
os.waitpid(pid, 0)
print(consume(kind, data))
"""


@pytest.mark.parametrize("family", ["tcp", "unix"])
def test_a_peek_is_a_receive_and_its_bytes_are_not_counted_twice(
        program, tmp_path: Path, family: str) -> None:
    """A server peeks at a connection's first 4 bytes (``MSG_PEEK``) to pick a protocol,
    then reads the whole request. Expected by hand: the receives record bytes 0-4 (the
    peek) and 4-14 (what the read took beyond it), both paired with the client's one
    send; ``pick`` runs after the peek, so ``produce`` reaches it. Before, the peek
    counted its 4 bytes as taken: the read was recorded as 4-18, beyond every send
    (external), and CPython's ``test_socket`` had 8 such receives."""
    script = program("peek.py", PEEK)
    traced = run_traced([sys.executable, script.name, family], script.parent,
                        tmp_path / "run")
    assert traced.result.stdout == "http:HTTP/1.1 hello\n", traced.result.stderr
    found = streams(traced.data, family)
    recvs = sorted((e.start, e.end) for (_, d), v in found.items() if d == "recv" for e in v)
    assert recvs[0] == (0, 4) and recvs[-1][1] == 14, recvs
    assert all(a[1] == b[0] for a, b in itertools.pairwise(recvs)), recvs  # no byte twice
    run = distea.load(traced.run_dir)
    assert run.matching.external == run.matching.ambiguous == 0, run.problems
    impacted = {name for names in run.impact("peek.produce").impacted.values()
                for name in names}
    assert {"peek.pick", "peek.consume"} <= impacted


UDP_PEEK = """
import os, socket

def produce():
    return b"datagram payload"

def consume(data):
    return data.upper()

server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
server.bind(("127.0.0.1", 0))
pid = os.fork()
if pid == 0:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(produce(), server.getsockname())
    os._exit(0)
size = len(server.recv(4, socket.MSG_PEEK))  # a truncated look
again, _ = server.recvfrom(100, socket.MSG_PEEK)  # and a whole one
data = server.recv(100)  # then it is taken
os.waitpid(pid, 0)
print(size, again == data, consume(data).decode())
"""


def test_a_peeked_datagram_is_received_once(program, tmp_path: Path) -> None:
    """Two ``MSG_PEEK`` looks at a datagram (one truncated), then the receive that takes
    it: one receive recorded, paired with the one send. Before, each look was a
    receive of its own: three receives for one send ("more receives than recorded
    sends", CPython's ``test_socket``)."""
    script = program("udppeek.py", UDP_PEEK)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert traced.result.stdout == "4 True DATAGRAM PAYLOAD\n", traced.result.stderr
    found = streams(traced.data, "udp")
    assert sum(len(v) for (_, d), v in found.items() if d == "recv") == 1, found
    run = distea.load(traced.run_dir)
    udp = run.matching.by_kind["udp"]
    assert (udp.recvs, udp.matched, udp.external) == (1, 1, 0), run.problems


FROM_FD = """
import os, socket, sys

listener = socket.create_server(("127.0.0.1", 0))
pid = os.fork()
if pid == 0:
    with socket.create_connection(listener.getsockname()) as client:
        client.sendall(b"x" * 28)
    os._exit(0)
conn, _ = listener.accept()
twin = socket.fromfd(conn.fileno(), socket.AF_INET, socket.SOCK_STREAM)  # a duplicate
data = b""
while len(data) < 28:
    data += twin.recv(100)
first, second = (twin, conn) if sys.argv[1] == "twin-first" else (conn, twin)
first.close()
second.close()  # never moved a byte itself
os.waitpid(pid, 0)
print(len(data))
"""


@pytest.mark.parametrize("order", ["twin-first", "conn-first"])
def test_closing_a_duplicate_that_moved_nothing_reports_nothing_unseen(
        program, tmp_path: Path, order: str) -> None:
    """The bytes came through a duplicate (``socket.fromfd``); the original, which moved
    none itself, was compared with the kernel's counts at its close as if it had
    recorded nothing: "28 bytes received ... were not seen by the tracer" (CPython's
    ``test_socket.testFromFd``, 4 such lines). Its connection's counts are used."""
    script = program("fromfd.py", FROM_FD)
    traced = run_traced([sys.executable, script.name, order], script.parent, tmp_path / "run")
    assert traced.result.stdout == "28\n", traced.result.stderr
    run = distea.load(traced.run_dir)
    assert not run.unseen.reports, run.problems
    assert run.matching.external == 0, run.problems
