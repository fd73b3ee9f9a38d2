"""Unseen-traffic reports become safe possible edges (docs/semantics.md, "Traffic the
tracer did not see"), on hand-built runs; every expectation worked out by hand.

A sends 10 bytes to B on ``a:1>b:2`` that no channel recorded; its detector
reports them at clock 10, unseen since its previous check at clock 4: the
bytes left in A's window (4, 10]. B recorded its two receives of them (clocks
3 and 8), which have no recorded send. B also sent 3 bytes to A (B clock 6,
A clock 7), seen and paired.
"""

from __future__ import annotations

from distea.analyzer.run import Run
from tests.analyzer.conftest import impacted, load, starts
from tests.analyzer.tracebuilder import TraceBuilder


def build(tb: TraceBuilder, *, report: bool = True) -> Run:
    a, b = tb.process("A"), tb.process("B")
    a.run("app.q", 1, 2)
    a.recv(7, "tcp", "b:2>a:1", 0, 3)
    a.run("app.r", 8, 9)
    if report:
        a.send(10, "unseen", "a:1>b:2", 0, 1, lo=4, sent=10, received=0, at="close",
               reason="moved by a C extension")
    b.run("app.early", 1, 2)
    b.recv(3, "tcp", "a:1>b:2", 0, 5)
    b.run("app.mid", 4, 5)
    b.send(6, "tcp", "b:2>a:1", 0, 3)
    b.recv(8, "tcp", "a:1>b:2", 5, 10)
    b.run("app.late", 9, 9)
    return load(tb)


def test_without_the_report_the_receiver_proves_the_unseen_sends(tb: TraceBuilder) -> None:
    """B read 10 bytes no process recorded sending, and A holds the connection's other
    direction: A sent them unseen, at some clock of its whole trace (0, 9]; here that
    orders the same as the detector's window."""
    run = build(tb, report=False)
    (report,) = run.unseen.reports
    assert (report.sent, report.lo, report.clock, report.at) == (10, 0, 9, "analysis")
    (line,) = [p for p in run.problems if "not seen by the tracer" in p]
    assert "inferred" in line
    assert starts(run, "app.q") == {"A": 1, "B": 3}
    assert starts(run, "app.r") == {"A": 8, "B": 8}


def test_impact_crosses_from_the_first_send_point_after_the_start(tb: TraceBuilder) -> None:
    run = build(tb)
    # app.q starts at A 1; A's first unseen send point after it is 5, before which A knows
    # nothing of B: B's first receive point, clock 3, may carry it
    assert starts(run, "app.q") == {"A": 1, "B": 3}
    assert impacted(run, "app.q") == {("A", "app.q"), ("A", "app.r"), ("B", "app.mid"),
                                      ("B", "app.late")}
    # app.r starts at A 8, after A's receive of B's send at 6: bytes A sends then cannot be
    # read at B 3 (before B 6); the first receive point not before (A, 8) is B 8
    assert starts(run, "app.r") == {"A": 8, "B": 8}
    assert impacted(run, "app.r") == {("A", "app.r"), ("B", "app.late")}
    keys = {run.processes[k].role: k for k in run.processes}
    assert run.impact("app.r").unseen == [(keys["A"], keys["B"], "a:1>b:2")]
    assert run.impact("app.late").unseen == []  # B's last method reaches nothing
    for query in ("app.q", "app.r"):  # the DistIA baseline crosses them too: a superset
        result = run.impact(query)
        assert result.distia_size >= result.size


def test_problem_line_and_matching_left_alone(tb: TraceBuilder) -> None:
    run = build(tb)
    (line,) = [p for p in run.problems if "not seen by the tracer" in p]
    assert "10 bytes sent on tcp a:1>b:2" in line and "moved by a C extension" in line
    assert "unseen" not in run.matching.by_kind  # a report is not a message


