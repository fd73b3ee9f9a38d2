"""Stream socket bytes moved by calls the stream wrappers do not patch: ``os.read``/
``os.write`` on the descriptor, and ``sendto``/``recvfrom``/``recvfrom_into`` (below).

A parent makes a connection (a Unix socket pair, or TCP on 127.0.0.1), gives
one end to a child by number (``pass_fds``); the child, which never imports
``socket``, writes a greeting with ``os.write`` and reads the answer with
``os.read``; the parent reads and answers the same way. Expected by hand
(oracle): one send and one receive each way, paired with certainty on the
connection's channel (the child's 18 bytes up, the parent's 2 down); the
child's ``produce`` reaches the parent's ``consume`` and, through the
answer, the child's ``finish``. Before, neither end was recorded: the
parent's ``consume`` was missing from ``produce``'s impact set and no
problem line said why.
"""

from __future__ import annotations

import pytest

from distea.model import MessageEvent
from tests.channels.support import CONNECTED_PAIR, run_both

APP = CONNECTED_PAIR + r'''
import os, subprocess, sys

def produce():
    return b"payload-from-child"

def finish(answer):
    return answer.decode()

def consume(data):
    return b"ok" if data == b"payload-from-child" else b"??"

if sys.argv[1] == "child":
    fd = int(sys.argv[2])
    os.write(fd, produce())
    print(finish(os.read(fd, 100)), flush=True)
else:
    mine, theirs = connected_pair(sys.argv[1])
    child = subprocess.Popen([sys.executable, __file__, "child", str(theirs.fileno())],
                             pass_fds=[theirs.fileno()])
    theirs.close()
    os.write(mine.fileno(), consume(os.read(mine.fileno(), 100)))
    assert child.wait() == 0
    mine.close()
'''


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_os_calls_on_a_stream_socket_are_messages(program, transport: str) -> None:
    traced = run_both(program("fdsock.py", APP), transport)
    assert traced.stdout == "ok\n"
    def who(event: MessageEvent) -> str:
        return "child" if "child" in traced.run.processes[event.process].argv else "parent"

    edges = traced.edges(transport)
    assert sorted((who(s), who(r), r.start, r.end) for s, r in edges) == [
        ("child", "parent", 0, 18), ("parent", "child", 0, 2)]
    assert traced.run.matching.by_kind[transport].recvs == 2
    traced.assert_all_paired(transport)  # and the kernel's counts agree
    assert {"fdsock.consume", "fdsock.finish"} <= traced.impacted("fdsock.produce")


FROM_TO = CONNECTED_PAIR + r'''
import os, socket, sys

def produce():
    return b"payload-from-child"

def consume(data):
    return data.upper()

def finish(answer):
    return answer.decode()

parent, child = connected_pair(sys.argv[1])
pid = os.fork()
if pid == 0:
    parent.close()
    if sys.argv[1] == "tcp":
        child.sendto(produce(), ("127.0.0.1", 9))  # on a TCP stream: the address is ignored
    else:
        child.send(produce())  # Linux refuses sendto on a connected Unix stream
    buffer = bytearray(100)
    size, _ = child.recvfrom_into(buffer)
    print(finish(bytes(buffer[:size])), flush=True)
    child.close()
    os._exit(0)
child.close()
data, _ = parent.recvfrom(100)
parent.sendall(consume(data))
os.waitpid(pid, 0)
parent.close()
'''


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_sendto_and_recvfrom_on_a_stream_socket_are_its_bytes(program,
                                                              transport: str) -> None:
    """``sendto``/``recvfrom``/``recvfrom_into`` on a stream socket (CPython allows them;
    the datagram channel patches them): recorded as the stream's bytes. Before, the
    receive was not recorded at all: ``consume`` was missing from ``produce``'s impact
    set, silently on a Unix socket."""
    traced = run_both(program("fromto.py", FROM_TO), transport)
    assert traced.stdout == "PAYLOAD-FROM-CHILD\n"
    edges = traced.edges(transport)
    assert sorted((r.start, r.end) for _, r in edges) == [(0, 18), (0, 18)]
    traced.assert_all_paired(transport)
    assert {"fromto.consume", "fromto.finish"} <= traced.impacted("fromto.produce")


