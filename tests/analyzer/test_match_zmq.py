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


def test_fan_out_two_readers_of_two_sends_leave_the_third_to_the_third(
        tb: TraceBuilder) -> None:
    """V sends three look-alikes (a method runs between them: no burst). W1 and W2
    read at 25 and 26, when only the first two were sent; W3 reads at 100. W1 and
    W2 took the first two between them (which one each: open), so W3 read the
    third, though time alone would allow it any of the three."""
    v, w1, w2, w3 = (tb.process(n) for n in ("V", "W1", "W2", "W3"))
    for k, clock in enumerate((2, 4, 6)):
        v.send(clock, "zmq", F, fp=1, t=10 * (k + 1))
        v.run("vent.build", clock + 1)
    w1.recv(2, "zmq", F, fp=1, t=25)
    w2.recv(2, "zmq", F, fp=1, t=26)
    w3.recv(2, "zmq", F, fp=1, t=100)
    run = load(tb)
    assert (("V", 6), ("W3", 2)) in pairs(run)
    assert run.matching.by_kind["zmq"].ambiguous == 2


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


# -- PUB/SUB: each subscriber reads a subsequence of what was published ---------------


def test_late_subscriber_reads_what_was_published_after_it_connected(tb: TraceBuilder) -> None:
    """P publishes four look-alikes (a method runs between each: no burst), each send
    over 2 after it began; S connected at 25, after the first two had ended, and
    got two: the last two. Paired k-th to
    k-th, S would come after P's first sends only: what P did between them and the
    real ones would be missed."""
    p, s = tb.process("P"), tb.process("S")
    for k, clock in enumerate((2, 4, 6, 8)):
        p.send(clock, "zmq", F, fp=1, t=10 * (k + 1), t_end=10 * (k + 1) + 2, fanout=True)
        p.run("pub.build", clock + 1)
    s.recv(2, "zmq", F, fp=1, t=35, since=25)
    s.recv(3, "zmq", F, fp=1, t=45, since=25)
    run = load(tb)
    assert pairs(run) == {(("P", 6), ("S", 2)), (("P", 8), ("S", 3))}
    assert run.matching.ambiguous == 0


def test_subscriber_connected_during_a_send_may_have_got_it(tb: TraceBuilder) -> None:
    """S connected at 21, after P's second send began (20) but before it returned
    (22): the publisher may have learnt the subscription inside that send."""
    p, s = tb.process("P"), tb.process("S")
    for k, clock in enumerate((2, 4, 6, 8)):
        p.send(clock, "zmq", F, fp=1, t=10 * (k + 1), t_end=10 * (k + 1) + 2, fanout=True)
        p.run("pub.build", clock + 1)
    s.recv(2, "zmq", F, fp=1, t=100, since=21)
    s.recv(3, "zmq", F, fp=1, t=101, since=21)
    s.recv(4, "zmq", F, fp=1, t=102, since=21)
    assert pairs(load(tb)) == {(("P", 4), ("S", 2)), (("P", 6), ("S", 3)), (("P", 8), ("S", 4))}


def test_subscriber_without_its_start_keeps_every_candidate(tb: TraceBuilder) -> None:
    """The same without ``since``: S's first read could be any of the first three
    sends, its second any of the last three; none is claimed for certain."""
    p, s = tb.process("P"), tb.process("S")
    for k, clock in enumerate((2, 4, 6, 8)):
        p.send(clock, "zmq", F, fp=1, t=10 * (k + 1), fanout=True)
        p.run("pub.build", clock + 1)
    s.recv(2, "zmq", F, fp=1, t=100)
    s.recv(3, "zmq", F, fp=1, t=101)
    m = load(tb).matching
    assert (m.matched, m.ambiguous) == (0, 2)
    key = {i: (e.process.split(":")[0], e.clock) for i, e in enumerate(m.events)}
    candidates = sorted(sorted(key[s][1] for chain in chains for s in chain)
                        for _, chains in m.uncertain)
    assert candidates == [[2, 4, 6], [4, 6, 8]]


def test_two_subscribers_may_read_one_publication(tb: TraceBuilder) -> None:
    """No exclusion between subscribers: both read P's only send (S2 connected while
    it was being sent: in time for it, maybe)."""
    p, s1, s2 = tb.process("P"), tb.process("S1"), tb.process("S2")
    p.send(2, "zmq", F, fp=1, t=10, t_end=11, fanout=True)
    s1.recv(2, "zmq", F, fp=1, t=20, since=5)
    s2.recv(2, "zmq", F, fp=1, t=21, since=11)
    assert pairs(load(tb)) == {(("P", 2), ("S1", 2)), (("P", 2), ("S2", 2))}


# -- a DEALER before REP workers: the envelope links request and reply ---------------


