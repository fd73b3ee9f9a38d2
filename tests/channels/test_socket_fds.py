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
from tests.channels.support import run_both

APP = r'''
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
    import socket
    if sys.argv[1] == "unix":
        mine, theirs = socket.socketpair()
    else:
        server = socket.create_server(("127.0.0.1", 0))
        theirs = socket.create_connection(server.getsockname())
        mine, _ = server.accept()
        server.close()
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
    m = traced.run.matching
    assert m.by_kind[transport].matched == m.by_kind[transport].recvs == 2
    assert m.external == m.ambiguous == 0, traced.run.problems
    assert not traced.run.unseen.reports, traced.run.problems  # the kernel's counts agree
    assert {"fdsock.consume", "fdsock.finish"} <= traced.impacted("fdsock.produce")
    assert traced.errors() == 0


FROM_TO = r'''
import os, socket, sys

def produce():
    return b"payload-from-child"

def consume(data):
    return data.upper()

def finish(answer):
    return answer.decode()

if sys.argv[1] == "unix":
    parent, child = socket.socketpair()
else:
    server = socket.create_server(("127.0.0.1", 0))
    child = socket.create_connection(server.getsockname())
    parent, _ = server.accept()
    server.close()
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
    m = traced.run.matching
    assert m.external == m.ambiguous == 0, traced.run.problems
    assert not traced.run.unseen.reports, traced.run.problems
    assert {"fromto.consume", "fromto.finish"} <= traced.impacted("fromto.produce")
    assert traced.errors() == 0
