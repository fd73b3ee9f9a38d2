"""torch.distributed interception.

Three layers:

- ``test_real_*``: a real two-rank gloo program under ``distea run``; runs
  only where ``import torch`` works (skipped with "torch not importable"
  otherwise: the one skip of the channel tests);
- ``test_fake_*`` (in process): the sequencing logic against a **FAKE**
  ``torch.distributed`` — a plain module object injected into
  ``sys.modules``, not PyTorch — and a fake session that collects records;
- ``test_fake_package_under_distea_run``: a **FAKE** ``torch`` package
  written next to the program (its collectives do nothing) imported by two
  real "rank" processes under ``distea run``: proves the post-import hook,
  the per-group sequence alignment across processes and the analyzer's
  collective hub end to end.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distea.tracer.channels.torch_distributed import TorchDistributedChannel
from tests.channels.support import run_both
from tests.channels.torch_support import torch_or_skip

# -- real torch (gloo, CPU) -------------------------------------------------------

REAL = r'''
import gc, os, sys, tempfile
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

def before_all_reduce(): return 1
def after_all_reduce(): return 2
def before_broadcast(): return 3
def after_broadcast(): return 4
def before_send(): return 5
def before_recv(): return 6
def after_recv(): return 7

def rank_main(rank, world, store_path, results):
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(world)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world),
                            rank=rank, world_size=world)
    t = torch.ones(2) * (rank + 1)
    if rank == 1:
        before_all_reduce()
    dist.all_reduce(t)
    if rank == 0:
        after_all_reduce()
    b = torch.zeros(1) if rank else torch.ones(1) * 7
    if rank == 0:
        before_broadcast()
    work = dist.broadcast(b, src=0, async_op=True)
    work.wait()
    if rank == 1:
        after_broadcast()
    x = torch.zeros(1)
    if rank == 0:
        before_send()
        dist.send(torch.ones(1) * 5, dst=1)
        dist.isend(torch.ones(1) * 6, dst=1).wait()
    else:
        before_recv()
        dist.recv(x, src=0)
        dist.irecv(x, src=0).wait()
        after_recv()
    dist.barrier()
    results.put((rank, t.tolist(), b.tolist(), x.tolist()))
    gc.collect()  # a group left to a reference cycle: gloo aborts at exit
    dist.destroy_process_group()

if __name__ == "__main__":
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    with tempfile.TemporaryDirectory() as folder:
        ctx = mp.get_context("spawn")
        results = ctx.SimpleQueue()
        procs = [ctx.Process(target=rank_main, args=(r, 2, os.path.join(folder, "store"), results))
                 for r in range(2)]
        for p in procs: p.start()
        got = sorted(results.get() for _ in procs)
        for p in procs: p.join(60)
        print(got)
'''


def test_real_gloo_collectives_and_point_to_point(program) -> None:
    torch_or_skip()
    script = program("torch_real.py", REAL)
    traced = run_both(script, timeout=120)
    assert traced.errors() == 0
    events = traced.events("torch")
    ranks = {traced.run.processes[e.process].rank for e in events}
    assert ranks == {0, 1}
    channels_of: dict[str, set[str]] = {}
    for e in events:
        if e.meta and "role" in e.meta:
            channels_of.setdefault(e.meta["op"], set()).add(e.channel)
    # one GROUP:SEQ per call, the same in both ranks (init may add a barrier of its own)
    assert len(channels_of["all_reduce"]) == 1 and len(channels_of["broadcast"]) == 1
    assert channels_of["all_reduce"] != channels_of["broadcast"]
    p2p = traced.edges("torch")
    assert len([1 for s, r in p2p if s.channel == r.channel == "p2p:WORLD:0>1:0"]) == 2
    impacted = traced.impacted("torch_real.before_all_reduce")
    assert "torch_real.after_all_reduce" in impacted
    assert "torch_real.after_broadcast" in traced.impacted("torch_real.before_broadcast")
    impacted = traced.impacted("torch_real.before_send")
    assert "torch_real.after_recv" in impacted and "torch_real.before_recv" not in impacted


# -- a FAKE torch.distributed, in process ----------------------------------------


class FakeSession:
    """Collects what the channel records (stands in for TracerSession)."""

    def __init__(self) -> None:
        self.records: list[tuple[str, str, int, dict[str, Any] | None]] = []
        self.errors = 0
        self.finished = False

    def tracer_error(self) -> None:
        self.errors += 1

    def send(self, kind: str, channel: str, start: int, end: int,
             meta: dict[str, Any] | None = None) -> None:
        self.records.append(("send", channel, start, meta))

    def recv(self, kind: str, channel: str, start: int, end: int,
             meta: dict[str, Any] | None = None) -> None:
        self.records.append(("recv", channel, start, meta))


def fake_dist(rank: int) -> types.ModuleType:
    """A FAKE torch.distributed: the real signatures, no communication at all."""
    dist = types.ModuleType("torch.distributed")

    class Work:
        def __init__(self) -> None:
            self.waited = 0

        def wait(self, timeout: Any = None) -> bool:
            self.waited += 1
            return True

    class Group:
        def __init__(self, name: str, ranks: list[int]) -> None:
            self.group_name, self.ranks = name, ranks

    world = Group("0", [0, 1])

    class GroupMember:
        WORLD = world

    class P2POp:
        def __init__(self, op: Any, tensor: Any, peer: int, group: Any = None,
                     tag: int = 0) -> None:
            self.op, self.tensor, self.peer, self.group, self.tag = op, tensor, peer, group, tag

    def done(async_op: bool) -> Any:
        return Work() if async_op else None

    def all_reduce(tensor, op=None, group=None, async_op=False):
        return done(async_op)

    def all_gather(tensor_list, tensor, group=None, async_op=False):
        return done(async_op)

    def all_gather_object(object_list, obj, group=None):
        dist.all_gather([], None, group=group)  # nested, as torch does
        dist.all_gather([], None, group=group)

    def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
        return done(async_op)

    def reduce(tensor, dst=None, op=None, group=None, async_op=False, group_dst=None):
        return done(async_op)

    def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
        return done(async_op)

    def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False,
                group_src=None):
        return done(async_op)

    def barrier(group=None, async_op=False, device_ids=None):
        return done(async_op)

    def send(tensor, dst=None, group=None, tag=0, group_dst=None):
        return None

    def recv(tensor, src=None, group=None, tag=0, group_src=None):
        return 1 - rank if src is None else src

    def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
        return Work()

    def irecv(tensor, src=None, group=None, tag=0, group_src=None):
        return Work()

    def batch_isend_irecv(p2p_op_list):
        return [op.op(op.tensor, op.peer, op.group, op.tag) for op in p2p_op_list]

    def new_group(ranks):
        return Group("1", list(ranks))

    for value in (Work, GroupMember, P2POp, all_reduce, all_gather, all_gather_object,
                  broadcast, reduce, gather, scatter, barrier, send, recv, isend, irecv,
                  batch_isend_irecv, new_group):
        setattr(dist, value.__name__, value)
    dist.get_rank = lambda group=None: rank
    dist.get_global_rank = lambda group, group_rank: group.ranks[group_rank]
    dist.get_process_group_ranks = lambda group: group.ranks
    dist.is_available = lambda: True
    dist.distributed_c10d = dist
    dist.group = GroupMember
    return dist


@pytest.fixture
def fake_torch() -> Iterator[types.ModuleType]:
    """Inject the FAKE torch / torch.distributed into sys.modules, and take it out again."""
    saved = {name: sys.modules.get(name) for name in ("torch", "torch.distributed")}
    package = types.ModuleType("torch")
    package.distributed = fake_dist(0)  # type: ignore[attr-defined]
    sys.modules["torch"], sys.modules["torch.distributed"] = package, package.distributed
    yield package.distributed  # type: ignore[attr-defined]
    for name, module in saved.items():
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module


def program_of_rank(dist: Any, rank: int) -> None:
    """What every rank runs, in the same order (as torch requires)."""
    t = object()
    dist.all_reduce(t)
    work = dist.broadcast(t, src=0, async_op=True)
    dist.reduce(t, dst=1)
    sub = dist.new_group([0, 1])
    dist.all_gather_object([], t, group=sub)
    dist.barrier()
    dist.gather(t, group=sub, group_dst=0)
    work.wait()
    if rank == 0:
        dist.send(t, dst=1)
        dist.isend(t, dst=1, tag=3).wait()
        ops = [dist.P2POp(dist.isend, t, 1), dist.P2POp(dist.irecv, t, 1)]
    else:
        dist.recv(t)
        pending = dist.irecv(t, src=0, tag=3)
        pending.wait()
        ops = [dist.P2POp(dist.irecv, t, 0), dist.P2POp(dist.isend, t, 0)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()


def run_fake_rank(rank: int) -> list[tuple[str, str, int, dict[str, Any] | None]]:
    session = FakeSession()
    channel = TorchDistributedChannel()
    channel.session = session  # type: ignore[assignment]
    dist = fake_dist(rank)
    channel.patch_module(dist)
    try:
        program_of_rank(dist, rank)
    finally:
        channel.uninstall()
    assert session.errors == 0
    return session.records


def test_fake_collectives_are_numbered_per_group_in_call_order() -> None:
    rank0, rank1 = run_fake_rank(0), run_fake_rank(1)
    collective0 = [(d, c, m["op"], m["role"]) for d, c, _, m in rank0 if m and "role" in m]
    assert collective0 == [
        ("send", "WORLD:0", "all_reduce", "all"), ("recv", "WORLD:0", "all_reduce", "all"),
        ("send", "WORLD:1", "broadcast", "root"),
        ("send", "WORLD:2", "reduce", "leaf"),
        # all_gather_object counted once (its inner all_gathers are torch's own calls)
        ("send", "1:0", "all_gather_object", "all"), ("recv", "1:0", "all_gather_object", "all"),
        ("send", "WORLD:3", "barrier", "all"), ("recv", "WORLD:3", "barrier", "all"),
        ("recv", "1:1", "gather", "root"),
    ]
    collective1 = [(d, c, m["role"]) for d, c, _, m in rank1 if m and "role" in m]
    assert collective1 == [
        ("send", "WORLD:0", "all"), ("recv", "WORLD:0", "all"),
        ("recv", "WORLD:2", "root"),
        ("send", "1:0", "all"), ("recv", "1:0", "all"),
        ("send", "WORLD:3", "all"), ("recv", "WORLD:3", "all"),
        ("send", "1:1", "leaf"),
        # the async broadcast's receive is recorded at work.wait(), after the gather
        ("recv", "WORLD:1", "leaf"),
    ]


def test_fake_point_to_point_channels_line_up() -> None:
    rank0, rank1 = run_fake_rank(0), run_fake_rank(1)
    sends = [(c, i) for d, c, i, m in rank0 + rank1 if d == "send" and m and "role" not in m]
    recvs = [(c, i) for d, c, i, m in rank0 + rank1 if d == "recv" and m and "role" not in m]
    assert sorted(sends) == sorted(recvs) == sorted([
        ("p2p:WORLD:0>1:0", 0), ("p2p:WORLD:0>1:3", 0), ("p2p:WORLD:0>1:0", 1),
        ("p2p:WORLD:1>0:0", 0)])


def test_fake_async_receive_waits_for_wait() -> None:
    session = FakeSession()
    channel = TorchDistributedChannel()
    channel.session = session  # type: ignore[assignment]
    dist = fake_dist(1)
    raw_wait = vars(dist.Work)["wait"]
    channel.patch_module(dist)
    assert channel.wait_patched and vars(dist.Work)["wait"] is not raw_wait
    try:
        work = dist.all_reduce(object(), async_op=True)
        assert [r[0] for r in session.records] == ["send"]
        work.wait()
        work.wait()  # a second wait records nothing more
        assert [r[0] for r in session.records] == ["send", "recv"]
        assert work.waited == 2
    finally:
        channel.uninstall()
    assert dist.all_reduce.__name__ == "all_reduce" and not hasattr(dist.all_reduce,
                                                                    "__wrapped__")
    assert vars(dist.Work)["wait"] is raw_wait


def test_fake_work_class_that_refuses_patching_records_receives_early() -> None:
    """Like a C extension type: Work.wait cannot be replaced."""
    session = FakeSession()
    channel = TorchDistributedChannel()
    channel.session = session  # type: ignore[assignment]
    dist = fake_dist(0)

    class Frozen(type):
        def __setattr__(cls, name: str, value: Any) -> None:
            raise TypeError("can't set attributes of this extension type")

    class Work(metaclass=Frozen):
        def wait(self) -> bool:
            return True

    dist.Work = Work
    channel.patch_module(dist)
    try:
        assert not channel.wait_patched
        dist.all_reduce(object(), async_op=True)
        assert [r[0] for r in session.records] == ["send", "recv"]
    finally:
        channel.uninstall()


def test_fake_module_in_sys_modules_is_patched_on_install(fake_torch) -> None:
    session = FakeSession()
    channel = TorchDistributedChannel()
    channel.install(session)  # type: ignore[arg-type]
    try:
        assert hasattr(fake_torch.all_reduce, "__wrapped__")
        fake_torch.barrier()
        assert [(d, c) for d, c, _, _ in session.records] == [("send", "WORLD:0"),
                                                              ("recv", "WORLD:0")]
    finally:
        channel.uninstall()
    assert not hasattr(fake_torch.all_reduce, "__wrapped__")


# -- a FAKE torch package under a real distea run ---------------------------------

FAKE_PACKAGE = '''"""FAKE torch for distea's tests: NOT PyTorch. Collectives do nothing."""
'''

FAKE_DISTRIBUTED = '''"""FAKE torch.distributed for distea's tests: NOT PyTorch; no I/O."""
import os

