"""Impact, dependencies and explanations on hand-built runs (DESIGN.md §5).

Every expected set below was worked out by hand from the definitions.
"""

from __future__ import annotations

import pytest

from distea.analyzer.order import OrderCycleError, compute_order
from tests.analyzer.conftest import impacted, load, starts
from tests.analyzer.tracebuilder import TraceBuilder


def chain(tb: TraceBuilder) -> None:
    """A --tcp--> B --mp--> C, with methods before and after each receive."""
    a, b, c = tb.process("A"), tb.process("B"), tb.process("C")
    a.run("app.q", 1, 2)
    a.send(3, "tcp", "a>b", 0, 10, method="app.q")
    a.run("app.a_after", 4, 5)
    b.run("app.b_before", 1, 1)
    b.recv(2, "tcp", "a>b", 0, 10)
    b.run("app.b_after", 3, 3)
    b.send(4, "mp", "q1", fp="x")
    c.run("app.c_before", 1, 6)
    c.recv(7, "mp", "q1", fp="x")
    c.run("app.c_after", 8, 9)


def test_transitive_chain(tb: TraceBuilder) -> None:
    chain(tb)
    run = load(tb)
    assert impacted(run, "app.q") == {
        ("A", "app.q"), ("A", "app.a_after"), ("B", "app.b_after"), ("C", "app.c_after"),
    }
    assert starts(run, "app.q") == {"A": 1, "B": 2, "C": 7}


def test_impact_from_the_middle_does_not_flow_backwards(tb: TraceBuilder) -> None:
    chain(tb)
    run = load(tb)
    assert impacted(run, "app.b_after") == {("B", "app.b_after"), ("C", "app.c_after")}
    assert impacted(run, "app.c_before") == {("C", "app.c_before"), ("C", "app.c_after")}


def test_concurrent_branch_and_early_message_are_not_impacted(tb: TraceBuilder) -> None:
    a, b, c, d = (tb.process(r) for r in "ABCD")
    a.run("app.loop", 1, 9)  # running before and after q: Execute-After keeps it
    a.send(2, "tcp", "a>b", 0, 4)  # sent before q first runs: must not propagate
    a.run("app.q", 5, 6)
    a.send(7, "tcp", "a>c", 0, 4)
    b.recv(3, "tcp", "a>b", 0, 4)
    b.run("app.b1", 4, 8)
    b.send(9, "mp", "b>d")
    d.recv(2, "mp", "b>d")
    d.run("app.d1", 3, 3)
    c.run("app.c0", 1, 2)
    c.recv(3, "tcp", "a>c", 0, 4)
    c.run("app.c1", 4, 5)
    run = load(tb)
    assert impacted(run, "app.q") == {("A", "app.loop"), ("A", "app.q"), ("C", "app.c1")}
    assert starts(run, "app.q") == {"A": 5, "C": 3}


def test_several_queries_are_a_union_with_the_earliest_start(tb: TraceBuilder) -> None:
    chain(tb)
    run = load(tb)
    union = impacted(run, "app.b_after", "app.c_before")
    assert union == impacted(run, "app.b_after") | impacted(run, "app.c_before")
    assert starts(run, "app.b_after", "app.c_before") == {"B": 3, "C": 1}


def test_byte_ranges_decide_impact(tb: TraceBuilder) -> None:
    a, b, c = tb.process("A"), tb.process("B"), tb.process("C")
    a.send(2, "tcp", "a>b", 0, 5)
    a.run("app.q", 3, 3)
    a.send(4, "tcp", "a>b", 5, 10)
    a.send(5, "tcp", "a>c", 0, 5)
    b.recv(6, "tcp", "a>b", 0, 10)  # holds byte 9, sent after q
    b.run("app.b", 7, 7)
    c.recv(2, "tcp", "a>c", 0, 3)  # only bytes of a send after q ... at clock 5
    c.run("app.c", 3, 3)
    run = load(tb)
    assert impacted(run, "app.q") == {("A", "app.q"), ("B", "app.b"), ("C", "app.c")}

    tb2 = TraceBuilder(tb.path.parent / "run2")
    a, b = tb2.process("A"), tb2.process("B")
    a.send(2, "tcp", "a>b", 0, 5)
    a.run("app.q", 3, 3)
    a.send(4, "tcp", "a>b", 5, 10)
    b.recv(6, "tcp", "a>b", 0, 5)  # only the bytes sent before q
    b.run("app.b", 7, 7)
    assert impacted(load(tb2), "app.q") == {("A", "app.q")}


