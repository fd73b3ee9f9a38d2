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
