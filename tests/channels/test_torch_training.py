"""Real training programs under ``torchrun``, traced: DDP and FSDP2 on CPU (gloo).

The programs are written the way pytorch/examples writes them (a Trainer
with ``_run_batch`` and a rank-0-only ``_save_snapshot``). Their collectives
are issued from C++ (DDP's reducer) and from FSDP2's own calls, which the
tracer sees through process-group hooks. The oracles are independent of the
tracer: each rank prints how many operations its process group issued (the
group's own sequence number), and the expected impact sets are derived by
hand from the program text.

Without torch these tests skip with the reason; with ``DISTEA_REQUIRE_TORCH=1``
(CI) a missing torch fails them instead.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import distea
from tests.channels.torch_support import torch_or_skip
from tests.tracing import DISTEA, REPO, run_traced, run_untraced

COMMON = r'''
import gc
import os
import sys
import torch
import torch.distributed as dist
from torch import nn


def say(text):
    """One write per line: two ranks share the output."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def issued(rank):
    """The oracle: what the default group itself counted (one per operation)."""
    group = dist.distributed_c10d._get_default_group()
    say(f"rank {rank} issued {group._get_sequence_number_for_group()}")


def load_data(rank):
    generator = torch.Generator().manual_seed(rank)
    return [(torch.randn(4, 8, generator=generator), torch.randn(4, 1, generator=generator))
            for _ in range(2)]
'''

DDP = COMMON + r'''
from torch.nn.parallel import DistributedDataParallel as DDP

if os.environ.get("HIDE_GROUP_HOOKS"):  # stands in for a torch without process-group hooks
    dist.ProcessGroup.register_pre_hook = None


class Trainer:
    def __init__(self, model, data, rank):
        self.rank = rank
        self.model = DDP(model)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.data = data

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        loss = nn.functional.mse_loss(self.model(source), targets)
        loss.backward()
        self.optimizer.step()

    def _save_snapshot(self, epoch):
        torch.save(self.model.module.state_dict(), os.devnull)
        say(f"epoch {epoch}: snapshot saved")

    def train(self, epochs):
        for epoch in range(epochs):
            for source, targets in self.data:
                self._run_batch(source, targets)
            if self.rank == 0:
                self._save_snapshot(epoch)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    Trainer(nn.Linear(8, 1), load_data(rank), rank).train(2)
    issued(rank)
    gc.collect()  # a group left to a reference cycle: gloo aborts at exit
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
'''

FSDP2 = COMMON + r'''
from torch.distributed.fsdp import fully_shard


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(2))
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.head(x)


def build_model():
    model = Net()
    for layer in model.layers:
        fully_shard(layer)
    return fully_shard(model)


def train_step(model, optimizer, source, targets):
    optimizer.zero_grad()
    nn.functional.mse_loss(model(source), targets).backward()
    optimizer.step()


