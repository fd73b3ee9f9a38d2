"""Property tests: the vector-clock order and impact against brute force.

A random execution is simulated step by step (local method runs, sends,
receives of pending messages), written as a run directory, and analysed. The
oracle is the transitive closure of program order plus the *true*
send → receive pairs of the simulation, and the definitions of DESIGN.md §5
applied to it literally.
"""

from __future__ import annotations

import tempfile
from collections import deque
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distea.analyzer.run import Run
from tests.analyzer.tracebuilder import TraceBuilder

METHODS = [f"app.m{i}" for i in range(4)]
Node = tuple[int, int]  # (process, clock)


@dataclass
class Sim:
    n: int
    builder: TraceBuilder
    clock: list[int] = field(default_factory=list)
    prev: dict[int, Node] = field(default_factory=dict)
    anc: dict[Node, frozenset[Node]] = field(default_factory=dict)
    first: dict[tuple[int, str], int] = field(default_factory=dict)
    last: dict[tuple[int, str], int] = field(default_factory=dict)
    recvs: set[Node] = field(default_factory=set)
    msgs: set[Node] = field(default_factory=set)
    # pending messages: (src, dst) -> deque of (send node,); streams: bytes
    mp: dict[tuple[int, int], deque[Node]] = field(default_factory=dict)
    tcp_sent: dict[tuple[int, int], list[tuple[int, int, Node]]] = field(default_factory=dict)
    tcp_read: dict[tuple[int, int], int] = field(default_factory=dict)
    shared: deque[tuple[Node, str]] = field(default_factory=deque)
    collectives: int = 0

    def event(self, p: int, *sources: Node) -> Node:
        self.clock[p] += 1
        node = (p, self.clock[p])
        anc: set[Node] = {node}
        if p in self.prev:
            anc |= self.anc[self.prev[p]]
        for s in sources:
            anc |= self.anc[s]
        self.anc[node] = frozenset(anc)
        self.prev[p] = node
        return node


def simulate(steps: list[tuple[int, int, int, int]], n: int, path: Path,
             shared_fps: bool) -> Sim:
    b = TraceBuilder(path)
    procs = [b.process(f"P{i}") for i in range(n)]
    sim = Sim(n, b, clock=[0] * n)
    for p_raw, action, x, y in steps:
        p = p_raw % n
        if action == 0:  # run a method
            name = METHODS[x % len(METHODS)]
            node = sim.event(p)
            if (p, name) not in sim.first:
                sim.first[(p, name)] = node[1]
                procs[p].first(name, node[1])
            sim.last[(p, name)] = node[1]
            procs[p].last(name, node[1])
        elif action == 1:  # send a message (mp) to another process
            q = (p + 1 + x % (n - 1)) % n
            node = sim.event(p)
            sim.msgs.add(node)
            procs[p].send(node[1], "mp", f"{p}>{q}")
            sim.mp.setdefault((p, q), deque()).append(node)
        elif action == 2:  # write bytes on a stream
            q = (p + 1 + x % (n - 1)) % n
            node = sim.event(p)
            sim.msgs.add(node)
            sent = sim.tcp_sent.setdefault((p, q), [])
            start = sent[-1][1] if sent else 0
            end = start + 1 + y % 5
            sent.append((start, end, node))
            procs[p].send(node[1], "tcp", f"{p}>{q}", start, end)
        elif action == 3:  # receive something pending for p
            pending = [("mp", k) for k, dq in sim.mp.items() if k[1] == p and dq]
            pending += [("tcp", k) for k, s in sim.tcp_sent.items()
                        if k[1] == p and s[-1][1] > sim.tcp_read.get(k, 0)]
            if not pending:
                continue
            kind, key = pending[x % len(pending)]
            if kind == "mp":
                send = sim.mp[key].popleft()
                node = sim.event(p, send)
                procs[p].recv(node[1], "mp", f"{key[0]}>{key[1]}")
            else:
                a = sim.tcp_read.get(key, 0)
                end_all = sim.tcp_sent[key][-1][1]
                bend = min(end_all, a + 1 + y % 7)
                carrier = next(nd for s, e, nd in sim.tcp_sent[key] if s <= bend - 1 < e)
                node = sim.event(p, carrier)
                sim.tcp_read[key] = bend
                procs[p].recv(node[1], "tcp", f"{key[0]}>{key[1]}", a, bend)
            sim.recvs.add(node)
            sim.msgs.add(node)
        elif action == 4 and not shared_fps:  # a torch all_reduce among every process
            sim.collectives += 1
            channel = f"g:{sim.collectives}"
            entries = []
            for q in range(n):
                node = sim.event(q)
                entries.append(node)
                procs[q].send(node[1], "torch", channel, op="all_reduce", role="all")
            for q in range(n):
                node = sim.event(q, *entries)
                procs[q].recv(node[1], "torch", channel, op="all_reduce", role="all")
                sim.recvs.add(node)
        elif action == 4 and shared_fps:  # put on a shared queue (identical payloads likely)
            node = sim.event(p)
            fp = "ab"[y % 2]
            sim.msgs.add(node)
            procs[p].send(node[1], "mp", "shared", fp=fp)
            sim.shared.append((node, fp))
        elif action == 5 and shared_fps and sim.shared:  # get from the shared queue
            send, fp = sim.shared.popleft()
            node = sim.event(p, send)
            procs[p].recv(node[1], "mp", "shared", fp=fp)
            sim.recvs.add(node)
            sim.msgs.add(node)
    b.write()
    return sim


