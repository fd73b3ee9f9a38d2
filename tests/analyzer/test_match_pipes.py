"""Pipes paired by byte offsets and, where several processes used one end at once,
by their CLOCK_MONOTONIC brackets (distea.analyzer.match_pipes): expectations worked
out by hand, and a property test against a simulated pipe."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distea.analyzer.run import Run
from tests.analyzer.conftest import impacted, load
from tests.analyzer.test_matching import pairs
from tests.analyzer.tracebuilder import TraceBuilder

PIPE = "h:pipe:7"


def counts(run: Run) -> tuple[int, int, int, int]:
    m = run.matching
    return m.matched, m.ambiguous, m.external, m.unmatched_sends


def test_one_write_read_as_header_and_body(tb: TraceBuilder) -> None:
    w, r = tb.process("W"), tb.process("R")
    w.send(2, "pipe", PIPE, 0, 7)
    r.recv(3, "pipe", PIPE, 0, 2)  # the header
    r.recv(4, "pipe", PIPE, 2, 7)  # the body
    run = load(tb)
    assert pairs(run) == {(("W", 2), ("R", 3)), (("W", 2), ("R", 4))}
    assert counts(run) == (2, 0, 0, 0)


def test_two_writes_read_at_once_pair_with_the_last_byte(tb: TraceBuilder) -> None:
    w, r = tb.process("W"), tb.process("R")
    w.send(2, "pipe", PIPE, 0, 5)
    w.send(4, "pipe", PIPE, 5, 9)
    w.send(6, "pipe", PIPE, 9, 12)  # never read
    r.recv(5, "pipe", PIPE, 0, 9)
    run = load(tb)
    assert pairs(run) == {(("W", 4), ("R", 5))}  # byte 8 came with the second write
    assert counts(run) == (1, 0, 0, 1)


def test_an_end_handed_over_at_fork_stays_exact(tb: TraceBuilder) -> None:
    # The parent wrote [0, 3) and forked; the child inherited the count and wrote
    # [3, 5); the parent never wrote again. Disjoint ranges: one stream.
    parent, child, reader = tb.process("P"), tb.process("C"), tb.process("R")
    parent.send(1, "pipe", PIPE, 0, 3)
    child.send(2, "pipe", PIPE, 3, 5)
    reader.recv(4, "pipe", PIPE, 0, 2)
    reader.recv(6, "pipe", PIPE, 2, 5)
    run = load(tb)
    assert pairs(run) == {(("P", 1), ("R", 4)), (("C", 2), ("R", 6))}
    assert counts(run) == (2, 0, 0, 0)


def test_two_writers_at_once_make_every_read_uncertain(tb: TraceBuilder) -> None:
    # Both counted [0, 2) after the fork: nobody knows how their bytes interleaved.
    a, b, reader = tb.process("A"), tb.process("B"), tb.process("R")
    a.send(1, "pipe", PIPE, 0, 2)
    a.send(3, "pipe", PIPE, 2, 4)
    b.send(2, "pipe", PIPE, 0, 2)
    reader.recv(5, "pipe", PIPE, 0, 2)
    reader.recv(6, "pipe", PIPE, 2, 6)
    run = load(tb)
    assert pairs(run) == set()
    assert counts(run) == (0, 2, 0, 0)
    m = run.matching
    for r, chains in m.uncertain:
        # one chain per writer, in clock order; ordered after the latest of each
        assert sorted(tuple(m.events[s].clock for s in chain) for chain in chains) == [
            (1, 3), (2,)]
        senders = {run.processes[m.events[s].process].role for s in run.order.sources[r]}
        assert senders == {"A", "B"}


def test_two_readers_at_once_are_uncertain_but_never_unordered(tb: TraceBuilder) -> None:
    w, r1, r2 = tb.process("W"), tb.process("R1"), tb.process("R2")
    w.send(1, "pipe", PIPE, 0, 4)
    w.first("app.wrote", 1)
    r1.recv(2, "pipe", PIPE, 0, 2)
    r1.run("app.after1", 3)
    r2.recv(2, "pipe", PIPE, 0, 2)
    r2.run("app.after2", 3)
    run = load(tb)
    assert counts(run) == (0, 2, 0, 0)
    assert {("R1", "app.after1"), ("R2", "app.after2")} <= impacted(run, "app.wrote")


def test_bytes_no_write_carried_distrust_every_offset(tb: TraceBuilder) -> None:
    # An unseen writer (a non-Python child) put 3 bytes in first: the reader's
    # offsets are 3 ahead of the traced writer's, so none is trusted.
    w, r = tb.process("W"), tb.process("R")
    w.send(2, "pipe", PIPE, 0, 4)
    r.recv(3, "pipe", PIPE, 0, 3)
    r.recv(5, "pipe", PIPE, 3, 7)
    run = load(tb)
    assert counts(run) == (0, 2, 0, 0)
    assert any(PIPE in note and "no recorded write" in note for note in run.problems)


def test_reads_with_no_recorded_write_are_external(tb: TraceBuilder) -> None:
    r = tb.process("R")
    r.recv(3, "pipe", PIPE, 0, 3)
    run = load(tb)
    assert counts(run) == (0, 0, 1, 0)
    assert "1 receives have no recorded send" in " ".join(run.problems)


def test_a_process_reading_its_own_pipe(tb: TraceBuilder) -> None:
    p = tb.process("P")
    p.send(1, "pipe", PIPE, 0, 1)
    p.recv(2, "pipe", PIPE, 0, 1)
    run = load(tb)
    assert counts(run) == (1, 0, 0, 0)


def test_runs_from_before_pipes_were_streams_read_their_byte_ranges(tb: TraceBuilder) -> None:
    # Old records: start/end were message indexes, the bytes in meta["bytes"].
    w, r = tb.process("W"), tb.process("R")
    w.send(2, "pipe", PIPE, 0, 1, fp=1, bytes=[0, 7])
    r.recv(3, "pipe", PIPE, 0, 1, fp=2, bytes=[0, 2])
    r.recv(4, "pipe", PIPE, 1, 2, fp=3, bytes=[2, 7])
    run = load(tb)
    assert pairs(run) == {(("W", 2), ("R", 3)), (("W", 2), ("R", 4))}


def test_a_read_of_its_own_later_write_distrusts_the_pipe(tb: TraceBuilder) -> None:
    # A self-pipe: a C signal handler wrote a wakeup byte (unseen) that the
    # process read at clock 2; its own Python write of a byte came at clock 5.
    # By offsets the read would pair with the later write: a cycle. Distrusted.
    p = tb.process("P")
    p.recv(2, "pipe", PIPE, 0, 1)
    p.send(5, "pipe", PIPE, 0, 1)
    run = load(tb)
    assert pairs(run) == set()
    assert counts(run) == (0, 1, 0, 0)
    assert any(PIPE in note for note in run.problems)
    assert run.order is not None  # analysable


# -- several writers at once, placed by their CLOCK_MONOTONIC brackets (meta["t"]) -------


def before(run: Run, send: tuple[str, int], recv: tuple[str, int]) -> bool:
    """Whether the order puts (role, clock) ``send`` before ``recv``."""
    index = {run.processes[k].role: i for k, i in run.order.index.items()}
    return run.order.happens_before(index[send[0]], send[1], index[recv[0]], recv[1])


def _tracker(tb: TraceBuilder, *, b_starts: int = 20, host_b: str = "h") -> None:
    """A and B both count from 0 (two writers at once); R reads 5, then 7, then 2.
    By the brackets the pipe holds A1 [0, 4), B1 [4, 9), A2 [9, 12)."""
    a, b, r = tb.process("A"), tb.process("B", host=host_b), tb.process("R")
    a.send(2, "pipe", PIPE, 0, 4, t=[10, 11])
    b.send(2, "pipe", PIPE, 0, 5, t=[b_starts, 21])
    a.send(4, "pipe", PIPE, 4, 7, t=[30, 31])
    r.recv(3, "pipe", PIPE, 0, 5, t=[22, 23])  # A1 and B1's first byte
    r.recv(5, "pipe", PIPE, 5, 12, t=[40, 41])  # the rest of B1, and A2
    r.recv(7, "pipe", PIPE, 12, 14, t=[50, 51])  # bytes nobody recorded? see the tests


def test_disjoint_brackets_place_every_byte(tb: TraceBuilder) -> None:
    a, b, r = tb.process("A"), tb.process("B"), tb.process("R")
    a.send(2, "pipe", PIPE, 0, 4, t=[10, 11])
    b.send(2, "pipe", PIPE, 0, 5, t=[20, 21])
    a.send(4, "pipe", PIPE, 4, 7, t=[30, 31])
    r.recv(3, "pipe", PIPE, 0, 5, t=[22, 23])
    r.recv(5, "pipe", PIPE, 5, 12, t=[40, 41])
    run = load(tb)
    # the 1st read got A1 and B1's first byte: after both; the 2nd got the rest of
    # B1 (already before it, through the 1st read) and A2
    assert pairs(run) == {(("A", 2), ("R", 3)), (("B", 2), ("R", 3)), (("A", 4), ("R", 5))}
    assert counts(run) == (2, 0, 0, 0)
    assert run.problems == []


def test_a_write_after_the_read_returned_is_not_its_sender(tb: TraceBuilder) -> None:
    """B's bytes are in the pipe after A's; the read took only A's, and B wrote
    after the read returned: R is not after B."""
    a, b, r = tb.process("A"), tb.process("B"), tb.process("R")
    a.send(2, "pipe", PIPE, 0, 4, t=[10, 11])
    b.send(2, "pipe", PIPE, 0, 5, t=[30, 31])
    a.send(3, "pipe", PIPE, 4, 6, t=[40, 41])  # A counts on, so the ranges overlap
    r.recv(3, "pipe", PIPE, 0, 4, t=[20, 21])
    run = load(tb)
    assert pairs(run) == {(("A", 2), ("R", 3))}
    assert not before(run, ("B", 2), ("R", 3))
    assert counts(run) == (1, 0, 0, 2)


def test_overlapping_writes_around_a_reads_end_are_uncertain(tb: TraceBuilder) -> None:
    """A1 [10, 11] and B1 [10, 21] overlap: the pipe holds A1 and B1 in some order
    in [0, 9). The first read took 5 bytes: A1 and one byte of B1, or B1 alone.
    Uncertain over both, and ordered after both (safe)."""
    _tracker(tb, b_starts=10)
    tb.procs[2].records.pop()  # no third read
    run = load(tb)
    m = run.matching
    assert (m.matched, m.ambiguous) == (1, 1)  # the 2nd read's end is placed: matched
    for sender in (("A", 2), ("B", 2)):
        assert before(run, sender, ("R", 3))
    assert before(run, ("A", 4), ("R", 5))


def test_writes_begun_before_a_read_returned_that_fill_it_exactly_are_certain(
        tb: TraceBuilder) -> None:
    """A reader blocked on the pipe, woken by each write (the resource tracker
    under load): A1 [10, 30] and B1 [26, 40] overlap, so the pipe holds them in
    [0, 9) in some order. But B1 began after the first read returned, so its
    bytes are behind the 4 that read took: those are A1's, exactly."""
    a, b, r = tb.process("A"), tb.process("B"), tb.process("R")
    a.send(2, "pipe", PIPE, 0, 4, t=[10, 30])
    b.send(2, "pipe", PIPE, 0, 5, t=[26, 40])
    r.recv(3, "pipe", PIPE, 0, 4, t=[5, 25])
    r.recv(5, "pipe", PIPE, 4, 9, t=[27, 41])
    run = load(tb)
    assert pairs(run) == {(("A", 2), ("R", 3)), (("B", 2), ("R", 5))}
    assert not before(run, ("B", 2), ("R", 3))
    assert counts(run) == (2, 0, 0, 0)


