"""TLS connections pair at the plaintext level, whichever TLS each end runs.

A server and a client, each a blocking ``ssl.SSLSocket`` (OpenSSL moves the
ciphertext in C), asyncio's TLS (``ssl.SSLObject`` over a memory BIO, on the
standard loop, in streams or in a plain protocol) or asyncio streams on
uvloop, exchange three lines over real TLS on 127.0.0.1, optionally after a
STARTTLS upgrade of a plain connection (``start_tls`` / ``wrap_socket`` of a
connected socket). Certificates are made at test time (trustme).

Expected by hand (oracle): the client sends ``hello 0..2\\n`` (8 bytes each),
the server answers each upper-cased; every TLS receive at both ends is
paired, certainly, with the send that carried its last byte on the same
channel (kind ``ssl``, plaintext offsets from the TLS session's start), and
the plain STARTTLS exchange before the upgrade (9 bytes up, 3 down) pairs
as ``tcp``. The client's ``build_request`` runs before the first request
leaves, so its impact reaches the server's handler and ``transform`` and
comes back with the first reply (``use_reply``). No byte is reported
unseen: the kernel's counts (ciphertext) are compared where Python moves
the ciphertext (asyncio), and not where OpenSSL does (``SSLSocket``).

An end running TLS distea does not tie to its connection (an
``ssl.SSLObject`` driven by hand over a socket) records ciphertext: that
cannot pair with plaintext, and a problem line says so while the receives
are ordered safely (uncertain over the other end's sends).
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from tests.channels.support import Traced, run_both

pytest.importorskip("trustme", reason="trustme is a dev dependency; not installed here")

APP = r'''
import asyncio
import socket
import ssl
import subprocess
import sys

CERT, KEY, CA = "cert.pem", "key.pem", "ca.pem"
N = 3


def server_context():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(CERT, KEY)
    return ctx


def client_context():
    return ssl.create_default_context(cafile=CA)


def transform(line):
    return line.upper()


def build_request(i):
    return f"hello {i}\n".encode()


def use_reply(reply):
    return reply.decode().strip()


# -- blocking ends -------------------------------------------------------------

def read_line(sock):
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            return data
        data += chunk
    return data


def block_server(starttls):
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    conn, _ = listener.accept()
    if starttls:
        assert read_line(conn) == b"STARTTLS\n"
        conn.sendall(b"OK\n")
    conn = server_context().wrap_socket(conn, server_side=True)
    for _ in range(N):
        line = read_line(conn)
        conn.sendall(transform(line))
        print("server got", line.decode().strip(), file=sys.stderr, flush=True)
    conn.close()
    listener.close()


def block_client(port, starttls):
    sock = socket.create_connection(("127.0.0.1", port))
    if starttls:
        sock.sendall(b"STARTTLS\n")
        assert read_line(sock) == b"OK\n"
    sock = client_context().wrap_socket(sock, server_hostname="localhost")
    for i in range(N):
        sock.sendall(build_request(i))
        print(use_reply(read_line(sock)), flush=True)
    sock.close()


# -- memory BIO by hand (a library doing its own TLS) ---------------------------

def sslobject_client(port):
    sslobject_over(socket.create_connection(("127.0.0.1", port)))


def inner_client(port):
    """TLS inside TLS: an ``SSLObject`` by hand over an ``SSLSocket``."""
    sock = client_context().wrap_socket(socket.create_connection(("127.0.0.1", port)),
                                        server_hostname="localhost")
    sslobject_over(sock)


def sslobject_over(sock):
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = client_context().wrap_bio(incoming, outgoing, server_hostname="localhost")

    def pump_out():
        data = outgoing.read()
        if data:
            sock.sendall(data)

    def pump_in():
        data = sock.recv(65536)
        if not data:
            incoming.write_eof()
        incoming.write(data)

    while True:
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            pump_out()
            pump_in()
    pump_out()
    for i in range(N):
        obj.write(build_request(i))
        pump_out()
        line = b""
        while not line.endswith(b"\n"):
            try:
                line += obj.read(1024)
            except ssl.SSLWantReadError:
                pump_out()
                pump_in()
        print(use_reply(line), flush=True)
    sock.close()


# -- asyncio ends --------------------------------------------------------------

async def handle(reader, writer, starttls, done):
    if starttls:
        assert await reader.readline() == b"STARTTLS\n"
        writer.write(b"OK\n")
        await writer.drain()
        await writer.start_tls(server_context())
    for _ in range(N):
        line = await reader.readline()
        writer.write(transform(line))
        await writer.drain()
        print("server got", line.decode().strip(), file=sys.stderr, flush=True)
    writer.close()
    done.set()


async def async_server(starttls):
    done = asyncio.Event()
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, starttls, done), "127.0.0.1", 0,
        ssl=None if starttls else server_context())
    print(server.sockets[0].getsockname()[1], flush=True)
    await done.wait()
    server.close()
    await server.wait_closed()


async def async_client(port, starttls):
    if starttls:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"STARTTLS\n")
        await writer.drain()
        assert await reader.readline() == b"OK\n"
        await writer.start_tls(client_context(), server_hostname="localhost")
    else:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_context(), server_hostname="localhost")
    for i in range(N):
        writer.write(build_request(i))
        await writer.drain()
        print(use_reply(await reader.readline()), flush=True)
    writer.close()
    try:
        await writer.wait_closed()
    except ConnectionError:
        pass


async def inner_server(_starttls):
    """TLS inside TLS: ``start_tls`` on a connection that is TLS already."""
    done = asyncio.Event()

    async def inner(reader, writer):
        await writer.start_tls(server_context())
        await handle(reader, writer, False, done)

    server = await asyncio.start_server(inner, "127.0.0.1", 0, ssl=server_context())
    print(server.sockets[0].getsockname()[1], flush=True)
    await done.wait()
    server.close()
    await server.wait_closed()


class EchoProtocol(asyncio.Protocol):
    """A plain protocol (not streams): its transport.write goes through the SSL transport."""

    def __init__(self, done):
        self.done, self.buf, self.count = done, b"", 0

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.buf += data
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            self.transport.write(transform(line + b"\n"))
            print("server got", line.decode(), file=sys.stderr, flush=True)
            self.count += 1
            if self.count == N:
                self.transport.close()
                self.done.set()


async def protocol_server(_starttls):
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    server = await loop.create_server(lambda: EchoProtocol(done), "127.0.0.1", 0,
                                      ssl=server_context())
    print(server.sockets[0].getsockname()[1], flush=True)
    await done.wait()
    server.close()
    await server.wait_closed()


def run(coro, loop):
    if loop == "uvloop":
        import uvloop
        uvloop.run(coro)
    else:
        asyncio.run(coro)


def main(server_kind, client_kind, starttls):
    import trustme
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    cert.private_key_pem.write_to_path(KEY)
    cert.cert_chain_pems[0].write_to_path(CERT)
    ca.cert_pem.write_to_path(CA)
    server = subprocess.Popen([sys.executable, __file__, "server", server_kind, starttls],
                              stdout=subprocess.PIPE, text=True)
    port = server.stdout.readline().strip()
    subprocess.run([sys.executable, __file__, "client", client_kind, starttls, port],
                   check=True)
    assert server.wait(timeout=30) == 0


if __name__ == "__main__":
    role, kind, starttls = sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else ""
    tls_upgrade = starttls == "starttls"
    if role == "main":
        main(kind, sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "")
    elif role == "server":
        if kind == "block":
            block_server(tls_upgrade)
        elif kind.startswith("proto-"):
            run(protocol_server(tls_upgrade), kind.split("-")[1])
        elif kind == "inner":
            run(inner_server(tls_upgrade), "std")
        else:
            run(async_server(tls_upgrade), kind)
    else:
        port = int(sys.argv[4])
        if kind == "block":
            block_client(port, tls_upgrade)
        elif kind == "sslobject":
            sslobject_client(port)
        elif kind == "inner":
            inner_client(port)
        else:
            run(async_client(port, tls_upgrade), kind)
'''

SERVER_IMPACTED = {
    "block": {"app.<module>", "app.block_server", "app.read_line", "app.transform"},
    "std": {"app.<module>", "app.run", "app.async_server", "app.handle", "app.transform"},
    "proto-std": {"app.<module>", "app.run", "app.protocol_server",
                  "app.EchoProtocol.data_received", "app.transform"},
}
"""In the server, from the first request on: the handler and what it calls, and what is
still running below it (the module, ``run``, the serving function waiting for it)."""
SERVER_IMPACTED["uvloop"] = SERVER_IMPACTED["std"]
CLIENT_IMPACTED = {
    "block": {"app.<module>", "app.block_client", "app.build_request", "app.read_line",
              "app.use_reply"},
    "std": {"app.<module>", "app.run", "app.async_client", "app.build_request",
            "app.use_reply"},
    "sslobject": {"app.<module>", "app.sslobject_client", "app.sslobject_over",
                  "app.build_request", "app.use_reply", "app.sslobject_over.<locals>.pump_in",
                  "app.sslobject_over.<locals>.pump_out"},
}
CLIENT_IMPACTED["uvloop"] = CLIENT_IMPACTED["std"]
REQUESTS = [(0, 8), (8, 16), (16, 24)]
"""Plaintext byte ranges of the three requests (and of the three replies)."""


def _traced(tmp_path: Path, server: str, client: str, upgrade: str = "") -> Traced:
    script = tmp_path / "app.py"
    script.write_text(APP)
    traced = run_both(script, "main", server, client, *([upgrade] if upgrade else []))
    assert traced.stdout.split() == ["HELLO", "0", "HELLO", "1", "HELLO", "2"]
    return traced


def _process(traced: Traced, role: str) -> str:
    (key,) = [k for k, p in traced.run.processes.items() if role in p.argv]
    return key


def _check_exact(traced: Traced, kind: str, up_bytes: int, down_bytes: int,
                 sends: tuple[list[tuple[int, int]], list[tuple[int, int]]] | None = None,
                 ) -> None:
    """Every receive of ``kind`` paired with certainty, with the send carrying its last
    byte on the same channel; ``up_bytes``/``down_bytes`` received each way."""
    server, client = _process(traced, "server"), _process(traced, "client")
    edges = traced.edges(kind)
    recvs = traced.events(kind, "recv")
    assert len(edges) == len(recvs) > 0
    for s, r in edges:
        assert s.channel == r.channel and s.start < r.end <= s.end and s.process != r.process
    up = sorted((r.start, r.end) for s, r in edges if r.process == server)
    down = sorted((r.start, r.end) for s, r in edges if r.process == client)
    # the receives of each direction cover its bytes exactly, in order
    for ranges, total in ((up, up_bytes), (down, down_bytes)):
        assert ranges[0][0] == 0 and ranges[-1][1] == total
        assert all(a[1] == b[0] for a, b in pairwise(ranges))
    if sends is not None:
        up_sends = sorted((e.start, e.end) for e in traced.events(kind, "send")
                          if e.process == client)
        down_sends = sorted((e.start, e.end) for e in traced.events(kind, "send")
                            if e.process == server)
        assert (up_sends, down_sends) == sends
    counts = traced.run.matching.by_kind[kind]
    assert counts.matched == counts.recvs == len(recvs)
    assert counts.external == counts.ambiguous == counts.unmatched_sends == 0


def _check_impact(traced: Traced, server_kind: str, client_kind: str) -> None:
    server, client = _process(traced, "server"), _process(traced, "client")
    result = traced.run.impact("app.build_request")
    assert set(result.impacted[server]) == SERVER_IMPACTED[server_kind]
    assert set(result.impacted[client]) == CLIENT_IMPACTED[client_kind]
    assert not result.unseen


@pytest.mark.parametrize(("server", "client"), [
    ("block", "std"), ("std", "block"), ("std", "std"), ("proto-std", "block"),
    ("uvloop", "std"), ("std", "uvloop"), ("block", "uvloop")])
def test_tls_pairs_exactly_between_any_two_tls_stacks(tmp_path: Path, server: str,
                                                      client: str) -> None:
    traced = _traced(tmp_path, server, client)
    _check_exact(traced, "ssl", 24, 24, (REQUESTS, REQUESTS))
    assert "tcp" not in traced.run.matching.by_kind  # no ciphertext recorded as a message
    assert not traced.run.unseen.reports, traced.run.problems
    assert not traced.run.problems, traced.run.problems
    assert traced.errors() == 0
    _check_impact(traced, server, client)


@pytest.mark.parametrize(("server", "client"), [
    ("block", "std"), ("std", "block"), ("uvloop", "std"), ("std", "uvloop")])
def test_starttls_upgrade_pairs_plain_then_tls(tmp_path: Path, server: str,
                                               client: str) -> None:
    traced = _traced(tmp_path, server, client, "starttls")
    _check_exact(traced, "tcp", 9, 3)  # STARTTLS\n up, OK\n down, before the upgrade
    _check_exact(traced, "ssl", 24, 24, (REQUESTS, REQUESTS))
    assert not traced.run.unseen.reports, traced.run.problems
    assert not traced.run.problems, traced.run.problems
    assert traced.errors() == 0
    _check_impact(traced, server, client)


@pytest.mark.parametrize("server", ["block", "std"])
def test_tls_distea_cannot_tie_is_a_problem_line_and_ordered_safely(
        tmp_path: Path, server: str) -> None:
    """A client driving an ``ssl.SSLObject`` by hand records the ciphertext its socket
    moves; the server records plaintext. Nothing pairs by offsets, nothing is silent."""
    traced = _traced(tmp_path, server, "sslobject")
    matching = traced.run.matching
    assert matching.by_kind["tcp"].external == matching.by_kind["ssl"].external == 0
    lines = [p for p in traced.run.problems if "was recorded as ssl and tcp" in p]
    assert len(lines) == 2, traced.run.problems  # one per direction
    assert all("not paired by byte offsets" in line for line in lines)
    _check_impact(traced, server, "sslobject")


def test_tls_inside_tls_pairs_at_the_outer_layer(tmp_path: Path) -> None:
    """asyncio ``start_tls`` on a TLS connection against an ``SSLObject`` driven by hand
    over an ``SSLSocket`` (CPython's ``test_create_server_ssl_over_ssl``): both ends
    record the outer layer's plaintext (the inner layer's ciphertext), and it pairs."""
    traced = _traced(tmp_path, "inner", "inner")
    server, client = _process(traced, "server"), _process(traced, "client")
    edges, recvs = traced.edges("ssl"), traced.events("ssl", "recv")
    assert len(edges) == len(recvs) > 0
    for s, r in edges:
        assert s.channel == r.channel and s.start < r.end <= s.end and s.process != r.process
    for process in (server, client):
        ranges = sorted((r.start, r.end) for r in recvs if r.process == process)
        assert ranges[0][0] == 0 and all(a[1] == b[0] for a, b in pairwise(ranges))
    counts = traced.run.matching.by_kind["ssl"]
    assert counts.matched == counts.recvs and counts.external == counts.ambiguous == 0
    assert "tcp" not in traced.run.matching.by_kind
    assert not traced.run.problems, traced.run.problems
    impacted = traced.run.impact("app.build_request").impacted
    assert {"app.handle", "app.transform"} <= set(impacted[server])
    assert {"app.build_request", "app.use_reply"} <= set(impacted[client])


IDLE = r'''
import asyncio, socket, ssl, subprocess, sys, time


def main(server_kind):
    import trustme
    ca = trustme.CA()
    cert = ca.issue_cert("localhost")
    cert.private_key_pem.write_to_path("key.pem")
    cert.cert_chain_pems[0].write_to_path("cert.pem")
    ca.cert_pem.write_to_path("ca.pem")
    server = subprocess.Popen([sys.executable, __file__, "server", server_kind],
                              stdout=subprocess.PIPE, text=True)
    port = server.stdout.readline().strip()
    subprocess.run([sys.executable, __file__, "client", port], check=True)
    assert server.wait(timeout=30) == 0


async def async_server():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain("cert.pem", "key.pem")
    done = asyncio.Event()

    async def handle(reader, writer):
        try:
            await reader.read(1)  # the client's exit: no byte of application data
        except OSError:
            pass  # no TLS close_notify before the exit
        writer.close()
        done.set()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
    print(server.sockets[0].getsockname()[1], flush=True)
    await done.wait()
    server.close()


def block_server():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain("cert.pem", "key.pem")
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    conn, _ = listener.accept()
    conn = ctx.wrap_socket(conn, server_side=True)
    time.sleep(1.2)  # open at the exit scan, handshake bytes only


if __name__ == "__main__":
    if sys.argv[1] == "main":
        main(sys.argv[2])
    elif sys.argv[1] == "server":
        asyncio.run(async_server()) if sys.argv[2] == "std" else block_server()
    else:
        ctx = ssl.create_default_context(cafile="ca.pem")
        sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[2]))),
                               server_hostname="localhost")
        time.sleep(1.2)
        print("handshake only", flush=True)
'''


@pytest.mark.parametrize("server", ["block", "std"])
def test_tls_handshake_bytes_are_not_reported_unseen(tmp_path: Path, server: str) -> None:
    """Connections that moved only TLS handshake bytes (ciphertext, no plaintext): the
    detector knows them as TLS (``SSLSocket``) or counts their ciphertext (asyncio)."""
    script = tmp_path / "idle.py"
    script.write_text(IDLE)
    traced = run_both(script, "main", server)
    assert traced.stdout.strip() == "handshake only"
    assert not traced.run.unseen.reports, traced.run.problems
    assert not traced.run.problems, traced.run.problems

