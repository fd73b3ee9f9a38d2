"""Bytes moved outside Python's socket methods are detected, reported and ordered safely.

The client connects with ``socket`` but sends and receives through libc
(``ctypes``) on the socket's descriptor, so no channel sees its 17 bytes
each way; the server uses plain ``socket`` methods. Expected by hand: one
report from the client (17 bytes sent, 17 received, found when it closes the
socket), none from the server; the server's receive has no recorded send,
yet the impact of the client's ``build`` must reach the server's ``handle``
and ``reply_for`` through the possible edge, and say so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.channels.support import Traced, run_both
from tests.tracing import DISTEA

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="TCP_INFO byte counters are Linux only")

APP = r'''
import ctypes
import socket
import subprocess
import sys

libc = ctypes.CDLL(None, use_errno=True)


def reply_for(data):
    return data[::-1]


def handle(conn):
    data = conn.recv(100)
    conn.sendall(reply_for(data))


def build():
    return b"ping-through-libc"


OPEN = []


def client(port, via):
    sock = socket.create_connection(("127.0.0.1", port))
    payload = build()
    if via.startswith("libc"):
        libc.send(sock.fileno(), payload, len(payload), 0)
        buf = ctypes.create_string_buffer(100)
        n = libc.recv(sock.fileno(), buf, 100, 0)
        print(buf.raw[:n].decode())
    else:
        sock.sendall(payload)
        print(sock.recv(100).decode())
    if via == "libc-kept-open":
        OPEN.append(sock)  # still open at exit: found by the exit check
    else:
        sock.close()


def server():
    srv = socket.create_server(("127.0.0.1", 0))
    print(srv.getsockname()[1], flush=True)
    conn, _ = srv.accept()
    handle(conn)
    conn.recv(1)
    conn.close()


if __name__ == "__main__":
    if sys.argv[1] == "main":
        srv = subprocess.Popen([sys.executable, __file__, "server"], stdout=subprocess.PIPE,
                               text=True)
        port = srv.stdout.readline().strip()
        subprocess.run([sys.executable, __file__, "client", port, sys.argv[2]], check=True)
        srv.wait(timeout=30)
    elif sys.argv[1] == "server":
        server()
    else:
        client(int(sys.argv[2]), sys.argv[3])
'''


def _traced(tmp_path: Path, via: str) -> Traced:
    script = tmp_path / "app.py"
    script.write_text(APP)
    traced = run_both(script, "main", via)
    assert traced.stdout.strip() == "cbil-hguorht-gnip"
    return traced


def _process(traced: Traced, role: str) -> str:
    (key,) = [k for k, p in traced.run.processes.items() if role in p.argv]
    return key


@pytest.mark.parametrize(("via", "found_at"), [("libc", "close"), ("libc-kept-open", "exit")])
def test_libc_traffic_is_reported_with_its_byte_count(tmp_path: Path, via: str,
                                                      found_at: str) -> None:
    traced = _traced(tmp_path, via)
    run = traced.run
    client, server = _process(traced, "client"), _process(traced, "server")
    (report,) = run.unseen.reports
    assert (report.process, report.sent, report.received, report.at) == \
        (client, 17, 17, found_at)
    lines = [p for p in run.problems if "not seen by the tracer" in p]
    assert len(lines) == 1 and "17 bytes sent and 17 bytes received" in lines[0]
    assert str(run.processes[client].pid) in lines[0]

    result = run.impact("app.build")
    assert {"app.handle", "app.reply_for"} <= set(result.impacted[server])
    assert (client, server, report.channel) in result.unseen
    explanation = run.explain("app.build", "app.reply_for")
    assert explanation.impacted and "did not see" in explanation.reason
    # backward: the server's handler may depend on what the client built
    assert "app.build" in run.deps("app.reply_for").deps[client]

    shown = subprocess.run([str(DISTEA), "impact", "app.build", "--json", "--run",
                            str(run.path)], capture_output=True, text=True, check=True)
    doc = json.loads(shown.stdout)
    assert {"from": client, "to": server, "channel": report.channel} in doc["unseen"]
    assert any("17 bytes sent" in p for p in doc["problems"])
    table = subprocess.run([str(DISTEA), "impact", "app.build", "--run", str(run.path)],
                           capture_output=True, text=True, check=True,
                           env={**os.environ, "COLUMNS": "200"})
    assert f"safe, not precise: the impact may cross tcp {report.channel}" in table.stdout


def test_python_socket_traffic_is_not_reported(tmp_path: Path) -> None:
    traced = _traced(tmp_path, "python")
    assert not traced.run.unseen.reports, traced.run.problems
    server = _process(traced, "server")
    result = traced.run.impact("app.build")
    assert {"app.handle", "app.reply_for"} <= set(result.impacted[server])
    assert not result.unseen