def test_bytes_beyond_every_recorded_write_distrust_the_pipe(tb: TraceBuilder) -> None:
    _tracker(tb)  # the 3rd read got 2 bytes that no recorded write carried
    run = load(tb)
    assert counts(run) == (0, 3, 0, 0)
    assert any(PIPE in note and "no recorded write" in note for note in run.problems)


def test_brackets_across_hosts_fall_back(tb: TraceBuilder) -> None:
    _tracker(tb, host_b="other")
    tb.procs[2].records.pop()
    run = load(tb)
    assert counts(run) == (0, 2, 0, 0)


def test_a_reader_that_lost_records_falls_back(tb: TraceBuilder) -> None:
    _tracker(tb)
    tb.procs[2].records.pop()
    tb.procs[2].complete = False  # type: ignore[attr-defined]  # killed before its flush
    run = load(tb)
    assert counts(run) == (0, 2, 0, 0)


def test_a_writer_that_lost_records_is_still_placed_safely(tb: TraceBuilder) -> None:
    """A was killed after its last flush: an unrecorded write of A (2 bytes,
    before B's) pushes B's bytes 2 later than recorded. The second read, of
    [4, 9) by the recorded bytes, really got A's lost 2 bytes and 3 of B1's:
    it is still after B1 (B1 starts before its end, however many bytes were
    unseen)."""
    a, b, r = tb.process("A", complete=False), tb.process("B"), tb.process("R")
    a.send(2, "pipe", PIPE, 0, 4, t=[10, 11])
    # A wrote 2 more bytes at [15, 16] and was killed before they were flushed
    b.send(2, "pipe", PIPE, 0, 5, t=[20, 21])
    r.recv(3, "pipe", PIPE, 0, 4, t=[22, 23])  # A1
    r.recv(5, "pipe", PIPE, 4, 9, t=[40, 41])  # A's lost 2 bytes, and 3 of B1
    run = load(tb)
    assert counts(run) == (2, 0, 0, 0)  # the problems name the killed process
    assert before(run, ("B", 2), ("R", 5))
    assert before(run, ("A", 2), ("R", 3))


