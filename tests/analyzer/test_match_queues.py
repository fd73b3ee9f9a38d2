"""Shared queues paired by the pipe's order (match_queues.py), and UDP broadcasts
(match_broadcast.py): hand-worked traces, and a property test against a simulated
FIFO."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distea.analyzer.run import Run
from tests.analyzer.conftest import load
from tests.analyzer.test_matching import pairs
from tests.analyzer.tracebuilder import TraceBuilder

Q = "h:pipe:7"


def _two_writers_two_readers(tb: TraceBuilder, *, host_b: str = "h",
                             overlap: bool = False) -> None:
    """A and B write one look-alike message each; R1 and R2 read one each.
    Times: A writes [10, 11], B [20, 21] (or [11, 21]: overlapping A's);
    R1 reads [30, 31], R2 [15, 25]: R2 read first, so it got A's message."""
    a, b = tb.process("A"), tb.process("B", host=host_b)
    r1, r2 = tb.process("R1"), tb.process("R2")
    a.send(2, "mp", Q, fp=5, t=[10, 11])
    b.send(2, "mp", Q, fp=5, t=[11 if overlap else 20, 21])
    r1.recv(3, "mp", Q, fp=5, t=[30, 31])
    r2.recv(3, "mp", Q, fp=5, t=[15, 25])


def test_kth_read_pairs_with_kth_write(tb: TraceBuilder) -> None:
    _two_writers_two_readers(tb)
    run = load(tb)
    assert pairs(run) == {(("A", 2), ("R2", 3)), (("B", 2), ("R1", 3))}
    assert (run.matching.matched, run.matching.ambiguous) == (2, 0)


def test_overlapping_writes_fall_back_to_the_safe_rule(tb: TraceBuilder) -> None:
    _two_writers_two_readers(tb, overlap=True)
    m = load(tb).matching
    assert (m.matched, m.ambiguous) == (0, 2)


def test_two_hosts_fall_back_to_the_safe_rule(tb: TraceBuilder) -> None:
    _two_writers_two_readers(tb, host_b="other")
    m = load(tb).matching
    assert (m.matched, m.ambiguous) == (0, 2)


def test_a_process_that_lost_records_falls_back(tb: TraceBuilder) -> None:
    _two_writers_two_readers(tb)
    tb.procs[2].complete = False  # type: ignore[attr-defined]  # R1 killed before its flush
    m = load(tb).matching
    assert (m.matched, m.ambiguous) == (0, 2)


def test_inconsistent_pairs_fall_back(tb: TraceBuilder) -> None:
    """The 1st read has another fingerprint than the 1st write: some message was
    not seen. Then the fingerprints decide, FIFO per sender, as before."""
    a, r = tb.process("A"), tb.process("R")
    a.send(2, "mp", Q, fp=1, t=[10, 11])
    a.send(3, "mp", Q, fp=2, t=[12, 13])
    r.recv(4, "mp", Q, fp=2, t=[14, 15])
    m = load(tb).matching
    assert pairs(Run.load(tb.path)) == {(("A", 3), ("R", 4))}
    assert m.unmatched_sends == 1


def test_a_read_that_ends_before_its_write_began_falls_back(tb: TraceBuilder) -> None:
    a, b, r1, r2 = (tb.process(n) for n in ("A", "B", "R1", "R2"))
    a.send(2, "mp", Q, fp=5, t=[10, 11])
    b.send(2, "mp", Q, fp=5, t=[40, 41])
    r1.recv(3, "mp", Q, fp=5, t=[20, 21])
    r2.recv(3, "mp", Q, fp=5, t=[30, 31])  # the 2nd read ends before the 2nd write began
    m = load(tb).matching
    assert (m.matched, m.ambiguous) == (0, 2)


def test_without_brackets_nothing_changes(tb: TraceBuilder) -> None:
    a, b, r = tb.process("A"), tb.process("B"), tb.process("R")
    a.send(2, "mp", Q, fp=5)
    b.send(2, "mp", Q, fp=5)
    r.recv(3, "mp", Q, fp=5)
    r.recv(4, "mp", Q, fp=5)
    m = load(tb).matching
    assert (m.matched, m.ambiguous) == (0, 2)


@st.composite
def fifo_runs(draw: st.DrawFn) -> tuple[list[tuple[int, int]], list[tuple[int, int]], int]:
    """A simulated queue: (writer process, fp) per message in pipe order, reader
    process per read (the k-th read takes the k-th message), and how many
    writers there are; processes 0..w-1 write, w.. read."""
    writers = draw(st.integers(1, 3))
    readers = draw(st.integers(1, 3))
    messages = draw(st.lists(st.tuples(st.integers(0, writers - 1), st.integers(0, 1)),
                             min_size=1, max_size=12))
    reads = draw(st.lists(st.integers(writers, writers + readers - 1),
                          min_size=1, max_size=len(messages)))
    return messages, [(p, 0) for p in reads], writers


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fifo_runs(), st.randoms(use_true_random=False))
def test_pairs_are_the_simulated_fifo(run_shape, rnd) -> None:
    """Writes and reads happen at random times (reads never before their write),
    with look-alike fingerprints: the pairs found are exactly the simulated ones."""
    messages, reads, writers = run_shape
    events: list[tuple[int, str, int, int, int]] = []  # (t0, dir, process, fp, index)
    t = 0
    write_t0: list[int] = []
    for k, (p, fp) in enumerate(messages):
        t += rnd.randint(1, 5)
        write_t0.append(t)
        events.append((t, "send", p, fp, k))
        t += 1
    t_read = 0
    for k, (p, _) in enumerate(reads):
        t_read = max(t_read, write_t0[k]) + rnd.randint(1, 9)
        events.append((t_read, "recv", p, messages[k][1], k))
        t_read += 1
    events.sort()
    with tempfile.TemporaryDirectory() as tmp:
        tb = TraceBuilder(Path(tmp) / "run")
        procs = {p: tb.process(f"P{p}", pid=p + 1)
                 for p in range(writers + 1 + max(p for p, _ in reads))}
        clocks = dict.fromkeys(procs, 0)
        truth_send: dict[int, tuple[str, int]] = {}
        truth: set[tuple[tuple[str, int], tuple[str, int]]] = set()
        for t0, direction, p, fp, k in events:
            clocks[p] += 1
            if direction == "send":
                procs[p].send(clocks[p], "mp", Q, fp=fp, t=[t0, t0 + 1])
                truth_send[k] = (f"P{p}", clocks[p])
            else:
                procs[p].recv(clocks[p], "mp", Q, fp=fp, t=[t0, t0 + 1])
                truth.add((truth_send[k], (f"P{p}", clocks[p])))
        run = load(tb)
        assert pairs(run) == truth
        assert run.matching.ambiguous == 0