def test_dependencies_follow_the_edges_backwards(tb: TraceBuilder) -> None:
    run = build(tb)
    # app.mid last ran at B 5: it may have read (at B 3) what A sent up to A 6, the clock
    # before A's receive of B's send at 6, which happens after B 3
    assert run.deps("app.mid").deps[next(k for k, p in run.processes.items()
                                        if p.role == "A")] == ["app.q"]
    # app.late at B 9 read at B 8, concurrent with all of A's window: up to A 10
    late = run.deps("app.late").deps
    assert set(late[next(k for k, p in run.processes.items() if p.role == "A")]) == \
        {"app.q", "app.r"}


def test_a_report_whose_peer_recorded_nothing_is_a_problem_only(tb: TraceBuilder) -> None:
    a = tb.process("A")
    a.run("app.q", 1, 2)
    a.send(3, "unseen", "a:1>x:9", 0, 1, lo=0, sent=4, received=4, at="exit", reason="c")
    run = load(tb)
    assert any("no traced process recorded the other end" in p for p in run.problems)
    assert impacted(run, "app.q") == {("A", "app.q")}


def transport(tb: TraceBuilder, *, b_claims: str | None = "WORLD",
              b_missed: bool = False) -> Run:
    """Two ranks of group WORLD, its collective 0 ordering A 3 before B 5 (and back);
    gloo's pair connection a:1<>b:2 moved bytes both ways unseen, claimed for WORLD by
    A and (``b_claims``) by B at the group's creation."""
    a, b = tb.process("A"), tb.process("B")
    a.run("app.before", 1, 2)
    a.send(3, "torch", "WORLD:0", 0, 1, op="allreduce", role="all")
    a.recv(4, "torch", "WORLD:0", 0, 1, op="allreduce", role="all")
    a.run("app.after", 5, 6)
    a.send(7, "unseen", "a:1>b:2", 0, 1, lo=0, sent=40, received=40, at="exit",
           reason="moved in C", via="WORLD")
    b.run("app.early", 1, 2)
    if b_missed:  # B's hooks missed operations of WORLD: B's tracer recorded that
        b.send(3, "torch", "WORLD:unseen", 0, 1, op="unseen", role="all", unseen=1,
               what="1 operations on process group WORLD were not seen")
        b.recv(4, "torch", "WORLD:unseen", 0, 1, op="unseen", role="all", unseen=1,
               what="1 operations on process group WORLD were not seen")
    b.send(5, "torch", "WORLD:0", 0, 1, op="allreduce", role="all")
    b.recv(6, "torch", "WORLD:0", 0, 1, op="allreduce", role="all")
    b.run("app.late", 7, 8)
    meta = {"via": b_claims} if b_claims else {}
    b.send(9, "unseen", "b:2>a:1", 0, 1, lo=0, sent=40, received=40, at="exit",
           reason="moved in C", **meta)
    return load(tb)


def test_a_torch_groups_own_transport_is_covered(tb: TraceBuilder) -> None:
    # both ends claimed it for WORLD and no rank missed an operation of WORLD: the
    # bytes are the collectives', ordered by the hub; no possible edge, no problem
    run = transport(tb)
    assert run.problems == []
    assert run.unseen.edges == [] and len(run.unseen.covered) == 2
    assert any("process group WORLD" in note and "covered" in note for note in run.notes)
    # app.before (A 1-2) reaches B only through collective 0 (B's receive at 6)
    assert starts(run, "app.before") == {"A": 1, "B": 6}
    assert impacted(run, "app.early") == {("B", "app.early"), ("B", "app.late"),
                                          ("A", "app.after")}


def test_a_connection_one_end_did_not_claim_stays_a_problem(tb: TraceBuilder) -> None:
    # B opened it outside the group's creation (a program's own connection, say): the
    # bytes may be anything; possible edges order them safely
    run = transport(tb, b_claims=None)
    assert len([p for p in run.problems if "not seen by the tracer" in p]) == 2
    assert run.unseen.covered == [] and run.unseen.edges
    # app.early (B 1-2) may leave at B's window (0, 9] at once and reach A's (0, 7]
    assert ("A", "app.before") in impacted(run, "app.early")


def test_a_group_with_unseen_operations_covers_nothing(tb: TraceBuilder) -> None:
    run = transport(tb, b_missed=True)
    assert len([p for p in run.problems if "not seen by the tracer" in p]) == 2
    assert run.unseen.covered == []