SENDFILE = CONNECTED_PAIR + r'''
import asyncio, os, socket, sys, tempfile

HEADER = b"LEN 18\n"

def produce(path):
    with open(path, "wb") as f:
        f.write(b"payload-from-disk!")

def consume(body):
    return body.upper()

def serve(conn, path):
    assert conn.recv(100) == b"GET"
    conn.sendall(HEADER)  # through the object: the connection's stream starts here
    produce(path)  # after the header left: only the body can carry it
    with open(path, "rb") as f:
        if sys.argv[2] == "asyncio":
            async def send():
                conn.setblocking(False)
                await asyncio.get_running_loop().sock_sendfile(conn, f, fallback=False)
            asyncio.run(send())
        else:
            assert conn.sendfile(f) == 18  # os.sendfile underneath, not send

def fetch(sock):
    sock.sendall(b"GET")
    data = b""
    while len(data) < len(HEADER) + 18:
        data += sock.recv(100)
    print(consume(data[len(HEADER):]).decode(), flush=True)

server_end, client_end = connected_pair(sys.argv[1])
pid = os.fork()
if pid == 0:
    server_end.close()
    fetch(client_end)
    client_end.close()
    os._exit(0)
client_end.close()
with tempfile.TemporaryDirectory() as tmp:
    serve(server_end, os.path.join(tmp, "body"))
os.waitpid(pid, 0)
server_end.close()
'''


@pytest.mark.parametrize(("transport", "how"), [("unix", "socket"), ("tcp", "socket"),
                                                ("tcp", "asyncio")])
def test_sendfile_counts_on_the_sockets_own_stream(program, transport: str,
                                                   how: str) -> None:
    """A server answers with a header through the socket object and a file's bytes
    through ``socket.sendfile`` (or asyncio's ``sock_sendfile``): ``os.sendfile``
    underneath, counted on the object's stream after its header. Expected by hand:
    the client's reads pair with the server's two sends (bytes 0-7 the header, 7-25
    the body), nothing external or unseen, and ``produce``, which ran after the
    header left, reaches the client's ``consume`` through the body alone. Before, the
    body's bytes had no recorded send: the client's reads of them external, and
    ``consume`` missing from ``produce``'s impact set."""
    traced = run_both(program("sendfile.py", SENDFILE), transport, how)
    assert traced.stdout == "PAYLOAD-FROM-DISK!\n"
    sends = sorted((e.start, e.end) for e in traced.events(transport, "send"))
    assert sends == [(0, 3), (0, 7), (7, 25)], sends  # GET up; header, body down
    traced.assert_all_paired(transport)
    assert "sendfile.consume" in traced.impacted("sendfile.produce")


BOTH_WAYS = r'''
import os, socket

def produce():
    return b"more"

def consume(data):
    return data.upper()

parent, child = socket.socketpair()
pid = os.fork()
if pid == 0:
    parent.close()
    data = b""
    while len(data) < 6:
        data += child.recv(100)
    print(consume(data).decode(), flush=True)
    os._exit(0)
child.close()
os.write(parent.fileno(), b"hi")  # through os first: the object has not moved a byte yet
parent.sendall(produce())
os.waitpid(pid, 0)
parent.close()
'''


def test_os_calls_and_the_object_count_one_stream(program) -> None:
    """``os.write`` on a socket's descriptor, then ``sendall`` on its object: one count
    for the connection (bytes 0-2, then 2-6). Before, each counted from 0, the two
    sends overlapped and the child's read could not be placed."""
    traced = run_both(program("bothways.py", BOTH_WAYS))
    assert traced.stdout == "HIMORE\n"
    assert sorted((e.start, e.end) for e in traced.events("unix", "send")) == [(0, 2), (2, 6)]
    traced.assert_all_paired("unix")
    assert "bothways.consume" in traced.impacted("bothways.produce")