def _broker_backend(tb: TraceBuilder, reply_times: tuple[int, int]) -> None:
    """D (a DEALER) forwards client A's request, then client B's (it received on the
    frontend between: no burst); W1 got the first one that came, W2 the other,
    both after both were sent. W1 replies at ``reply_times[0]``, W2 at
    ``reply_times[1]``; D reads the replies at 60 and 61."""
    d, w1, w2, c = (tb.process(n) for n in ("D", "W1", "W2", "C"))
    front = "tcp://h:7 connect>bind"
    c.send(2, "zmq", front, fp=9, t=1)
    c.send(3, "zmq", front, fp=9, t=2)
    d.recv(2, "zmq", front, fp=9, t=5)
    d.send(3, "zmq", F, fp=1, t=10, env="00aa")
    d.recv(4, "zmq", front, fp=9, t=11)
    d.send(5, "zmq", F, fp=1, t=12, env="00bb")
    w1.recv(2, "zmq", F, fp=1, t=20, rep=True)
    w2.recv(2, "zmq", F, fp=1, t=21, rep=True)
    w1.send(3, "zmq", E, fp=2, t=reply_times[0], rep=True)
    w2.send(3, "zmq", E, fp=2, t=reply_times[1], rep=True)
    # the replies come back to D with their request's envelope: W1 read A's
    first, second = sorted([("00aa", reply_times[0]), ("00bb", reply_times[1])],
                           key=lambda x: x[1])
    d.recv(6, "zmq", E, fp=2, t=60, env=first[0])
    d.recv(7, "zmq", E, fp=2, t=61, env=second[0])


def test_rep_workers_whose_replies_waited_together_stay_uncertain(tb: TraceBuilder) -> None:
    """W1 replied at 30, W2 at 59: both replies waited when D read at 60. Either W1
    got A's request and replied with A's envelope (read first), or W1 got B's and
    W2's reply (A's) was read first: the four receives stay uncertain."""
    _broker_backend(tb, (30, 59))
    m = load(tb).matching
    assert m.by_kind["zmq"].ambiguous == 4


def test_rep_certain_reply_settles_the_request(tb: TraceBuilder) -> None:
    """W2 replied at 61, after D's first read at 60: that read is W1's reply, with
    A's envelope; so W1 got A's request and W2 B's (time alone leaves the
    requests open: both workers read after both were sent)."""
    _broker_backend(tb, (30, 61))
    run = load(tb)
    assert {(("D", 3), ("W1", 2)), (("D", 5), ("W2", 2)),
            (("W1", 3), ("D", 6)), (("W2", 3), ("D", 7))} <= pairs(run)
    assert run.matching.by_kind["zmq"].ambiguous == 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 40),
                          st.integers(0, 40), st.integers(0, 40)), min_size=1, max_size=10))
def test_simulated_dealer_before_rep_workers(requests) -> None:
    """Requests (client, worker, delay to the worker, work, delay back): D sends them
    with the client's envelope, 10 apart; each worker answers its requests one
    at a time, in order; D reads each reply (with its request's envelope) once
    it is there, each worker's in order. Every claim of the analyzer holds."""
    with tempfile.TemporaryDirectory() as tmp:
        tb = TraceBuilder(Path(tmp) / "run")
        d = tb.process("D")
        workers = [tb.process(f"W{i}") for i in range(3)]
        busy_until = dict.fromkeys(range(3), 0)
        back_at = dict.fromkeys(range(3), 0)
        done = dict.fromkeys(range(3), 0)
        dealer: list[tuple[int, str, str, int]] = []  # (time, direction, envelope, index)
        replies: list[tuple[int, int, int]] = []  # (worker, k, request index) per reply
        for i, (client, w, delay, work, delay_back) in enumerate(requests):
            dealer.append((10 * i, "send", f"00{client}", i))
            got = max(10 * i + delay, busy_until[w] + 1)
            done[w] += 1
            workers[w].recv(2 * done[w], "zmq", F, fp=1, t=got, rep=True)
            workers[w].send(2 * done[w] + 1, "zmq", E, fp=2, t=got + work, rep=True)
            busy_until[w] = got + work
            back_at[w] = max(got + work + delay_back, back_at[w] + 1)
            dealer.append((back_at[w], "recv", f"00{client}", len(replies)))
            replies.append((w, done[w], i))
        truth: dict[tuple[str, int], tuple[str, int]] = {}
        send_clock: dict[int, int] = {}
        for clock, (t, direction, env, index) in enumerate(sorted(dealer), start=2):
            if direction == "send":
                d.send(clock, "zmq", F, fp=1, t=t, env=env)
                send_clock[index] = clock
            else:
                d.recv(clock, "zmq", E, fp=2, t=t, env=env)
                w, k, _ = replies[index]
                truth[("D", clock)] = (f"W{w}", 2 * k + 1)
        for w, k, i in replies:
            truth[(f"W{w}", 2 * k)] = ("D", send_clock[i])
        _check(load(tb), truth)
