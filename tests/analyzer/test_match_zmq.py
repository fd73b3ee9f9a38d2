"""ZeroMQ fan-in and fan-out (match_zmq.py): hand-worked traces.

Channel ``E`` below stands for one ``ENDPOINT connect>bind`` (fan-in: many
connected senders, one bound receiver) or ``ENDPOINT bind>connect`` (fan-out);
``t`` is the CLOCK_MONOTONIC reading each message carries.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.analyzer.conftest import load
from tests.analyzer.test_matching import pairs
from tests.analyzer.tracebuilder import TraceBuilder

E = "tcp://h:5 connect>bind"
F = "tcp://h:5 bind>connect"


def test_fan_in_time_tells_the_senders_apart(tb: TraceBuilder) -> None:
    """A sent at 10 and 30, B at 20; the sink read at 15, 25 and 35. The 1st read
    can only be A's first (B had not sent); then B's is the only one sent by 25."""
    a, b, sink = tb.process("A"), tb.process("B"), tb.process("sink")
    a.send(2, "zmq", E, fp=1, t=10)
    a.send(3, "zmq", E, fp=1, t=30)
    b.send(2, "zmq", E, fp=1, t=20)
    sink.recv(2, "zmq", E, fp=1, t=15)
    sink.recv(3, "zmq", E, fp=1, t=25)
    sink.recv(4, "zmq", E, fp=1, t=35)
    run = load(tb)
    assert pairs(run) == {(("A", 2), ("sink", 2)), (("B", 2), ("sink", 3)),
                          (("A", 3), ("sink", 4))}
    assert run.matching.ambiguous == 0


def test_fan_in_with_two_messages_waiting_stays_uncertain(tb: TraceBuilder) -> None:
    """Both had sent before the 1st read: either could be first."""
    a, b, sink = tb.process("A"), tb.process("B"), tb.process("sink")
    a.send(2, "zmq", E, fp=1, t=10)
    b.send(2, "zmq", E, fp=1, t=11)
    sink.recv(2, "zmq", E, fp=1, t=15)
    sink.recv(3, "zmq", E, fp=1, t=16)
    m = load(tb).matching
    assert (m.matched, m.ambiguous) == (0, 2)
    for _, chains in m.uncertain:
        assert sorted(len(c) for c in chains) == [1, 1]  # one candidate per sender


def test_fan_in_routing_ids_tell_the_senders_apart(tb: TraceBuilder) -> None:
    """As above, but a ROUTER saw libzmq's ids: peer 00..01 sent twice. Only A sent
    twice, so both of 00..01's reads are A's, and 00..02's is B's."""
    a, b, router = tb.process("A"), tb.process("B"), tb.process("router")
    a.send(2, "zmq", E, fp=1, t=10)
    a.send(3, "zmq", E, fp=1, t=12)
    b.send(2, "zmq", E, fp=1, t=11)
    router.recv(2, "zmq", E, fp=1, t=15, peer="0000000001")
    router.recv(3, "zmq", E, fp=1, t=16, peer="0000000002")
    router.recv(4, "zmq", E, fp=1, t=17, peer="0000000001")
    run = load(tb)
    assert pairs(run) == {(("A", 2), ("router", 2)), (("B", 2), ("router", 3)),
                          (("A", 3), ("router", 4))}


def test_fan_in_from_a_socket_with_two_endpoints_is_left_to_the_safe_rule(
        tb: TraceBuilder) -> None:
    a, b, sink = tb.process("A"), tb.process("B"), tb.process("sink")
    a.send(2, "zmq", E, fp=1, t=10, multi=True)
    b.send(2, "zmq", E, fp=1, t=20)
    sink.recv(2, "zmq", E, fp=1, t=15)
    m = load(tb).matching
    assert (m.matched, m.ambiguous) == (0, 1)


def test_fan_out_burst_of_look_alikes_pairs_with_the_last_candidate(tb: TraceBuilder) -> None:
    """V sends four look-alikes in a row (clocks 2..5, nothing between); W1 and W2
    read two each. W1's 1st read could be send 2, 3 or 4 (W1 reads one more after
    it); whichever, every answer is the same: paired with the last, 4."""
    v, w1, w2 = tb.process("V"), tb.process("W1"), tb.process("W2")
    for clock in (2, 3, 4, 5):
        v.send(clock, "zmq", F, fp=1, t=clock)
    for w in (w1, w2):
        w.recv(2, "zmq", F, fp=1, t=100)
        w.recv(3, "zmq", F, fp=1, t=101)
    run = load(tb)
    assert pairs(run) == {(("V", 4), ("W1", 2)), (("V", 5), ("W1", 3)),
                          (("V", 4), ("W2", 2)), (("V", 5), ("W2", 3))}
    assert (run.matching.ambiguous, run.matching.unmatched_sends) == (0, 0)


def test_fan_out_candidates_with_a_receive_between_stay_uncertain(tb: TraceBuilder) -> None:
    """V received something (clock 3) between its two look-alike sends: which one
    W1 read changes what W1 comes after."""
    v, w1, w2, x = (tb.process(n) for n in ("V", "W1", "W2", "X"))
    x.send(2, "zmq", "tcp://h:6 connect>bind", fp=9, t=1)
    v.send(2, "zmq", F, fp=1, t=2)
    v.recv(3, "zmq", "tcp://h:6 connect>bind", fp=9, t=3)
    v.send(4, "zmq", F, fp=1, t=4)
    w1.recv(2, "zmq", F, fp=1, t=100)
    w2.recv(2, "zmq", F, fp=1, t=101)
    m = load(tb).matching
    assert m.by_kind["zmq"].ambiguous == 2


def test_fan_out_time_tells_which(tb: TraceBuilder) -> None:
    """Same, but W1 read at 3, before V's second send began: it read the first."""
    v, w1, w2, x = (tb.process(n) for n in ("V", "W1", "W2", "X"))
    x.send(2, "zmq", "tcp://h:6 connect>bind", fp=9, t=1)
    v.send(2, "zmq", F, fp=1, t=2)
    v.recv(3, "zmq", "tcp://h:6 connect>bind", fp=9, t=3)
    v.send(4, "zmq", F, fp=1, t=4)
    w1.recv(2, "zmq", F, fp=1, t=3)
    w2.recv(2, "zmq", F, fp=1, t=101)
    run = load(tb)
    assert {(("V", 2), ("W1", 2)), (("V", 4), ("W2", 2))} <= pairs(run)
    assert run.matching.ambiguous == 0