def test_ambiguous_fingerprints_are_safe(tb: TraceBuilder) -> None:
    p1, p2, c = tb.process("P1"), tb.process("P2"), tb.process("C")
    p1.run("app.q", 1, 1)
    p1.send(2, "mp", "q", fp="same")
    p2.send(2, "mp", "q", fp="same")
    c.run("app.c0", 1, 1)
    c.recv(3, "mp", "q", fp="same")  # could be P2's: still ordered after P1's
    c.run("app.c1", 4, 4)
    run = load(tb)
    assert impacted(run, "app.q") == {("P1", "app.q"), ("C", "app.c1")}
    assert run.matching.ambiguous == 1


def test_ambiguous_candidate_causally_after_the_receive_is_not_used(tb: TraceBuilder) -> None:
    p1, p2, c = tb.process("P1"), tb.process("P2"), tb.process("C")
    p1.send(1, "mp", "q", fp="x")
    c.recv(2, "mp", "q", fp="x")  # from P1 or P2?
    c.send(3, "tcp", "c>p2", 0, 1)
    p2.recv(4, "tcp", "c>p2", 0, 1)
    p2.run("app.q", 5, 5)
    p2.send(6, "mp", "q", fp="x")  # after C's receive: cannot be its sender
    c.run("app.c", 7, 7)
    run = load(tb)
    m = run.matching
    r = m.uncertain[0][0]
    assert [run.processes[m.events[s].process].role for s in run.order.sources[r]] == ["P1"]
    assert run.order.dropped_candidates == 1
    assert impacted(run, "app.q") == {("P2", "app.q")}


def test_fanout_and_torch(tb: TraceBuilder) -> None:
    r0, r1, r2 = tb.process("r0"), tb.process("r1"), tb.process("r2")
    r2.run("app.q", 1, 1)
    r0.run("app.r0", 1, 9)
    r1.run("app.r1_early", 1, 1)
    for r in (r1, r2):  # reduce: leaves send, root receives
        r.send(2, "torch", "g:0", op="reduce", role="leaf")
    r0.recv(3, "torch", "g:0", op="reduce", role="root")
    r1.run("app.r1_late", 3, 3)
    run = load(tb)
    # r1 is a leaf of the reduce: nothing reaches it
    assert impacted(run, "app.q") == {("r2", "app.q"), ("r0", "app.r0")}
    assert starts(run, "app.q") == {"r2": 1, "r0": 3}


def test_all_reduce_reaches_everyone(tb: TraceBuilder) -> None:
    ranks = [tb.process(f"r{i}") for i in range(3)]
    ranks[1].run("app.q", 1, 1)
    for r in ranks:
        r.send(2, "torch", "g:0", op="all_reduce", role="all")
        r.recv(3, "torch", "g:0", op="all_reduce", role="all")
        r.run("app.step", 4, 4)
    run = load(tb)
    assert impacted(run, "app.q") == {("r1", "app.q")} | {(f"r{i}", "app.step")
                                                          for i in range(3)}