def checkpoint(step):
    say(f"step {step}: checkpoint")


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = build_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, (source, targets) in enumerate(load_data(rank) * 2):
        train_step(model, optimizer, source, targets)
        if rank == 0:
            checkpoint(step)
    issued(rank)
    gc.collect()  # a group left to a reference cycle: gloo aborts at exit
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
'''


def torchrun(script: Path) -> list[str]:
    runner = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    assert runner is not None, "torchrun is installed with torch"
    return [runner, "--standalone", "--nproc_per_node=2", script.name]


def environment(**extra: str) -> dict[str, str]:
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", **extra)
    env.pop("RANK", None)
    env.pop("WORLD_SIZE", None)
    return env


def sorted_lines(text: str) -> list[str]:
    """Two ranks print concurrently: compare the lines, not their interleaving."""
    return sorted(text.splitlines())


def traced_training(program: object, name: str, source: str,
                    **env: str) -> tuple[distea.Run, str, Path]:
    """Run under torchrun untraced and traced: same status, same output.

    Returns the run, the traced output and the program's folder."""
    script = program(name, source)  # type: ignore[operator]
    args = torchrun(script)
    plain = run_untraced(args, script.parent, timeout=180, env=environment(**env))
    assert plain.returncode == 0, plain.stderr[-3000:]
    traced = run_traced(args, script.parent, script.parent.parent / "run", timeout=240,
                        env=environment(**env))
    assert traced.result.returncode == plain.returncode, traced.result.stderr[-3000:]
    assert sorted_lines(traced.result.stdout) == sorted_lines(plain.stdout)
    run = distea.load(traced.run_dir)
    assert all(p.complete for p in run.processes.values()), run.problems
    assert sum(p.tracer_errors for p in run.processes.values()) == 0
    return run, traced.result.stdout, script.parent


def issued_by_rank(stdout: str) -> int:
    """Operations the default group issued, as each rank printed it (the same on both)."""
    issued = {int(r): int(n) for r, n in re.findall(r"rank (\d) issued (\d+)", stdout)}
    assert set(issued) == {0, 1} and issued[0] == issued[1], issued
    return issued[0]


def rank_keys(run: distea.Run) -> dict[int, str]:
    keys = {p.rank: k for k, p in run.processes.items() if p.rank is not None}
    assert sorted(keys) == [0, 1], [p.role for p in run.processes.values()]
    assert {run.processes[k].role for k in keys.values()} == {"rank 0/2", "rank 1/2"}
    return keys  # type: ignore[return-value]


def check_every_collective_matched(run: distea.Run, issued: int) -> None:
    """One hub per operation the group issued, with a cross-rank edge in each direction."""
    m = run.matching
    keys = rank_keys(run)
    assert m.by_kind["torch"].ambiguous == 0 and m.by_kind["torch"].external == 0
    collectives: dict[str, set[str]] = {}
    for ev in m.events:
        if ev.kind == "torch" and ev.meta and ev.meta.get("role"):
            collectives.setdefault(ev.channel, set()).add(ev.process)
    assert len(collectives) == issued  # every operation the group counted, no more
    crossing: dict[str, set[tuple[str, str]]] = {}
    for s, r in m.certain_pairs():
        if m.events[r].kind == "torch":
            crossing.setdefault(m.events[r].channel, set()).add(
                (m.events[s].process, m.events[r].process))
    for channel in collectives:
        assert crossing.get(channel), f"{channel}: no cross-rank message matched"
    all_reduces = [c for c, pairs in crossing.items()
                   if pairs == {(keys[0], keys[1]), (keys[1], keys[0])}]
    assert all_reduces, "no collective ordered both ranks"


def impacted_in(run: distea.Run, query: str, rank: int) -> set[str]:
    result = run.impact(query)
    return set(result.impacted.get(rank_keys(run)[rank], ()))


def test_ddp_under_torchrun(program) -> None:
    torch_or_skip()
    run, stdout, folder = traced_training(program, "ddp_train.py", DDP)
    check_every_collective_matched(run, issued_by_rank(stdout))
    keys = rank_keys(run)
    # DDP: the shape check (all_gather), the parameter broadcast, one gradient
    # all_reduce per step (2 epochs x 2 batches): issued from C++ by the reducer.
    ops = {e.meta.get("op") for e in run.messages[keys[1]] if e.kind == "torch" and e.meta}
    assert {"allgather", "broadcast", "allreduce"} <= ops, ops
    allreduces = {e.channel for e in run.messages[keys[1]]
                  if e.kind == "torch" and e.meta and e.meta["op"] == "allreduce"}
    assert len(allreduces) == 4
    # Hand-derived: _save_snapshot runs on rank 0 only, after epoch 0; rank 1 then
    # exchanges gradients with rank 0 in epoch 1, so its later _run_batch and train
    # are impacted; load_data and Trainer.__init__ ran on rank 1 only before.
    rank1 = impacted_in(run, "ddp_train.Trainer._save_snapshot", 1)
    assert {"ddp_train.Trainer._run_batch", "ddp_train.Trainer.train", "ddp_train.main",
            "ddp_train.issued"} <= rank1
    assert not rank1 & {"ddp_train.load_data", "ddp_train.Trainer.__init__"}
    explanation = run.explain("ddp_train.Trainer._save_snapshot",
                              "ddp_train.Trainer._run_batch", process=keys[1])
    assert explanation.impacted
    assert any(s.action == "recv" and s.detail.startswith("torch ") for s in explanation.steps)
    assert not [p for p in run.problems if "torch.distributed" in p]
    explain = run_untraced([str(DISTEA), "explain", "ddp_train.Trainer._save_snapshot",
                            "ddp_train.Trainer._run_batch", "--process", "rank 1/2",
                            "--run", str(run.path)],
                           folder, timeout=120)
    assert explain.returncode == 0, explain.stderr
    assert "receives on torch WORLD:" in explain.stdout, explain.stdout


def test_fsdp2_under_torchrun(program) -> None:
    torch_or_skip()
    run, stdout, _ = traced_training(program, "fsdp_train.py", FSDP2)
    check_every_collective_matched(run, issued_by_rank(stdout))
    keys = rank_keys(run)
    ops = {e.meta.get("op") for e in run.messages[keys[1]] if e.kind == "torch" and e.meta}
    # FSDP2 gathers parameters and reduce-scatters gradients with its own calls.
    assert ops & {"all_gather_single", "allgather_base", "all_gather_into_tensor"}, ops
    assert ops & {"reduce_scatter_single", "reduce_scatter_base", "reduce_scatter_tensor"}, ops
    rank1 = impacted_in(run, "fsdp_train.checkpoint", 1)
    assert {"fsdp_train.train_step", "fsdp_train.Net.forward", "fsdp_train.issued"} <= rank1
    assert not rank1 & {"fsdp_train.load_data", "fsdp_train.build_model"}
    assert not [p for p in run.problems if "torch.distributed" in p]


def test_unobservable_collectives_are_a_problem(program) -> None:
    """A group without hooks: DDP's reducer is invisible, and every query says so."""
    torch_or_skip()
    script = program("ddp_hidden.py", DDP)
    traced = run_traced(torchrun(script), script.parent, script.parent.parent / "run",
                        timeout=240, env=environment(HIDE_GROUP_HOOKS="1"))
    assert traced.result.returncode == 0, traced.result.stderr[-3000:]
    run = distea.load(traced.run_dir)
    problems = [p for p in run.problems if "torch.distributed" in p]
    assert {p.split(" (pid")[0] for p in problems} == {"rank 0/2", "rank 1/2"}, run.problems
    assert all("not seen" in p and "hooks" in p for p in problems), problems
    shown = run_untraced([str(DISTEA), "impact", "ddp_hidden.Trainer._save_snapshot",
                          "--run", str(traced.run_dir)], script.parent, timeout=120)
    assert "torch.distributed" in shown.stdout, shown.stdout


def test_torch_ddp_sample_checkpoint_reaches_other_ranks(tmp_path: Path) -> None:
    """The sample's rank-0-only checkpoint against its hand-derived impact set."""
    torch_or_skip()
    args = [sys.executable, "-m", "sample_systems.torch_ddp", "--workers", "2", "--steps", "7"]
    traced = run_traced(args, REPO, tmp_path / "run", timeout=240, env=environment())
    assert traced.result.returncode == 0, traced.result.stderr[-3000:]
    assert "2 ranks agree on the final weights" in traced.result.stdout
    run = distea.load(traced.run_dir)
    trainer = "sample_systems.torch_ddp.trainer"
    rank1 = impacted_in(run, f"{trainer}.save_checkpoint", 1)
    # save_checkpoint runs on rank 0 after step 0 (and 5); rank 1 meets rank 0
    # again in step 1's gradient all-reduce, inside train_step's backward.
    assert {f"{trainer}.train_step", f"{trainer}.apply_update", f"{trainer}.average_loss",
            f"{trainer}.run_worker", f"{trainer}.train"} <= rank1
    assert not rank1 & {f"{trainer}.load_shard", f"{trainer}.build_model",
                        f"{trainer}.init_distributed", f"{trainer}.set_rank_environment"}
    assert run.matching.by_kind["torch"].ambiguous == 0
    assert not [p for p in run.problems if "torch.distributed" in p]
    # every external receive explained (ldconfig's output and exits, gloo's own pair
    # connections covered by the recorded collectives, a reused temp-file inode): none left
    assert run.problems == []


USER_C_BYTES = COMMON + r'''
import ctypes
import socket


