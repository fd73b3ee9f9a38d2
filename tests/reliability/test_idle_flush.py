"""A process that ran Python in a short burst and then waits in C loses nothing when killed.

The worker receives one request, runs a task, and then waits in C (no
message event, no flush point of its own) until the coordinator SIGKILLs it
200 ms later. Every record of the task must be in the run: the idle
flusher sent them (distea/tracer/idleflush.py, docs/guarantees.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.tracing import run_traced

COORDINATOR = """
import os, signal, socket, subprocess, sys, time

listener = socket.create_server(("127.0.0.1", 0))
worker = subprocess.Popen([sys.executable, "worker.py", str(listener.getsockname()[1]),
                           sys.argv[1]])
conn, _ = listener.accept()
conn.sendall(b"go")
time.sleep(0.5)                      # the task takes ~1 ms: then it is idle for 200 ms and more
os.kill(worker.pid, signal.SIGKILL)
print("killed", worker.wait(), flush=True)
"""

WORKER = """
import select, socket, sys, time

def helper(n):
    return sum(range(n))

def task():
    return helper(1000)

conn = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
conn.recv(2)
task()
if sys.argv[2] == "sleep":
    time.sleep(30)                   # idle in C: killed here
else:
    r, w = socket.socketpair()
    select.select([r], [], [], 30)   # idle in C: killed here
"""



@pytest.mark.parametrize("idle", ["sleep", "select"])
def test_worker_killed_while_idle_in_c_keeps_its_task(program, tmp_path: Path, idle: str) -> None:
    script = program("coordinator.py", COORDINATOR)
    program("worker.py", WORKER)
    traced = run_traced([sys.executable, script.name, idle], script.parent, tmp_path / "run")
    assert traced.result.returncode == 0, traced.result.stderr
    assert traced.result.stdout == "killed -9\n"

    data = traced.data
    worker = next(p for p in data.processes.values() if "worker.py" in p.argv)
    assert not worker.complete
    assert {"worker.task", "worker.helper"} <= set(data.executions[worker.key])
    recvs = [m for m in data.messages[worker.key] if m.direction == "recv" and m.kind == "tcp"]
    assert [(m.start, m.end) for m in recvs] == [(0, 2)]


GRPC_CLIENT = """
import os, signal, time
import grpc
import client, service

server, target = client.start_server("sync")
with grpc.insecure_channel(target) as channel:
    greet = channel.unary_unary(service.path("Greet"), request_serializer=service.encode,
                                response_deserializer=service.decode)
    print(greet("ada"), flush=True)
time.sleep(0.5)                      # the server's pool thread is idle, blocked in C
os.kill(server.pid, signal.SIGKILL)
print("killed", server.wait(), flush=True)
"""


def test_grpc_server_killed_between_calls_keeps_its_handler(program, tmp_path: Path) -> None:
    """A gRPC server runs Python only in its thread pool, per call: killed 500 ms after
    its one call, it still has the handler's run and both messages."""
    pytest.importorskip("grpc", reason="grpcio is not installed")
    app = Path(__file__).parent.parent / "channels" / "grpc_app"
    script = program("killer.py", GRPC_CLIENT)
    for name in ("client.py", "server.py", "service.py"):
        program(name, (app / name).read_text())
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert traced.result.stdout == "hello ada\nkilled -9\n", traced.result.stderr
    data = traced.data
    server = next(p for p in data.processes.values() if "server.py" in p.argv)
    assert not server.complete
    assert {"server.greet", "server.make_greeting"} <= set(data.executions[server.key])
    grpc_events = [(m.direction, m.channel) for m in data.messages[server.key]
                   if m.kind == "grpc"]
    assert grpc_events == [("recv", "/demo.Greeter/Greet>"), ("send", "/demo.Greeter/Greet<")]
