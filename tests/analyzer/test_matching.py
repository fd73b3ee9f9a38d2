"""Send/receive pairing per channel kind; expected pairs worked out by hand."""

from __future__ import annotations

from distea.analyzer.run import Run
from tests.analyzer.conftest import load
from tests.analyzer.tracebuilder import TraceBuilder


def pairs(run: Run) -> set[tuple[tuple[str, int], tuple[str, int]]]:
    """Certain edges as ((sender role, send clock), (receiver role, recv clock))."""
    m = run.matching
    out = set()
    for s, r in m.certain_pairs():
        se, re_ = m.events[s], m.events[r]
        out.add(((run.processes[se.process].role, se.clock),
                 (run.processes[re_.process].role, re_.clock)))
    return out


def test_one_send_read_by_two_receives(tb: TraceBuilder) -> None:
    a, b = tb.process("A"), tb.process("B")
    a.send(3, "tcp", "a>b", 0, 10)
    b.recv(5, "tcp", "a>b", 0, 4)
    b.recv(8, "tcp", "a>b", 4, 10)
    run = load(tb)
    assert pairs(run) == {(("A", 3), ("B", 5)), (("A", 3), ("B", 8))}
    m = run.matching
    assert (m.matched, m.ambiguous, m.external, m.unmatched_sends) == (2, 0, 0, 0)


def test_two_sends_read_by_one_receive_pairs_with_the_last_byte(tb: TraceBuilder) -> None:
    a, b = tb.process("A"), tb.process("B")
    a.send(2, "tcp", "a>b", 0, 5)
    a.send(4, "tcp", "a>b", 5, 10)
    b.recv(6, "tcp", "a>b", 0, 10)
    run = load(tb)
    # bytes [0, 10): byte 9 came with the second send
    assert pairs(run) == {(("A", 4), ("B", 6))}
    assert run.matching.unmatched_sends == 0  # the first send was read too


def test_partial_read_pairs_with_the_send_holding_its_last_byte(tb: TraceBuilder) -> None:
    a, b = tb.process("A"), tb.process("B")
    a.send(2, "tcp", "a>b", 0, 5)
    a.send(4, "tcp", "a>b", 5, 10)
    b.recv(6, "tcp", "a>b", 0, 3)
    run = load(tb)
    assert pairs(run) == {(("A", 2), ("B", 6))}
    assert run.matching.unmatched_sends == 1  # bytes [5, 10) never read


def test_stream_generations_restart_at_zero(tb: TraceBuilder) -> None:
    a, b = tb.process("A"), tb.process("B")
    a.send(1, "tcp", "a>b", 0, 3)
    a.send(5, "tcp", "a>b", 0, 3)  # a new connection between the same addresses
    b.recv(2, "tcp", "a>b", 0, 3)
    b.recv(9, "tcp", "a>b", 0, 3)
    run = load(tb)
    assert pairs(run) == {(("A", 1), ("B", 2)), (("A", 5), ("B", 9))}


def test_stream_receive_without_recorded_send_is_external(tb: TraceBuilder) -> None:
    b = tb.process("B")
    b.recv(2, "tcp", "x>b", 0, 7)
    b.recv(3, "tcp", "x>b", 7, 9)
    run = load(tb)
    assert (run.matching.matched, run.matching.external) == (0, 2)
    assert any("no recorded send" in p for p in run.problems)


def test_message_fifo_per_channel(tb: TraceBuilder) -> None:
    a, b = tb.process("A"), tb.process("B")
    for clock in (1, 2, 3):
        a.send(clock, "mp", "q")
    b.recv(4, "mp", "q")
    b.recv(7, "mp", "q")
    run = load(tb)
    assert pairs(run) == {(("A", 1), ("B", 4)), (("A", 2), ("B", 7))}
    assert run.matching.unmatched_sends == 1