class Work:
    def wait(self, timeout=None):
        return True

class GroupMember:
    WORLD = None

def is_available():
    return True

def get_rank(group=None):
    return int(os.environ["RANK"])

def all_reduce(tensor, op=None, group=None, async_op=False):
    return Work() if async_op else None

def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    return Work() if async_op else None

def barrier(group=None, async_op=False, device_ids=None):
    return None
'''

FAKE_APP = r'''
import os, subprocess, sys

def before_collective(): return 1
def after_collective(): return 2
def rank_only_early(): return 3

def rank(r):
    import torch.distributed as dist  # the FAKE package next to this file
    if r == 1:
        before_collective()
    else:
        rank_only_early()
    dist.all_reduce([1.0])
    dist.broadcast([2.0], src=0, async_op=True).wait()
    if r == 0:
        after_collective()
    dist.barrier()

if __name__ == "__main__":
    if len(sys.argv) > 1:
        rank(int(sys.argv[1]))
    else:
        env = dict(os.environ, WORLD_SIZE="2")
        procs = [subprocess.Popen([sys.executable, __file__, str(r)], env=dict(env, RANK=str(r)))
                 for r in range(2)]
        print([p.wait(timeout=30) for p in procs])
'''


def test_fake_package_under_distea_run(program) -> None:
    script = program("torch_fake_app.py", FAKE_APP)
    package = script.parent / "torch"
    (package / "distributed").mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_PACKAGE)
    (package / "distributed" / "__init__.py").write_text(FAKE_DISTRIBUTED)
    traced = run_both(script)
    assert traced.stdout == "[0, 0]\n" and traced.errors() == 0
    by_rank: dict[int, list[tuple[str, str, str]]] = {}
    for event in traced.events("torch"):
        rank = traced.run.processes[event.process].rank
        by_rank.setdefault(rank, []).append(
            (event.direction, event.channel, event.meta["role"]))
    assert by_rank[0] == [("send", "WORLD:0", "all"), ("recv", "WORLD:0", "all"),
                          ("send", "WORLD:1", "root"),
                          ("send", "WORLD:2", "all"), ("recv", "WORLD:2", "all")]
    assert by_rank[1] == [("send", "WORLD:0", "all"), ("recv", "WORLD:0", "all"),
                          ("recv", "WORLD:1", "leaf"),
                          ("send", "WORLD:2", "all"), ("recv", "WORLD:2", "all")]
    counts = traced.run.matching.by_kind["torch"]
    assert counts.matched == counts.recvs == 5 and counts.external == 0
    impacted = traced.impacted("torch_fake_app.before_collective")
    assert "torch_fake_app.after_collective" in impacted
    assert "torch_fake_app.rank_only_early" not in impacted


def test_no_torch_costs_nothing(tmp_path: Path) -> None:
    """Without torch.distributed imported, the channel only waits for the import."""
    from distea.tracer.channels.importhooks import IMPORT_HOOKS

    session = FakeSession()
    channel = TorchDistributedChannel()
    saved = sys.modules.pop("torch.distributed", None)
    try:
        channel.install(session)  # type: ignore[arg-type]
        assert "torch.distributed" in IMPORT_HOOKS.watched
        assert channel.dist is None and not session.records
    finally:
        channel.uninstall()
        if saved is not None:
            sys.modules["torch.distributed"] = saved
    assert "torch.distributed" not in IMPORT_HOOKS.watched