def test_lifecycle_spawn_and_exit(tb: TraceBuilder) -> None:
    parent = tb.process("parent", pid=10)
    parent.run("app.main", 1, 12)
    parent.run("app.q", 2, 2)
    parent.send(3, "proc", "tok")
    parent.run("app.before_wait", 4, 8)
    parent.recv(9, "exit", "h:11")
    parent.run("app.after_wait", 10, 10)
    child = tb.process("child", pid=11, ppid=10, parent_token="tok")
    child.recv(1, "proc", "tok")
    child.run("app.work", 2, 4)
    child.send(5, "exit", "h:11")
    run = load(tb)
    assert impacted(run, "app.q") == {("parent", "app.main"), ("parent", "app.q"),
                                      ("parent", "app.before_wait"),
                                      ("parent", "app.after_wait"), ("child", "app.work")}
    assert impacted(run, "app.work") == {("child", "app.work"), ("parent", "app.main"),
                                         ("parent", "app.after_wait")}


def test_deps_backward(tb: TraceBuilder) -> None:
    chain(tb)
    run = load(tb)
    res = run.deps("app.c_after")
    got = {(run.processes[k].role, m) for k, m in res.pairs()}
    assert got == {("A", "app.q"), ("B", "app.b_before"), ("B", "app.b_after"),
                   ("C", "app.c_before"), ("C", "app.c_after")}
    res = run.deps("app.b_before")
    assert {(run.processes[k].role, m) for k, m in res.pairs()} == {("B", "app.b_before")}


def test_explain_gives_the_chain_process_by_process(tb: TraceBuilder) -> None:
    chain(tb)
    run = load(tb)
    exp = run.explain("app.q", "app.c_after")
    assert exp.impacted
    roles = [(run.processes[s.process].role, s.action, s.clock) for s in exp.steps]
    assert roles == [("A", "start", 1), ("A", "send", 3), ("B", "recv", 2), ("B", "send", 4),
                     ("C", "recv", 7), ("C", "runs", 9)]
    assert exp.messages == 2
    same = run.explain("app.q", "app.a_after")
    assert [s.action for s in same.steps] == ["start", "runs"]
    no = run.explain("app.q", "app.c_before")
    assert not no.impacted and "before the impact arrived" in no.reason


def test_explain_prefers_fewer_messages(tb: TraceBuilder) -> None:
    a, b, c = tb.process("A"), tb.process("B"), tb.process("C")
    a.run("app.q", 1, 1)
    a.send(2, "mp", "a>b")
    a.send(3, "mp", "a>c")
    b.recv(3, "mp", "a>b")
    b.send(4, "mp", "b>c")
    c.recv(5, "mp", "b>c")  # reached first through B (2 messages)...
    c.recv(6, "mp", "a>c")  # ...and later directly (1 message)
    c.run("app.t", 7, 7)
    run = load(tb)
    exp = run.explain("app.q", "app.t")
    assert exp.messages == 1
    assert [run.processes[s.process].role for s in exp.steps] == ["A", "A", "C", "C"]


def test_baselines(tb: TraceBuilder) -> None:
    a, b = tb.process("A"), tb.process("B")
    a.send(1, "mp", "a>b")  # sent before q
    a.run("app.q", 2, 2)
    b.run("app.b0", 1, 1)
    b.recv(5, "mp", "a>b")  # received after q started (in Lamport order): DistIA counts it
    b.run("app.b1", 6, 6)
    run = load(tb)
    res = run.impact("app.q")
    assert res.size == 1  # only q: B's message was sent before q
    assert res.distia_size == 2  # q and b1
    assert res.mcov_size == 3


def test_cycle_is_an_internal_assertion_only(tb: TraceBuilder) -> None:
    """strict=True (tests' assertion) names the cycle; a loaded run orders it anyway."""
    a, b = tb.process("A"), tb.process("B")
    a.recv(1, "tcp", "b>a", 0, 1)
    a.send(2, "tcp", "a>b", 0, 1)
    b.recv(3, "tcp", "a>b", 0, 1)
    b.send(5, "tcp", "b>a", 0, 1)
    run = load(tb)
    with pytest.raises(OrderCycleError) as info:
        compute_order(run.matching, strict=True)
    msg = str(info.value)
    assert "cycle" in msg and "'b>a'" in msg and "'a>b'" in msg
    assert len(info.value.events) == 2
    assert len(run.order.demoted) == 1
    assert any("receive(s) were paired with a send that the recorded order puts after"
               in p for p in run.problems)