def brute_impact(sim: Sim, query: str) -> set[tuple[int, str]]:
    sources = {(p, f) for (p, name), f in sim.first.items() if name == query}
    out = set()
    for p in range(sim.n):
        cands = [f for (pp, f) in sources if pp == p]
        cands += [c for (pp, c) in sim.recvs if pp == p and sim.anc[(pp, c)] & sources]
        if not cands:
            continue
        s = min(cands)
        out |= {(pp, name) for (pp, name), last in sim.last.items() if pp == p and last >= s}
    return out


def brute_deps(sim: Sim, target: str) -> set[tuple[int, str]]:
    ends = [(p, last) for (p, name), last in sim.last.items() if name == target]
    anc = set().union(*(sim.anc[e] for e in ends)) if ends else set()
    return {(p, name) for (p, name), f in sim.first.items() if (p, f) in anc}


def as_pairs(run: Run, pairs: object) -> set[tuple[int, str]]:
    return {(int(run.processes[k].role[1:]), m) for k, m in pairs}  # type: ignore[attr-defined]


step = st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 7), st.integers(0, 9))
shared_step = st.tuples(st.integers(0, 4), st.integers(0, 5), st.integers(0, 7),
                        st.integers(0, 9))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(2, 5), steps=st.lists(step, min_size=1, max_size=60))
def test_order_and_impact_match_brute_force(n: int, steps: list) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sim = simulate(steps, n, Path(tmp) / "run", shared_fps=False)
        run = Run.load(Path(tmp) / "run")
        order = run.order
        assert run.matching.ambiguous == 0 and run.matching.external == 0
        idx = {int(run.processes[k].role[1:]): order.index[k] for k in order.index}
        nodes = list(sim.anc)
        for a in nodes:
            for b in nodes:
                if a[0] == b[0]:
                    continue
                expected = a in sim.anc[b]
                got = order.happens_before(idx[a[0]], a[1], idx[b[0]], b[1])
                assert got == expected, (a, b)
        for q in METHODS:
            if not any(name == q for _, name in sim.first):
                continue
            res = run.impact(q)
            assert as_pairs(run, res.pairs()) == brute_impact(sim, q)
            assert res.size <= res.distia_size <= res.mcov_size
            assert as_pairs(run, run.deps(q).pairs()) == brute_deps(sim, q)
            for key, target in list(res.pairs())[:3]:
                check_explanation(sim, run, q, target, key)


def check_explanation(sim: Sim, run: Run, query: str, target: str, key: str) -> None:
    """The chain starts at a first start of the query, each message is a real one, each
    process is left no earlier than it was entered, and it ends at the target."""
    exp = run.explain(query, target, process=key)
    assert exp.impacted
    steps = exp.steps
    role = {k: int(info.role[1:]) for k, info in run.processes.items()}
    assert steps[0].action == "start" and steps[0].method == query
    assert sim.first[(role[steps[0].process], query)] == steps[0].clock
    assert steps[-1].action == "runs" and steps[-1].method == target
    assert steps[-1].process == key
    for a, b in pairwise(steps):
        pa, pb = role[a.process], role[b.process]
        if b.action == "recv":
            assert a.action == "send" and (pa, a.clock) in sim.anc[(pb, b.clock)]
        else:
            assert pa == pb and a.clock <= b.clock


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(2, 5), steps=st.lists(shared_step, min_size=1, max_size=60))
def test_uncertain_pairing_is_safe(n: int, steps: list) -> None:
    """With a shared queue and look-alike payloads, impact only grows, never shrinks."""
    with tempfile.TemporaryDirectory() as tmp:
        sim = simulate(steps, n, Path(tmp) / "run", shared_fps=True)
        run = Run.load(Path(tmp) / "run")
        m = run.matching
        assert m.matched + m.ambiguous + m.external == m.recvs
        for q in METHODS:
            if not any(name == q for _, name in sim.first):
                continue
            res = run.impact(q)
            assert as_pairs(run, res.pairs()) >= brute_impact(sim, q)
            assert as_pairs(run, run.deps(q).pairs()) >= brute_deps(sim, q)