def test_broadcast_reaches_every_socket_on_its_port(tb: TraceBuilder) -> None:
    """A registry broadcasts to 255.255.255.255:18811 twice with one look; two
    hosts' servers, bound to the wildcard, each read both. A unicast to one of
    them on the same port pairs as before."""
    reg = tb.process("registry")
    s1, s2 = tb.process("s1", host="a"), tb.process("s2", host="b")
    client = tb.process("client")
    reg.send(2, "udp", "*:18811", fp=9, fanout=True)
    reg.send(3, "udp", "*:18811", fp=9, fanout=True)
    client.send(2, "udp", "10.0.0.1:18811", fp=4)
    s1.recv(5, "udp", "10.0.0.1:18811", fp=9)
    s1.recv(6, "udp", "10.0.0.1:18811", fp=4)
    s1.recv(7, "udp", "10.0.0.1:18811", fp=9)
    s2.recv(5, "udp", "10.0.0.2:18811", fp=9)
    s2.recv(6, "udp", "10.0.0.2:18811", fp=9)
    tb.process("other").recv(3, "udp", "10.0.0.3:9999", fp=9)  # another port: external
    run = load(tb)
    assert pairs(run) == {
        (("registry", 2), ("s1", 5)), (("registry", 3), ("s1", 7)),
        (("registry", 2), ("s2", 5)), (("registry", 3), ("s2", 6)),
        (("client", 2), ("s1", 6)),
    }
    counts = run.matching.by_kind["udp"]
    assert (counts.sends, counts.recvs) == (3, 6)
    assert (counts.matched, counts.ambiguous, counts.external) == (5, 0, 1)
    assert counts.unmatched_sends == 0


def test_broadcast_and_unicast_of_one_look_stay_uncertain(tb: TraceBuilder) -> None:
    reg, client, s1 = tb.process("registry"), tb.process("client"), tb.process("s1")
    reg.send(2, "udp", "*:18811", fp=9, fanout=True)
    client.send(2, "udp", "10.0.0.1:18811", fp=9)
    s1.recv(5, "udp", "10.0.0.1:18811", fp=9)
    s1.recv(6, "udp", "10.0.0.1:18811", fp=9)
    m = load(tb).matching
    assert (m.matched, m.ambiguous) == (0, 2)
