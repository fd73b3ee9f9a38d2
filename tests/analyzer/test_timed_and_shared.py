"""Semaphores, signals and shared memory ordered by same-host time; expectations by hand.

Times (``t``) are small made-up CLOCK_MONOTONIC values; every expectation is
worked out from the rules of docs/semantics.md next to the trace.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from benchmarks.analysis_scale import write_synthetic_run
from distea.analyzer.matching import Matching
from distea.analyzer.order import Order
from distea.analyzer.run import Run
from distea.analyzer.shared import CONTENT_KINDS, KnownTimes, Timeline
from tests.analyzer.conftest import impacted, load
from tests.analyzer.test_matching import pairs
from tests.analyzer.tracebuilder import TraceBuilder


def test_acquire_follows_each_other_process_latest_release_before_it(tb: TraceBuilder) -> None:
    a, b, c = tb.process("A"), tb.process("B"), tb.process("C")
    b.recv(1, "sem", "h:sem:/mp-1", t=50)  # the initial count lets it through
    a.send(2, "sem", "h:sem:/mp-1", t=100)
    b.recv(3, "sem", "h:sem:/mp-1", t=200)  # after A's release at 100
    a.send(4, "sem", "h:sem:/mp-1", t=300)
    c.recv(5, "sem", "h:sem:/mp-1", t=350)  # A's latest before 350 is clock 4
    b.send(6, "sem", "h:sem:/mp-1", t=400)
    c.recv(7, "sem", "h:sem:/mp-1", t=500)  # A's clock 4 and B's clock 6
    run = load(tb)
    assert pairs(run) == {(("A", 2), ("B", 3)), (("A", 4), ("C", 5)),
                          (("A", 4), ("C", 7)), (("B", 6), ("C", 7))}
    counts = run.matching.by_kind["sem"]
    assert (counts.matched, counts.external, counts.ambiguous) == (4, 0, 0)


def test_latest_release_is_by_clock_not_by_time(tb: TraceBuilder) -> None:
    # two threads of A: the release stamped later (clock 3) read its time first
    a, b = tb.process("A"), tb.process("B")
    a.send(2, "sem", "h:sem:x", t=120, thread=1)
    a.send(3, "sem", "h:sem:x", t=110, thread=2)
    b.recv(1, "sem", "h:sem:x", t=130)
    assert pairs(load(tb)) == {(("A", 3), ("B", 1))}


def test_signal_reaches_its_target_pid_or_group(tb: TraceBuilder) -> None:
    p, q = tb.process("P"), tb.process("Q")
    b, c, d = tb.process("B", pid=11), tb.process("C", pid=12), tb.process("D", pid=13)
    p.send(1, "signal", "h:signal:10", t=100, pid=11)
    q.send(1, "signal", "h:signal:10", t=200, pgid=7)
    b.recv(1, "signal", "h:signal:10", t=150, pid=11, pgid=7)  # P's only
    c.recv(1, "signal", "h:signal:10", t=250, pid=12, pgid=7)  # Q's group kill only
    b.recv(2, "signal", "h:signal:10", t=300, pid=11, pgid=7)  # both
    d.recv(1, "signal", "h:signal:10", t=400, pid=13, pgid=99)  # nobody traced sent it
    run = load(tb)
    assert pairs(run) == {(("P", 1), ("B", 1)), (("Q", 1), ("C", 1)),
                          (("P", 1), ("B", 2)), (("Q", 1), ("B", 2))}
    counts = run.matching.by_kind["signal"]
    assert (counts.matched, counts.external, counts.unmatched_sends) == (3, 1, 0)


def test_wait_of_a_killed_process_follows_the_fatal_signals(tb: TraceBuilder) -> None:
    parent, killer = tb.process("parent"), tb.process("killer")
    tb.process("child", pid=11)  # killed: recorded no exit
    killer.send(1, "signal", "h:signal:10", t=90, pid=11)  # SIGUSR1: fatal by default
    killer.send(2, "signal", "h:signal:17", t=95, pid=11)  # SIGCHLD: not fatal
    killer.send(3, "signal", "h:signal:9", t=100, pid=11)
    parent.recv(4, "exit", "h:11")
    run = load(tb)
    m = run.matching
    (r, chains), = m.uncertain
    assert m.events[r].kind == "exit"
    assert [[m.events[s].clock for s in chain] for chain in chains] == [[1, 3]]
    assert m.by_kind["exit"].ambiguous == 1 and m.by_kind["exit"].external == 0


def shared_run(tb: TraceBuilder) -> Run:
    """W writes segment S, R reads it; Z maps it read-only; no message between them.

    W: attach at clock 1 (t 100), a sem send at 2 (t 105), produce at 3. R: attach at 1 (t 50), sem
    sends at 4 (t 90) and 6 (t 150): early (2), mid (4), late (5, 7).
    Z: read-only attach at 1 (t 10), zq at 2.
    """
    w, r, z = tb.process("W"), tb.process("R"), tb.process("Z")
    w.send(1, "shm", "h:shm:1:2", t=100, path="/dev/shm/psm_s", w=True)
    w.send(2, "sem", "h:sem:w", t=105)
    w.run("app.produce", 3)
    r.send(1, "shm", "h:shm:1:2", t=50, path="/dev/shm/psm_s", w=True)
    r.run("app.early", 2)
    r.send(4, "sem", "h:sem:own", t=90)
    r.run("app.mid", 4)
    r.run("app.late", 5, 7)
    r.send(6, "sem", "h:sem:own", t=150)
    z.send(1, "shm", "h:shm:1:2", t=10, path="/dev/shm/psm_s", w=False)
    z.run("app.zq", 2)
    return load(tb)


def test_shared_segment_reader_impacted_after_its_last_event_before_the_write(
        tb: TraceBuilder) -> None:
    run = shared_run(tb)
    # produce (clock 3) may be stored from t = 105 (W's latest time at or before 3);
    # R's latest event at or before t 105 is clock 4: R is impacted from clock 5;
    # Z (t 10, clock 1) from clock 2. Back from R: its effect is there from t 105
    # (its arrival), W's latest event at or before 105 is clock 2: from 3, no earlier.
    assert impacted(run, "app.produce") == {("W", "app.produce"), ("R", "app.late"),
                                            ("Z", "app.zq")}
    result = run.impact("app.produce")
    assert {run.processes[k].role: p for k, p in result.shared_memory.items()} == {
        "R": "/dev/shm/psm_s", "Z": "/dev/shm/psm_s"}
    # a read-only mapping carries nothing out
    assert impacted(run, "app.zq") == {("Z", "app.zq")}
    steps = run.explain("app.produce", "app.late").steps
    assert [(run.processes[s.process].role, s.action) for s in steps] == [
        ("W", "start"), ("W", "send"), ("R", "recv"), ("R", "runs")]
    assert "/dev/shm/psm_s" in steps[2].detail


def test_shared_segment_backwards(tb: TraceBuilder) -> None:
    run = shared_run(tb)
    # late last runs at 7, before R's time 150 (clock 6)? no: at or after 7 R records
    # nothing, so what W stored at any time may have been read: produce
    assert ("W", "app.produce") in {(run.processes[k].role, m)
                                    for k, m in run.deps("app.late").pairs()}
    # early (clock 2) ran before R's time 90 (clock 4), and W mapped S only at t 100
    assert not run.deps("app.early").deps.get(next(
        k for k, p in run.processes.items() if p.role == "W"))


def test_a_sharer_stores_no_earlier_than_the_time_its_order_was_sent(tb: TraceBuilder) -> None:
    """P records t 800, then orders C through a pipe; C records no time of its own after
    its attach (t 150). R, the other sharer: work (clock 2), t 500 (3), late (4), t 1000 (5).
    """
    p, c, r = tb.process("P"), tb.process("C"), tb.process("R")
    p.send(1, "shm", "h:shm:1:2", t=100, path="/dev/shm/psm_s", w=True)
    p.send(2, "sem", "h:sem:p", t=800)
    p.run("app.order", 3)
    p.send(4, "pipe", "h:pipe:7", 0, 5)
    c.send(1, "shm", "h:shm:1:2", t=150, path="/dev/shm/psm_s", w=True)
    c.recv(2, "pipe", "h:pipe:7", 0, 5)
    c.run("app.store", 3)
    r.send(1, "shm", "h:shm:1:2", t=160, path="/dev/shm/psm_s", w=True)
    r.run("app.work", 2)
    r.send(3, "sem", "h:sem:r", t=500)
    r.run("app.late", 4)
    r.send(5, "sem", "h:sem:r", t=1000)
    run = load(tb)
    # C's pipe receive returned after P's send, made after P recorded t 800: C stores from
    # t 800 (not from its attach at 150), like P; R's latest time at or before 800 is
    # clock 3, so R is impacted from clock 4: late, not work
    assert impacted(run, "app.order") == {("P", "app.order"), ("C", "app.store"),
                                          ("R", "app.late")}
    # what C ran after its order: the same bound, for P too (its latest time at or before
    # 800 is clock 2: order, at 3, may read it)
    assert impacted(run, "app.store") == {("C", "app.store"), ("R", "app.late"),
                                          ("P", "app.order")}


def _known_by_lamport(m: Matching, order: Order, times: dict[int, int]) -> list[int | None]:
    """The plain definition: every event in Lamport order, the latest time recorded at it,
    before it in its process, or known at a send that certainly carried its content."""
    sources: dict[int, list[int]] = {}
    for s, r in m.edges:
        if m.proc_of[s] != m.proc_of[r] and m.events[r].kind in CONTENT_KINDS:
            sources.setdefault(r, []).append(s)
    known: list[int | None] = [None] * len(m.events)
    current: list[int | None] = [None] * len(m.process_keys)
    for i in sorted(range(len(m.events)), key=order.lamport.__getitem__):
        p = m.proc_of[i]
        best = current[p]
        for t in (times.get(i), *(known[s] for s in sources.get(i, ()))):
            if t is not None and (best is None or t > best):
                best = t
        current[p] = known[i] = best
    return known


@pytest.mark.parametrize("share", [0.0, 0.01, 0.1, 0.5])
def test_known_times_on_demand_equal_the_plain_definition(tmp_path: Path, share: float) -> None:
    """Random runs (streams and message channels); each event recorded a time with
    probability ``share`` (and each process's first one), read in Lamport order as a
    clock would: the stretches scanned on demand give the same times as the definition."""
    run = Run.load(write_synthetic_run(tmp_path / "run", 6, 3000, 10, seed=7))
    m, order = run.matching, run.order
    rng = random.Random(int(share * 100))
    times = {i: order.lamport[i] * 10 + 5 for i in range(len(m.events))
             if rng.random() < share or i in m.offsets}
    points: dict[int, list[tuple[int, int]]] = {}
    for i, t in times.items():
        points.setdefault(m.proc_of[i], []).append((m.events[i].clock, t))
    known = KnownTimes(m, order, {p: Timeline.of(v) for p, v in points.items()})
    expected = _known_by_lamport(m, order, times)
    for i in rng.sample(range(len(m.events)), 1500):
        assert known.time_before(m.proc_of[i], m.events[i].clock) == expected[i], i