def test_fingerprints_pick_the_sender_among_several(tb: TraceBuilder) -> None:
    p1, p2, c = tb.process("P1"), tb.process("P2"), tb.process("C")
    p1.send(2, "zmq", "tcp://h:5", fp="a")
    p2.send(1, "zmq", "tcp://h:5", fp="b")
    c.recv(3, "zmq", "tcp://h:5", fp="b")
    c.recv(6, "zmq", "tcp://h:5", fp="a")
    run = load(tb)
    assert pairs(run) == {(("P2", 1), ("C", 3)), (("P1", 2), ("C", 6))}
    assert run.matching.ambiguous == 0


def test_identical_fingerprints_from_two_senders_are_ambiguous(tb: TraceBuilder) -> None:
    p1, p2, c = tb.process("P1"), tb.process("P2"), tb.process("C")
    p1.send(2, "mp", "q", fp="same")
    p2.send(2, "mp", "q", fp="same")
    c.recv(3, "mp", "q", fp="same")
    c.recv(4, "mp", "q", fp="same")
    run = load(tb)
    m = run.matching
    assert (m.matched, m.ambiguous, m.external, m.unmatched_sends) == (0, 2, 0, 0)
    # each receive is ordered after both candidate sends
    for r, _ in m.uncertain:
        senders = {run.processes[m.events[s].process].role for s in run.order.sources[r]}
        assert senders == {"P1", "P2"}


def test_linked_ends_pair_across(tb: TraceBuilder) -> None:
    a, b = tb.process("A"), tb.process("B")
    a.link("pipe", "end:1", "end:2")
    a.send(1, "pipe", "end:1")  # A writes on its end; B reads on the other
    b.recv(2, "pipe", "end:2")
    b.send(3, "pipe", "end:2")
    a.recv(4, "pipe", "end:1")
    run = load(tb)
    assert pairs(run) == {(("A", 1), ("B", 2)), (("B", 3), ("A", 4))}


def test_duplex_channel_with_one_name_never_pairs_a_process_with_itself(
    tb: TraceBuilder,
) -> None:
    client, server = tb.process("client"), tb.process("server")
    client.send(1, "zmq", "tcp://h:9")
    server.recv(2, "zmq", "tcp://h:9")
    server.send(3, "zmq", "tcp://h:9")
    client.recv(4, "zmq", "tcp://h:9")
    run = load(tb)
    assert pairs(run) == {(("client", 1), ("server", 2)), (("server", 3), ("client", 4))}


def test_fanout_send_reaches_every_subscriber(tb: TraceBuilder) -> None:
    pub, s1, s2 = tb.process("pub"), tb.process("s1"), tb.process("s2")
    pub.send(2, "zmq", "tcp://h:7", fp="t", fanout=True)
    pub.send(3, "zmq", "tcp://h:7", fp="u", fanout=True)
    s1.recv(4, "zmq", "tcp://h:7", fp="t")
    s2.recv(6, "zmq", "tcp://h:7", fp="t")
    s2.recv(7, "zmq", "tcp://h:7", fp="u")
    run = load(tb)
    assert pairs(run) == {(("pub", 2), ("s1", 4)), (("pub", 2), ("s2", 6)),
                          (("pub", 3), ("s2", 7))}
    assert (run.matching.ambiguous, run.matching.unmatched_sends) == (0, 0)


def test_shared_queue_without_fingerprints_is_ambiguous(tb: TraceBuilder) -> None:
    s, r1, r2 = tb.process("S"), tb.process("R1"), tb.process("R2")
    s.send(2, "mp", "work")
    s.send(4, "mp", "work")
    r1.recv(5, "mp", "work")
    r2.recv(5, "mp", "work")
    run = load(tb)
    m = run.matching
    assert (m.matched, m.ambiguous) == (0, 2)
    # safe: each receive comes after the latest candidate (clock 4)
    for r, _ in m.uncertain:
        assert [m.events[s].clock for s in run.order.sources[r]] == [4]


