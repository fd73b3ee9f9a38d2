"""Pipes paired by byte offsets (distea.analyzer.match_pipes); expectations worked out by hand."""

from __future__ import annotations

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
