"""Deterministic run directories for the report and export tests.

``small_run``: a parameter server in five processes (launcher, server, two
workers, a monitor) where the impact of ``app.server.apply_update`` reaches
the workers through one message and the launcher through two, some methods
in every process ran too early to be impacted, and the DistIA baseline
wrongly reaches the monitor (a message sent before the query, read late).

``big_run``: 18 processes (a coordinator and 17 ranks in a tree) and 216
distinct methods in 12 modules, for "is it readable at scale".
"""

from __future__ import annotations

from pathlib import Path

from tests.analyzer.tracebuilder import TraceBuilder

SMALL_QUERY = "app.server.apply_update"
FINISHED = {"run_id": "synthetic", "finished_at": 1.0,
            "collector": {"batches": 1, "problems": [], "still_open": []}}


def small_run(path: Path) -> Path:
    b = TraceBuilder(path, meta=FINISHED)
    launcher = b.process("launcher")
    server = b.process("server", ppid=1, parent_token="t-server")
    w0 = b.process("worker", ppid=1, parent_token="t-w0", rank=0, world_size=2)
    w1 = b.process("worker", ppid=1, parent_token="t-w1", rank=1, world_size=2)
    monitor = b.process("monitor", ppid=1)

    # clocks are distinct within a process, as the tracer's are
    launcher.run("app.launcher.main", 1, 14)
    launcher.run("app.launcher.setup", 2, 2)
    launcher.run("app.launcher.spawn", 3, 6)
    launcher.send(4, "proc", "t-server", method="app.launcher.spawn")
    launcher.send(5, "proc", "t-w0", method="app.launcher.spawn")
    launcher.send(6, "proc", "t-w1", method="app.launcher.spawn")
    launcher.run("app.launcher.collect", 7, 8)
    launcher.recv(8, "tcp", "w0>l", 0, 4, method="app.launcher.collect")
    launcher.run("app.launcher.summarize", 9, 10)

    server.recv(1, "proc", "t-server")
    server.run("app.server.serve", 2, 20)
    server.run("app.server.init_weights", 3, 3)
    server.send(4, "zmq", "heartbeat", method="app.server.serve")
    server.run("app.server.receive_gradient", 5, 7)
    server.recv(6, "tcp", "w0>s", 0, 10, method="app.server.receive_gradient")
    server.recv(7, "tcp", "w1>s", 0, 10, method="app.server.receive_gradient")
    server.run("app.server.apply_update", 8, 10)
    server.run("app.server.reply", 11, 13)
    server.send(12, "tcp", "s>w0", 0, 10, method="app.server.reply")
    server.send(13, "tcp", "s>w1", 0, 10, method="app.server.reply")

    for w, name in ((w0, "w0"), (w1, "w1")):
        w.recv(1, "proc", f"t-{name}")
        w.run("app.worker.train", 2, 14)
        w.run("app.worker.load_shard", 3, 3)
        w.run("app.worker.compute_gradient", 4, 5)
        w.run("app.worker.push", 6, 7)
        w.send(7, "tcp", f"{name}>s", 0, 10, method="app.worker.push")
        w.run("app.worker.pull", 8, 9)
        w.recv(9, "tcp", f"s>{name}", 0, 10, method="app.worker.pull")
        w.run("app.worker.evaluate", 10, 11)
    w0.run("app.worker.report", 12, 13)
    w0.send(13, "tcp", "w0>l", 0, 4, method="app.worker.report")

    # a heartbeat sent before the query ran, read late: DistIA's Lamport test calls the
    # monitor impacted, happens-before does not
    monitor.run("app.monitor.watch", 1, 30)
    monitor.run("app.monitor.startup", 2, 2)
    monitor.recv(25, "zmq", "heartbeat", method="app.monitor.watch")
    monitor.run("app.monitor.log_stats", 26, 27)
    return b.write()


BIG_QUERY = "lib.m00.f00"
BIG_PROCESSES = 18
MODULES = 12
FUNCS = 18


def big_run(path: Path) -> Path:
    """A coordinator and 17 ranks; messages go down a binary tree and back up."""
    b = TraceBuilder(path, host="node", meta=FINISHED)
    n = BIG_PROCESSES
    procs = [b.process("coordinator")]
    for r in range(1, n):
        procs.append(b.process("trainer", ppid=1, rank=r, world_size=n - 1,
                               parent_token=f"t{r}"))
    clocks = [0] * n

    def tick(p: int) -> int:
        clocks[p] += 1
        return clocks[p]

    def run_some(p: int, phase: int) -> None:
        # each process runs 12 methods per phase, spread over the modules
        for k in range(12):
            idx = (p * 13 + phase * 12 + k) % (MODULES * FUNCS)
            name = f"lib.m{idx // FUNCS:02d}.f{idx % FUNCS:02d}"
            c = tick(p)
            procs[p].run(name, c, c + (k % 3))
            clocks[p] += k % 3

    for p in range(1, n):
        procs[0].send(tick(0), "proc", f"t{p}", method="lib.m00.spawn")
        procs[p].recv(tick(p), "proc", f"t{p}")
    procs[0].run("lib.m00.f00", tick(0), clocks[0] + 2)
    clocks[0] += 2
    for p in range(n):
        run_some(p, 0)
    # down the tree: parent (p-1)//2 → p, in order, so clocks grow with depth
    for p in range(1, n):
        parent = (p - 1) // 2
        procs[parent].send(tick(parent), "zmq", f"down{p}", method="lib.m01.scatter")
        procs[p].recv(tick(p), "zmq", f"down{p}", method="lib.m01.gather")
        run_some(p, 1)
    # back up
    for p in range(n - 1, 0, -1):
        parent = (p - 1) // 2
        procs[p].send(tick(p), "zmq", f"up{p}", method="lib.m02.reduce")
        procs[parent].recv(tick(parent), "zmq", f"up{p}", method="lib.m02.combine")
    for p in range(n):
        run_some(p, 2)
    return b.write()