# -- a simulated pipe: whatever the brackets, every write a read got is before it ------


@dataclass
class Op:
    """One system call of the simulated pipe."""

    process: int
    write: bool
    size: int
    t0: int
    t1: int
    moment: float
    """When the kernel moved its bytes, inside ``[t0, t1]``."""
    lag: float = 0.5
    """How long before ``t0`` a write's send was stamped, after ``t1`` a read's
    receive was recorded (other threads may run meanwhile; its own next call
    comes later)."""
    recorded: bool = True
    clock: int = 0
    got: tuple[int, ...] = ()
    """A read's bytes: the index (in ``ops``) of the write each came from."""
    start: int = 0
    """A write's first byte in the pipe, a read's first byte."""
    moved: int = 0


@st.composite
def pipe_histories(draw: st.DrawFn) -> list[Op]:
    """Processes 0.. each make a few reads or writes, one after another in each of
    their threads (one or two), at random times that often overlap other calls'
    brackets; the kernel moves each call's bytes at one moment inside its
    bracket, a write all at once (at most PIPE_BUF), a read what is there (up to
    its size). Some writes are by a writer nobody traced."""
    ops: list[Op] = []
    for process, _thread in draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1)),
                                          min_size=2, max_size=5, unique=True)):
        t = draw(st.integers(0, 6))
        for _ in range(draw(st.integers(1, 5))):
            write = draw(st.booleans())
            length = draw(st.integers(1, 6))
            t0 = t + draw(st.integers(0, 4))
            t1 = t0 + draw(st.integers(0, 5))
            moment = t0 + draw(st.floats(0, 1)) * (t1 - t0)
            lag = draw(st.sampled_from((0.5, 0.5, 2.25)))
            ops.append(Op(process, write, length, t0, t1, moment, lag))
            t = t1 + draw(st.integers(5, 7))  # more than two lags
    hidden = draw(st.booleans())
    for _ in range(draw(st.integers(0, 2)) if hidden else 0):
        t0 = draw(st.integers(0, 50))
        ops.append(Op(-1, True, draw(st.integers(1, 4)), t0, t0 + 1, t0 + 0.5, recorded=False))
    pipe: list[int] = []  # the bytes in the pipe, as the index of the write of each
    written = taken = 0
    for k in sorted(range(len(ops)), key=lambda k: (ops[k].moment, k)):
        op = ops[k]
        if op.write:
            op.start, op.moved = written, op.size
            pipe.extend([k] * op.size)
            written += op.size
        else:
            op.start, op.moved = taken, min(op.size, len(pipe))
            op.got, pipe = tuple(pipe[:op.moved]), pipe[op.moved:]
            taken += op.moved
    return ops