def _check(run, truth: dict[tuple[str, int], tuple[str, int]]) -> None:
    """Every receive (role, clock) → its real send: a certain pair is the real one
    or a later send of the same process with only sends (consecutive clocks)
    between; an uncertain receive names the real one among its candidates."""
    m = run.matching
    key = {i: (run.processes[e.process].role, e.clock) for i, e in enumerate(m.events)}
    certain = {key[r]: s for s, r in m.edges}
    uncertain = {key[r]: {key[s] for chain in chains for s in chain} for r, chains in m.uncertain}
    for recv, real in truth.items():
        if recv in uncertain:
            assert real in uncertain[recv]
            continue
        got = m.events[certain[recv]]
        got_key = key[certain[recv]]
        assert got_key[0] == real[0] and got_key[1] >= real[1], (recv, real, got_key)
        between = [e for e in run.messages[got.process] if real[1] <= e.clock <= got_key[1]]
        assert all(e.direction == "send" for e in between)
        assert [e.clock for e in between] == list(range(real[1], got_key[1] + 1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1), st.booleans(),
                          st.integers(0, 60)), min_size=1, max_size=14),
       st.booleans())
def test_simulated_fan_out_and_fan_in(messages, fan_in) -> None:
    """Messages (peer, look, a gap in the sender's clock before it, delay): fan-out
    sends them from V to three receivers; fan-in from three senders to one sink.
    Each peer's messages are read in order, never before they were sent."""
    with tempfile.TemporaryDirectory() as tmp:
        tb = TraceBuilder(Path(tmp) / "run")
        hub = tb.process("V")
        peers = [tb.process(f"W{i}") for i in range(3)]
        channel = E if fan_in else F
        clocks = {"V": 0, **{f"W{i}": 0 for i in range(3)}}
        last_read = dict.fromkeys(range(3), 0)
        truth: dict[tuple[str, int], tuple[str, int]] = {}
        reads: list[tuple[int, int, int, tuple[str, int]]] = []  # (time, peer, fp, send)
        for t, (peer, fp, gap, delay) in enumerate(messages, start=1):
            sender = f"W{peer}" if fan_in else "V"
            clocks[sender] += 2 if gap else 1  # a gap: something else was recorded
            (peers[peer] if fan_in else hub).send(clocks[sender], "zmq", channel, fp=fp,
                                                  t=10 * t)
            read_at = max(10 * t + delay, last_read[peer] + 1)
            last_read[peer] = read_at
            reads.append((read_at, peer, fp, (sender, clocks[sender])))
        for read_at, peer, fp, send in sorted(reads):
            reader = "V" if fan_in else f"W{peer}"
            clocks[reader] += 1
            (hub if fan_in else peers[peer]).recv(clocks[reader], "zmq", channel, fp=fp,
                                                  t=read_at)
            truth[(reader, clocks[reader])] = send
        _check(load(tb), truth)