def test_receive_shifted_by_an_unseen_write_is_demoted_safely(tb: TraceBuilder) -> None:
    """B read A's first byte, but an unseen byte came first on the channel, so B's
    offsets are one ahead: recorded, B's read of [1, 2) at clock 3 pairs with A's
    send at clock 6, which happens after B's reply (clock 4) reached A (clock 5).

    By hand: one of the two pairings must go. Either way B's receive at clock 3
    happens after A's send at clock 2 (the demoted receive falls back on the
    earlier send of its channel; or A's receive is demoted and B's pairing kept),
    so impact of a.first (started before clock 2) reaches B from clock 3.
    """
    a, b = tb.process("A"), tb.process("B")
    a.run("app.first", 1, 2)
    a.send(2, "tcp", "a>b", 0, 1, method="app.first")
    a.recv(5, "tcp", "b>a", 0, 1)
    a.send(6, "tcp", "a>b", 1, 2)
    b.run("app.b_before", 1, 2)
    b.recv(3, "tcp", "a>b", 1, 2)
    b.send(4, "tcp", "b>a", 0, 1)
    b.run("app.b_after", 4, 6)
    b.recv(7, "tcp", "a>b", 2, 3)
    run = load(tb)
    assert impacted(run, "app.first") == {("A", "app.first"), ("B", "app.b_after")}
    assert starts(run, "app.first")["B"] == 3
    order = run.order
    for r, sends in order.sources.items():  # every kept pairing: send before receive
        for s in sends:
            ev = run.matching.events[s]
            rv = run.matching.events[r]
            assert order.happens_before(order.index[ev.process], ev.clock,
                                        order.index[rv.process], rv.clock)
    assert any("tcp channel" in p and "(safe, less precise)" in p for p in run.problems)


def test_graph_has_program_and_message_edges(tb: TraceBuilder) -> None:
    chain(tb)
    run = load(tb)
    g = run.graph(run.impact("app.q"))
    kinds = {d["kind"] for _, _, d in g.edges(data=True)}
    assert kinds == {"program", "message"}
    assert sum(1 for _, _, d in g.edges(data=True) if d["kind"] == "message") == 2
    assert g.nodes[("exec", "h:3:0", "app.c_after")]["impacted"]
    assert not g.nodes[("exec", "h:3:0", "app.c_before")]["impacted"]


def test_two_uncertain_candidates_closing_a_cycle_stay_safe(tb: TraceBuilder) -> None:
    """Shared queue, look-alike payloads: P1 reads back its own "b", P0 reads P1's "a".

    The analyzer cannot tell that from "P1 reads P0's b, P0 reads P3's a"; both
    candidate edges cannot sit in one order, so one is kept out of the vector
    clocks, but impact must still follow it (P0's m1 is truly impacted).
    """
    p0, p1, p3 = tb.process("P0"), tb.process("P1"), tb.process("P3")
    p1.run("app.m3", 1, 1)
    p1.send(2, "mp", "shared", fp="b")
    p1.recv(3, "mp", "shared", fp="b")
    p1.send(4, "mp", "shared", fp="a")
    p0.recv(1, "mp", "shared", fp="a")
    p0.run("app.m1", 2, 2)
    p0.send(3, "mp", "shared", fp="b")
    p3.send(1, "mp", "shared", fp="a")
    run = load(tb)
    assert impacted(run, "app.m3") == {("P1", "app.m3"), ("P0", "app.m1")}
    assert len(run.order.extra) == 1
    deps = run.deps("app.m1")
    assert ("h:2:0", "app.m3") in set(deps.pairs())