def _trace(tb: TraceBuilder, ops: list[Op]) -> None:
    """Records as tracers write them: each process counts its own bytes as its
    calls return (``t1``; the tracer adds to its count right after reading it),
    and its clock orders a write when its send was stamped (before it began), a
    read when its receive was recorded (after it returned)."""
    recorded = [op for op in ops if op.recorded and op.moved]
    offset: dict[int, int] = {}
    counts: dict[tuple[int, bool], int] = {}
    for k, op in sorted(enumerate(recorded), key=lambda item: (item[1].t1, item[1].t0)):
        offset[k] = counts.get((op.process, op.write), 0)
        counts[(op.process, op.write)] = offset[k] + op.moved
    procs = {}
    for k, op in sorted(enumerate(recorded), key=lambda item: (
            item[1].process, item[1].t0 - item[1].lag if item[1].write
            else item[1].t1 + item[1].lag)):
        proc = procs.get(op.process)
        if proc is None:
            proc = procs[op.process] = tb.process(f"P{op.process}")
        op.clock = 2 * len(proc.records)
        a = offset[k]
        (proc.send if op.write else proc.recv)(op.clock, "pipe", PIPE, a, a + op.moved,
                                               t=[op.t0, op.t1])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pipe_histories())
def test_every_write_a_read_got_is_ordered_before_it(ops: list[Op]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tb = TraceBuilder(Path(tmp) / "run")
        _trace(tb, ops)
        if not tb.procs:
            return
        run = load(tb)
        order, m = run.order, run.matching
        assert not order.demoted  # no cycle
        index = {run.processes[k].role: i for k, i in order.index.items()}
        distrusted = any(PIPE in note for note in m.notes)  # unseen bytes: the old rule
        candidates = {(r, s) for r, chains in m.uncertain for chain in chains for s in chain}
        ids = {(run.processes[ev.process].role, ev.clock): i for i, ev in enumerate(m.events)}
        for r in ops:
            for k in set(r.got):
                w = ops[k]
                if not w.recorded or not r.moved or w.process == r.process:
                    continue  # a process's own writes are before its reads by its clock
                if distrusted:  # every read uncertain over every write of the others
                    assert (ids[(f"P{r.process}", r.clock)],
                            ids[(f"P{w.process}", w.clock)]) in candidates, (w, r)
                    continue
                assert order.happens_before(index[f"P{w.process}"], w.clock,
                                            index[f"P{r.process}"], r.clock), (w, r)
        if any(not op.recorded for op in ops):
            return
        # nothing unseen: a certain pairing is a write that really started before the
        # read's last byte, and where no two brackets of one end overlap, nothing is
        # ambiguous
        by_clock = {(f"P{op.process}", op.clock): op for op in ops if op.moved}
        for (wp, wc), (rp, rc) in pairs(run):
            w, r = by_clock[(wp, wc)], by_clock[(rp, rc)]
            assert w.start < r.start + r.moved, (w, r)
        moved = [op for op in ops if op.moved]
        if all(not _overlap(a, b) for a in moved for b in moved
               if a is not b and a.write == b.write):
            assert m.ambiguous == 0, m.notes


def _overlap(a: Op, b: Op) -> bool:
    return not (a.t1 < b.t0 or b.t1 < a.t0)