INETD = CONNECTED_PAIR + r'''
import os, socket, subprocess, sys

def ask():
    return b"hello\n"

def produce(line):
    return "HELLO" if line == "hello\n" else "??"

def consume(data):
    return data.decode().strip().lower()

if sys.argv[1] == "child":  # never imports socket itself: standard streams, or a file
    if sys.argv[2] == "stdio":
        line = sys.stdin.readline()
        print(produce(line), flush=True)
    else:
        with os.fdopen(int(sys.argv[3]), "r+b", buffering=0) as conn:  # not seekable
            line = conn.readline().decode()
            conn.write(produce(line).encode() + b"\n")
    sys.exit(0)
theirs, mine = connected_pair(sys.argv[1])
fd = theirs.fileno()
if sys.argv[2] == "stdio":  # inetd's way: the connection is the child's stdin and stdout
    child = subprocess.Popen([sys.executable, __file__, "child", "stdio"],
                             stdin=theirs, stdout=theirs)
else:
    child = subprocess.Popen([sys.executable, __file__, "child", "fdopen", str(fd)],
                             pass_fds=[fd])
theirs.close()
mine.sendall(ask())
data = b""
while not data.endswith(b"\n"):
    data += mine.recv(100)
assert child.wait() == 0
print(consume(data))
mine.close()
'''


@pytest.mark.parametrize("transport", ["unix", "tcp"])
@pytest.mark.parametrize("how", ["stdio", "fdopen"])
def test_file_objects_over_a_socket_are_its_bytes(program, transport: str,
                                                  how: str) -> None:
    """A child whose standard streams are a connection (inetd's way), or that opens a
    socket's descriptor as a file (``os.fdopen``), reads the parent's line and answers
    through file objects. Expected by hand: the parent's 6 bytes and the child's 6 back,
    each paired with certainty; ``ask`` reaches the child's ``produce``, and ``produce``
    the parent's ``consume``. Before, the child recorded neither (a Unix socket: a
    silent miss; TCP: the parent's read external)."""
    traced = run_both(program("inetd.py", INETD), transport, how)
    assert traced.stdout == "hello\n"
    for direction in ("send", "recv"):  # 6 bytes each way, however the calls split them
        moved = sorted((e.start, e.end) for e in traced.events(transport, direction))
        assert [b for _, b in moved if b == 6] == [6, 6], moved
    traced.assert_all_paired(transport)
    assert "inetd.produce" in traced.impacted("inetd.ask")
    assert "inetd.consume" in traced.impacted("inetd.produce")


REUSED_NUMBERS = r'''
import os, socket, sys

def produce():
    return b"through reused numbers"

def consume(data):
    return data.upper()

files = [open(__file__, "rb") for _ in range(2)]
numbers = sorted(f.fileno() for f in files)
for f in files:
    os.read(f.fileno(), 1)  # descriptors the tracer now knows as "not a pipe or socket"
    f.close()  # closed in C, not through os.close
mine, theirs = socket.socketpair()
assert sorted((mine.fileno(), theirs.fileno())) == numbers  # the same numbers again
pid = os.fork()
if pid == 0:
    mine.close()
    os.write(theirs.fileno(), produce())
    os._exit(0)
theirs.close()
data = os.read(mine.fileno(), 100)
os.waitpid(pid, 0)
print(consume(data).decode())
'''


def test_a_descriptor_number_a_socket_takes_over_is_looked_at_again(program) -> None:
    """Two files read with ``os.read`` and closed by their objects (in C, not through
    ``os.close``), then a socket pair that gets the same two numbers, used through
    ``os.read``/``os.write`` across a fork. The tracer's descriptor cache still said
    "not a pipe or socket" for both numbers: neither end was recorded, and nothing
    said so (a Unix socket has no kernel counts). A new socket object now clears its
    number from the cache."""
    traced = run_both(program("reused.py", REUSED_NUMBERS))
    assert traced.stdout == "THROUGH REUSED NUMBERS\n"
    assert [(e.start, e.end) for e in traced.events("unix", "send")] == [(0, 22)]
    assert traced.run.matching.by_kind["unix"].recvs == 1
    traced.assert_all_paired("unix")
    assert "reused.consume" in traced.impacted("reused.produce")