def c_exchange(rank):
    """A connection of the program's own between the ranks, its bytes moved in C."""
    libc = ctypes.CDLL(None, use_errno=True)
    server = None
    if rank == 0:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(1)
    port = [server.getsockname()[1] if server else None]
    dist.broadcast_object_list(port, src=0)
    if rank == 0:
        conn, _ = server.accept()
        assert libc.send(conn.fileno(), ctypes.create_string_buffer(b"weights!"), 8, 0) == 8
        with open("user_port", "w") as f:  # for the test: the run's own port
            f.write(str(port[0]))
    else:
        conn = socket.create_connection(("127.0.0.1", port[0]))
        buf = ctypes.create_string_buffer(8)
        got = 0
        while got < 8:
            got += libc.recv(conn.fileno(), ctypes.byref(buf, got), 8 - got, 0)
    dist.barrier()
    conn.close()


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    c_exchange(rank)
    total = torch.ones(1)
    dist.all_reduce(total)
    issued(rank)
    gc.collect()  # a group left to a reference cycle: gloo aborts at exit
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
'''


def test_bytes_a_program_moves_in_c_between_ranks_stay_a_problem(program) -> None:
    # the ranks' own connection was opened after their process group was made: no group
    # claims it, so its unseen bytes are a problem line, never a covered note
    torch_or_skip()
    run, _, folder = traced_training(program, "user_c.py", USER_C_BYTES)
    port = (folder / "user_port").read_text()  # written by the traced run, the last one
    mine = [p for p in run.problems if f":{port}" in p and "not seen by the tracer" in p]
    assert len(mine) == 2, run.problems  # rank 0 sent 8 bytes, rank 1 received them


RPC = r'''
import os
import socket
import sys

