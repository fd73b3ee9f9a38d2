"""A traced worker killed with SIGKILL: the rest intact, its flushed part kept and flagged."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import distea
from tests.tracing import DISTEA, run_traced

COORDINATOR = """
import os, signal, socket, subprocess, sys, time

def serve():
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    workers = [subprocess.Popen([sys.executable, "worker.py", str(port), str(i)])
               for i in range(3)]
    conns = {}
    for _ in workers:
        conn, _ = listener.accept()
        index = int(conn.recv(16).decode().split()[1])   # "ready I"
        conns[index] = conn
    time.sleep(0.5)                      # killed mid-run, while it waits
    os.kill(workers[1].pid, signal.SIGKILL)
    workers[1].wait()
    for i in (0, 2):
        conns[i].sendall(b"go")
    results = sorted(int(conns[i].recv(16)) for i in (0, 2))
    for w in (workers[0], workers[2]):
        w.wait()
    print("results", results, "killed", workers[1].returncode, flush=True)

serve()
"""

WORKER = """
import socket, sys, time

def compute(i):
    return sum(range(1000 * (i + 1)))

def after_go(i):
    return i * 10

def main(port, i):
    conn = socket.create_connection(("127.0.0.1", port))
    compute(i)
    conn.sendall(f"ready {i}".ljust(16).encode())
    conn.recv(2)                          # worker 1 is killed while it waits here
    conn.sendall(str(after_go(i)).ljust(16).encode())

main(int(sys.argv[1]), int(sys.argv[2]))
"""


def test_sigkilled_worker(program, tmp_path: Path) -> None:
    script = program("coordinator.py", COORDINATOR)
    program("worker.py", WORKER)
    run_dir = tmp_path / "run"
    traced = run_traced([sys.executable, script.name], script.parent, run_dir)
    assert traced.result.returncode == 0, traced.result.stderr
    assert traced.result.stdout == "results [0, 20] killed -9\n"
    assert "Traceback" not in traced.result.stderr

    data = traced.data
    workers = {p.argv[-1]: p for p in data.processes.values() if "worker.py" in p.argv}
    assert sorted(workers) == ["0", "1", "2"], [p.argv for p in data.processes.values()]
    killed = workers["1"]
    assert not killed.complete and killed.end_reason is None
    assert all(workers[i].complete for i in ("0", "2"))
    coordinator = next(p for p in data.processes.values() if "coordinator.py" in p.argv)
    assert coordinator.complete
    # what the killed worker did before its last flush is kept
    assert {"worker.compute", "worker.main"} <= set(data.executions[killed.key])
    sends = [m for m in data.messages[killed.key] if m.direction == "send" and m.kind == "tcp"]
    assert [(m.start, m.end) for m in sends] == [(0, 16)]
    assert "worker.after_go" not in data.executions[killed.key]
    # ... and the survivors are whole
    for i in ("0", "2"):
        assert "worker.after_go" in data.executions[workers[i].key]
    # the loss is said, naming the process
    assert any(f"process {killed.pid} " in p and "without a final flush" in p
               for p in data.problems), data.problems
    assert json.loads((run_dir / "run.json").read_text())["exit_code"] == 0

    # analysis works on the damaged run and says what is missing
    run = distea.load(run_dir)
    result = run.impact("worker.compute")
    impacted = result.impacted
    assert "coordinator.serve" in impacted[coordinator.key]
    assert "worker.after_go" in impacted[workers["0"].key]
    assert any("without a final flush" in p for p in run.problems)

    import subprocess
    cli = subprocess.run([str(DISTEA), "impact", "worker.compute", "--run", str(run_dir)],
                         capture_output=True, text=True, timeout=60, cwd=script.parent)
    assert cli.returncode == 0, cli.stderr
    assert "Traceback" not in cli.stderr
    assert "problem" in (cli.stdout + cli.stderr)


ZMQ_COORDINATOR = """
import os, signal, subprocess, sys, time
import zmq

def serve():
    context = zmq.Context()
    rep = context.socket(zmq.REP)
    port = rep.bind_to_random_port("tcp://127.0.0.1")
    worker = subprocess.Popen([sys.executable, "zmq_worker.py", str(port)])
    rep.recv()                     # the request arrives; no reply is ever sent
    time.sleep(0.5)                # the worker waits in its receive all along
    os.kill(worker.pid, signal.SIGKILL)
    print("killed", worker.wait(), flush=True)
    rep.close(linger=0)
    context.term()

serve()
"""

ZMQ_WORKER = """
import sys
import zmq

def ask(port):
    context = zmq.Context()
    req = context.socket(zmq.REQ)
    req.connect(f"tcp://127.0.0.1:{port}")
    req.send(b"work please")
    req.recv()                     # killed while it waits here

ask(int(sys.argv[1]))
"""


def test_a_worker_killed_in_a_zmq_receive_has_sent_what_it_did(program, tmp_path: Path) -> None:
    """The tracer flushes before a ZeroMQ receive that waits (here: forever)."""
    script = program("zmq_coordinator.py", ZMQ_COORDINATOR)
    program("zmq_worker.py", ZMQ_WORKER)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert traced.result.stdout == "killed -9\n", traced.result.stderr
    data = traced.data
    (worker,) = [p for p in data.processes.values() if "zmq_worker.py" in p.argv]
    assert not worker.complete
    assert "zmq_worker.ask" in data.executions[worker.key]
    sends = [m for m in data.messages[worker.key] if m.kind == "zmq" and m.direction == "send"]
    assert len(sends) == 1