def test_single_process_without_messages(tb: TraceBuilder) -> None:
    a = tb.process("A")
    a.run("app.early", 1, 2)
    a.run("app.q", 3, 4)
    a.run("app.late", 5, 5)
    a.run("app.spanning", 2, 6)
    run = load(tb)
    assert impacted(run, "app.q") == {("A", "app.q"), ("A", "app.late"), ("A", "app.spanning")}
    res = run.deps("app.q")
    assert {m for _, m in res.pairs()} == {"app.early", "app.q", "app.spanning"}


def test_torch_point_to_point_is_fifo(tb: TraceBuilder) -> None:
    r0, r1 = tb.process("r0"), tb.process("r1")
    r0.send(1, "torch", "p2p:0>1:0")
    r0.run("app.q", 2, 2)
    r0.send(3, "torch", "p2p:0>1:0")
    r1.recv(2, "torch", "p2p:0>1:0")
    r1.run("app.a", 3, 3)
    r1.recv(4, "torch", "p2p:0>1:0")
    r1.run("app.b", 5, 5)
    run = load(tb)
    assert impacted(run, "app.q") == {("r0", "app.q"), ("r1", "app.b")}


def test_socketpair_stream_through_linked_ends(tb: TraceBuilder) -> None:
    a, b = tb.process("A"), tb.process("B")
    a.link("unix", "sp:1", "sp:2")
    a.run("app.q", 1, 1)
    a.send(2, "unix", "sp:1", 0, 8)
    b.recv(3, "unix", "sp:2", 0, 8)
    b.run("app.b", 4, 4)
    run = load(tb)
    assert impacted(run, "app.q") == {("A", "app.q"), ("B", "app.b")}


def test_explain_with_process_and_line_target(tb: TraceBuilder) -> None:
    a, b, c = tb.process("A"), tb.process("B"), tb.process("C")
    a.run("app.q", 1, 1)
    a.send(2, "mp", "a>b")
    b.recv(3, "mp", "a>b")
    b.method("app.t", "app/t.py", 10, 20)
    b.run("app.t", 4, 4)
    c.method("app.t", "app/t.py", 10, 20)
    c.run("app.t", 1, 1)  # C runs the target but is never reached
    run = load(tb)
    exp = run.explain("app.q", "app/t.py:15")
    assert exp.impacted and exp.process == "h:2:0"
    exp = run.explain("app.q", "app.t", process="C")
    assert not exp.impacted and "never arrives" in exp.reason


def test_work_pool_with_identical_payloads_is_fast_and_precise(tb: TraceBuilder) -> None:
    """A producer hands out look-alike tasks and waits for each result before the next.

    Every task receive is ambiguous (any task send could be it), but each later
    task send happens after the receive (through the result), so "the latest
    candidate not causally after" is exactly the real one. 1,000 tasks must
    not make the analysis quadratic.
    """
    prod, workers = tb.process("prod"), [tb.process("w0"), tb.process("w1")]
    pc, wc = 0, [0, 0]
    for i in range(1000):
        k = i % 2
        pc += 1
        prod.send(pc, "mp", "tasks", fp="same")
        wc[k] += 1
        workers[k].recv(wc[k], "mp", "tasks", fp="same")
        wc[k] += 1
        workers[k].send(wc[k], "mp", "results", fp=f"r{i}")
        pc += 1
        prod.recv(pc, "mp", "results", fp=f"r{i}")
    run = load(tb)
    m = run.matching
    assert m.ambiguous == 1000
    for r, _ in m.uncertain:
        # the i-th task receive of worker k is task 2*j+k, sent at producer clock 2*i+1
        ev = m.events[r]
        k = int(run.processes[ev.process].role[1])
        task = 2 * ((ev.clock - 1) // 2) + k
        assert [m.events[s].clock for s in run.order.sources[r]] == [2 * task + 1]