import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp


class ParameterServer:
    def __init__(self):
        self.weights = torch.zeros(4)
        self.updates = 0

    def apply_gradient(self, gradient):
        self.weights -= 0.1 * gradient
        self.updates += 1
        return self.updates


SERVER = None


def get_server():
    global SERVER
    if SERVER is None:
        SERVER = ParameterServer()
    return SERVER


def fetch_weights():
    return get_server().weights.clone()


def push_gradient(gradient):
    return get_server().apply_gradient(gradient)


def make_report(tag):
    return f"{tag}: {get_server().updates} updates"


def compute_gradient(weights, step):
    return weights - torch.full((4,), float(step))


def train(steps):
    for step in range(steps):
        weights = rpc.rpc_sync("ps", fetch_weights)
        gradient = compute_gradient(weights, step)
        rpc.rpc_async("ps", push_gradient, args=(gradient,)).wait()
    report = rpc.remote("ps", make_report, args=("trainer",))
    print(report.to_here(), flush=True)
    # a builtin operator travels serialized in C++: distea must say it missed it
    print(rpc.rpc_sync("ps", torch.add, args=(torch.ones(1), 1)), flush=True)


def run(rank, world_size, port):
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(world_size)
    options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}",
                                              _transports=["uv"])
    name = "ps" if rank == 0 else "trainer"
    rpc.init_rpc(name, rank=rank, world_size=world_size, rpc_backend_options=options)
    if rank == 1:
        train(3)
    rpc.shutdown()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    mp.spawn(run, args=(2, free_port()), nprocs=2)
    sys.exit(0)
'''


def test_rpc_parameter_server(program) -> None:
    """rpc_sync, rpc_async and remote: call -> the callee's run -> reply, paired exactly."""
    torch_or_skip()
    script = program("rpc_ps.py", RPC)
    args = [sys.executable, script.name]
    plain = run_untraced(args, script.parent, timeout=240, env=environment())
    assert plain.returncode == 0, plain.stderr[-3000:]
    traced = run_traced(args, script.parent, script.parent.parent / "run", timeout=300,
                        env=environment())
    assert traced.result.returncode == 0, traced.result.stderr[-3000:]
    assert sorted_lines(traced.result.stdout) == sorted_lines(plain.stdout)
    run = distea.load(traced.run_dir)
    keys = rank_keys(run)
    ps, trainer = keys[0], keys[1]
    m = run.matching
    assert m.by_kind["torch"].ambiguous == 0
    pairs = [(m.events[s].process, m.events[r].process) for s, r in m.edges
             if m.events[r].kind == "torch" and m.events[r].channel == "rpc"]
    # 3 rpc_sync + 3 rpc_async + 1 remote (+ its to_here) with Python payloads, each a
    # call and a reply; shutdown's own RPCs add more
    assert pairs.count((trainer, ps)) >= 8 and pairs.count((ps, trainer)) >= 8, pairs
    # Hand-derived: compute_gradient runs on the trainer only; its gradient is applied on
    # the server, whose later replies reach the trainer; the server was built before.
    on_ps = impacted_in(run, "rpc_ps.compute_gradient", 0)
    assert {"rpc_ps.push_gradient", "rpc_ps.ParameterServer.apply_gradient",
            "rpc_ps.make_report"} <= on_ps
    assert "rpc_ps.ParameterServer.__init__" not in on_ps
    explanation = run.explain("rpc_ps.compute_gradient", "rpc_ps.ParameterServer.apply_gradient",
                              process=ps)
    assert any(s.action == "recv" and s.detail == "torch rpc" for s in explanation.steps), (
        explanation.steps)
    problems = [p for p in run.problems if "torch.distributed" in p]
    assert len(problems) == 1 and problems[0].startswith("rank 1/2"), run.problems
    assert "1 RPC calls of builtin operators" in problems[0]