def test_udp_loss_makes_the_class_ambiguous(tb: TraceBuilder) -> None:
    a, b = tb.process("A"), tb.process("B")
    a.send(1, "udp", "a>b", fp="x")
    a.send(2, "udp", "a>b", fp="x")
    b.recv(3, "udp", "a>b", fp="x")  # which one was lost is unknown
    run = load(tb)
    m = run.matching
    assert m.ambiguous == 1
    assert [m.events[s].clock for s in run.order.sources[m.uncertain[0][0]]] == [2]


def test_spawn_token_one_to_many(tb: TraceBuilder) -> None:
    sh = tb.process("sh")
    sh.send(2, "proc", "tok1")
    c1 = tb.process("c1", parent_token="tok1")
    c2 = tb.process("c2", parent_token="tok1")
    c1.recv(1, "proc", "tok1")
    c2.recv(1, "proc", "tok1")
    orphan = tb.process("orphan", parent_token="tok9")
    orphan.recv(1, "proc", "tok9")
    run = load(tb)
    assert pairs(run) == {(("sh", 2), ("c1", 1)), (("sh", 2), ("c2", 1))}
    assert run.matching.by_kind["proc"].external == 1


def test_exit_pairs_in_order(tb: TraceBuilder) -> None:
    parent = tb.process("parent", pid=10)
    child = tb.process("child", pid=11)
    child.send(5, "exit", "h:11")
    parent.recv(9, "exit", "h:11")
    run = load(tb)
    assert pairs(run) == {(("child", 5), ("parent", 9))}


def test_torch_collectives(tb: TraceBuilder) -> None:
    r0, r1, r2 = tb.process("r0"), tb.process("r1"), tb.process("r2")
    for r in (r0, r1, r2):  # all_reduce: everyone enters (send) and leaves (recv)
        r.send(1, "torch", "g:0", op="all_reduce", role="all")
        r.recv(2, "torch", "g:0", op="all_reduce", role="all")
    r0.send(3, "torch", "g:1", op="broadcast", role="root")
    r1.recv(4, "torch", "g:1", op="broadcast", role="leaf")
    r2.recv(4, "torch", "g:1", op="broadcast", role="leaf")
    r1.send(5, "torch", "g:2", op="reduce", role="leaf")
    r2.send(5, "torch", "g:2", op="reduce", role="leaf")
    r0.recv(6, "torch", "g:2", op="reduce", role="root")
    run = load(tb)
    expected = {((a, 1), (b, 2)) for a in ("r0", "r1", "r2") for b in ("r0", "r1", "r2")
                if a != b}
    expected |= {(("r0", 3), ("r1", 4)), (("r0", 3), ("r2", 4))}
    expected |= {(("r1", 5), ("r0", 6)), (("r2", 5), ("r0", 6))}
    assert pairs(run) == expected
    assert run.matching.matched == 6


def test_unknown_kind_is_paired_as_messages_and_noted(tb: TraceBuilder) -> None:
    a, b = tb.process("A"), tb.process("B")
    a.send(1, "carrier-pigeon", "coop")
    b.recv(2, "carrier-pigeon", "coop")
    run = load(tb)
    assert pairs(run) == {(("A", 1), ("B", 2))}
    assert any("carrier-pigeon" in p for p in run.problems)


def test_stream_generations_out_of_step_fall_back_to_uncertain(tb: TraceBuilder) -> None:
    a, b = tb.process("A"), tb.process("B")
    a.send(1, "tcp", "a>b", 0, 3)  # a first connection B never read from
    a.send(4, "tcp", "a>b", 0, 5)
    b.recv(6, "tcp", "a>b", 0, 5)
    run = load(tb)
    m = run.matching
    assert (m.matched, m.ambiguous) == (0, 1)
    assert [m.events[s].clock for s in run.order.sources[m.uncertain[0][0]]] == [4]
