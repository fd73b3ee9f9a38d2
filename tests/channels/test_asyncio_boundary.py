"""asyncio streams on uvloop (bytes moved in C) recorded at the asyncio boundary.

A server and a client, each on uvloop or the standard loop, exchange three
lines over real TCP. Expected by hand: three requests client → server and
three replies back, every receive paired with the send that carried its
last byte, and the same byte counts at both ends; the client's
``build_request`` first runs before the first request leaves, so its impact
reaches the server from the first request on (``handle``, ``transform`` and
what is on the server's stack then) and comes back with the first reply
(``use_reply``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.channels.support import Traced, run_both

pytest.importorskip("uvloop", reason="uvloop is a dev dependency; not installed here")

APP = r'''
import asyncio
import subprocess
import sys


def transform(line):
    return line.upper()


async def handle(reader, writer):
    while True:
        line = await reader.readline()
        if not line:
            break
        writer.write(transform(line))
        await writer.drain()
    writer.close()
    DONE.set()


async def serve():
    global DONE
    DONE = asyncio.Event()
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await DONE.wait()
    server.close()
    await server.wait_closed()


def build_request(i):
    return f"hello {i}\n".encode()


def use_reply(reply):
    return reply.decode().strip()


async def client(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for i in range(3):
        writer.writelines([build_request(i)])
        await writer.drain()
        print(use_reply(await reader.readline()), flush=True)
    writer.close()
    await writer.wait_closed()


def run(coro, kind):
    if kind == "uvloop":
        import uvloop
        uvloop.run(coro)
    else:
        asyncio.run(coro)


def main(server_loop, client_loop):
    server = subprocess.Popen([sys.executable, __file__, "server", server_loop],
                              stdout=subprocess.PIPE, text=True)
    port = server.stdout.readline().strip()
    subprocess.run([sys.executable, __file__, "client", client_loop, port], check=True)
    server.wait(timeout=30)


if __name__ == "__main__":
    if sys.argv[1] == "main":
        main(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "server":
        run(serve(), sys.argv[2])
    else:
        run(client(int(sys.argv[3])), sys.argv[2])
'''

SERVER_IMPACTED = {"app.<module>", "app.run", "app.serve", "app.handle", "app.transform"}
"""In the server, from the first request on: the handler and what it calls, and what
is still running (the module, ``run``, ``serve`` wait for the handler to finish)."""
CLIENT_IMPACTED = {"app.<module>", "app.run", "app.client", "app.build_request",
                   "app.use_reply"}


def _traced(tmp_path: Path, server_loop: str, client_loop: str) -> Traced:
    script = tmp_path / "app.py"
    script.write_text(APP)
    return run_both(script, "main", server_loop, client_loop)


def _process(traced: Traced, role: str) -> str:
    (key,) = [k for k, p in traced.run.processes.items() if role in p.argv]
    return key


@pytest.mark.parametrize(("server_loop", "client_loop"),
                         [("uvloop", "uvloop"), ("uvloop", "std"), ("std", "uvloop")])
def test_streams_pair_exactly_in_both_directions(tmp_path: Path, server_loop: str,
                                                 client_loop: str) -> None:
    traced = _traced(tmp_path, server_loop, client_loop)
    assert traced.stdout.split() == ["HELLO", "0", "HELLO", "1", "HELLO", "2"]
    server, client = _process(traced, "server"), _process(traced, "client")
    edges = traced.edges("tcp")
    up = [(s, r) for s, r in edges if s.process == client and r.process == server]
    down = [(s, r) for s, r in edges if s.process == server and r.process == client]
    assert len(up) == 3 and len(down) == 3, edges
    assert [(r.start, r.end) for _, r in up] == [(0, 8), (8, 16), (16, 24)]
    assert [(r.start, r.end) for _, r in down] == [(0, 8), (8, 16), (16, 24)]
    for s, r in edges:
        assert s.channel == r.channel and s.start < r.end <= s.end
    counts = traced.run.matching.by_kind["tcp"]
    assert (counts.sends, counts.recvs, counts.matched) == (6, 6, 6)
    assert counts.external == counts.ambiguous == counts.unmatched_sends == 0
    assert not traced.run.unseen.reports, traced.run.problems
    assert traced.errors() == 0

    result = traced.run.impact("app.build_request")
    assert set(result.impacted[server]) == SERVER_IMPACTED
    assert set(result.impacted[client]) == CLIENT_IMPACTED
    assert not result.unseen


PROTOCOL_APP = r'''
import asyncio
import subprocess
import sys


def transform(data):
    return data.upper()


class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.transport.write(transform(data))  # a C transport: not seen

    def connection_lost(self, exc):
        DONE.set_result(None)


async def serve():
    global DONE
    DONE = asyncio.get_running_loop().create_future()
    server = await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await DONE
    server.close()


def build_request():
    return b"hello\n"


def use_reply(reply):
    return reply.decode().strip()


async def client(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(build_request())
    print(use_reply(await reader.readline()), flush=True)
    writer.close()
    await writer.wait_closed()


if __name__ == "__main__":
    if sys.argv[1] == "protocol":
        server = subprocess.Popen([sys.executable, __file__, "server"], stdout=subprocess.PIPE,
                                  text=True)
        port = server.stdout.readline().strip()
        subprocess.run([sys.executable, __file__, "client", port], check=True)
        server.wait(timeout=30)
    elif sys.argv[1] == "server":
        import uvloop
        uvloop.run(serve())
    else:
        asyncio.run(client(int(sys.argv[2])))
'''


def test_protocol_on_uvloop_reads_seen_and_writes_ordered_safely(tmp_path: Path) -> None:
    """A uvloop Protocol: what it receives is recorded at the boundary (paired exactly
    with the standard-loop client's send); what it writes with ``transport.write``
    is not, but the client's receive of 6 bytes no one recorded sending proves it:
    a problem line, and the impact of ``transform`` reaches the client's
    ``use_reply`` through the connection, flagged as not precise."""
    script = tmp_path / "app.py"
    script.write_text(PROTOCOL_APP)
    traced = run_both(script, "protocol")
    assert traced.stdout.split() == ["HELLO"]
    server, client = _process(traced, "server"), _process(traced, "client")
    (edge,) = traced.edges("tcp")
    assert (edge[0].process, edge[1].process, edge[1].end) == (client, server, 6)
    assert any("6 bytes sent" in p and "not seen by the tracer" in p
               for p in traced.run.problems), traced.run.problems
    result = traced.run.impact("app.transform")
    assert "app.use_reply" in result.impacted[client]
    assert [(s, r) for s, r, _ in result.unseen] == [(server, client)]


DATAGRAM_APP = r'''
import asyncio
import socket
import subprocess
import sys


def handle(data):
    return data.upper()


class Server(asyncio.DatagramProtocol):
    def datagram_received(self, data, addr):
        handle(data)
        DONE.set_result(None)


async def serve():
    global DONE
    loop = asyncio.get_running_loop()
    DONE = loop.create_future()
    transport, _ = await loop.create_datagram_endpoint(Server, local_addr=("127.0.0.1", 0))
    print(transport.get_extra_info("sockname")[1], flush=True)
    await DONE
    transport.close()


def build():
    return b"datagram"


if __name__ == "__main__":
    if sys.argv[1] == "datagram":
        server = subprocess.Popen([sys.executable, __file__, "server"], stdout=subprocess.PIPE,
                                  text=True)
        port = int(server.stdout.readline())
        subprocess.run([sys.executable, __file__, "client", str(port)], check=True)
        server.wait(timeout=30)
    elif sys.argv[1] == "server":
        import uvloop
        uvloop.run(serve())
    else:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.sendto(build(), ("127.0.0.1", int(sys.argv[2])))
'''


def test_datagram_protocol_on_uvloop_pairs_with_a_plain_socket_sender(tmp_path: Path) -> None:
    """One datagram from a blocking socket to a uvloop DatagramProtocol: the send and the
    boundary's receive are one message (same channel, index and fingerprint), and the
    sender's ``build`` impacts the server's ``handle``."""
    script = tmp_path / "app.py"
    script.write_text(DATAGRAM_APP)
    traced = run_both(script, "datagram")
    server, client = _process(traced, "server"), _process(traced, "client")
    ((send, recv),) = traced.edges("udp")
    assert (send.process, recv.process) == (client, server)
    assert "app.handle" in traced.run.impact("app.build").impacted[server]
    assert traced.errors() == 0


SUBPROCESS_APP = r'''
import asyncio
import sys


def prepare():
    return "child"


def work():
    return "worked"


def after_child(out):
    return out.strip()


async def main():
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, prepare(), stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    print(after_child(out.decode()))


if __name__ == "__main__":
    if sys.argv[1:] == ["child"]:
        print(work())
    else:
        import uvloop
        uvloop.run(main())
'''


def test_children_of_uvloop_are_spawned_and_joined(tmp_path: Path) -> None:
    """libuv forks, execs and reaps the child in C: its spawn (token in its environment)
    and its exit (``process_exited``) are still edges, so the parent's ``prepare`` impacts
    the child's ``work``, and the child's ``work`` the parent's ``after_child``."""
    script = tmp_path / "app.py"
    script.write_text(SUBPROCESS_APP)
    traced = run_both(script, "parent")
    assert traced.stdout.strip() == "worked"
    parent, child = _process(traced, "parent"), _process(traced, "child")
    assert traced.run.processes[child].start_method == "subprocess"
    assert "app.work" in traced.run.impact("app.prepare").impacted[child]
    assert "app.after_child" in traced.run.impact("app.work").impacted[parent]
    assert traced.errors() == 0
