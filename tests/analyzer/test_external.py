"""External receives and their reasons, and non-Python children as relays, on hand-built
runs; every expectation is worked out by hand beside it."""

from __future__ import annotations

from distea.wire import NOT_PYTHON
from tests.analyzer.conftest import impacted, load
from tests.analyzer.tracebuilder import TraceBuilder

NO_EXIT = "exit: the process left no exit record (killed, or its last records lost)"


def test_every_external_receive_has_its_reason(tb: TraceBuilder) -> None:
    a, b = tb.process("A"), tb.process("B")
    a.recv(1, "tcp", "10.0.0.5:6379>a:1", 0, 4)  # a server nobody traced
    a.recv(2, "tcp", "10.0.0.5:6379>a:1", 4, 8)
    a.recv(3, "exit", "h:999")  # a child that never said it exited
    a.recv(4, "pipe", "h:pipe:7", 0, 3)  # nobody recorded writing this pipe
    b.send(1, "tcp", "b:2>a:3", 0, 5)
    a.recv(5, "tcp", "b:2>a:3", 0, 5)  # paired
    a.recv(6, "tcp", "b:2>a:3", 5, 9)  # 4 bytes more than B recorded sending
    run = load(tb)
    assert run.matching.external == 5
    assert dict(run.external_reasons) == {
        "tcp: untraced peer 10.0.0.5:6379": 2,
        NO_EXIT: 1,
        "pipe: no traced writer (an untraced process, C code, or a pipe from outside the "
        "run)": 1,
        "tcp: bytes beyond the recorded sends (unseen write or lost records)": 1,
    }
    (line,) = [p for p in run.problems if "have no recorded send" in p]
    assert line.startswith("5 receives have no recorded send; they order nothing — "
                           "2 tcp: untraced peer 10.0.0.5:6379; 1 ")
    assert NO_EXIT in line


def test_receives_counted_matched_without_an_edge_have_no_reason(tb: TraceBuilder) -> None:
    # A signals itself (pid 11) and takes it; B's first acquire passes on the initial
    # count; C's handler runs for a signal nobody traced sent: only C's is external.
    # (CPython's test_signal, traced, said "10006 signal: more receives than recorded
    # sends" beside "29 receives have no recorded send".)
    a, b, c = tb.process("A"), tb.process("B"), tb.process("C")
    a.send(1, "signal", "h:signal:10", t=100, pid=11)
    a.recv(2, "signal", "h:signal:10", t=150, pid=11, pgid=11)
    b.recv(1, "sem", "h:sem:/mp-1", t=50)
    c.recv(1, "signal", "h:signal:10", t=400, pid=13, pgid=13)
    run = load(tb)
    assert (run.matching.matched, run.matching.external) == (2, 1)
    assert dict(run.external_reasons) == {
        "signal: no traced process sent it to this one (the kernel, a terminal, or "
        "untraced)": 1}


def test_a_non_python_child_in_the_middle_is_a_relay(tb: TraceBuilder) -> None:
    # P starts ``sort`` (stdin pipe 1, stdout pipe 2); W writes pipe 1 at W 2 and again
    # at W 8, after hearing from R; R reads pipe 2 at R 4.
    p = tb.process("P")
    p.run("app.start", 1, 1)
    p.send(1, "proc", "P#1", 0, 1)
    p.untraced(70, ["sort"], f"{NOT_PYTHON} (sort)", token="P#1",
               pipes=["h:pipe:1", "h:pipe:2", None])
    p.recv(3, "exit", "h:70")  # P waits for sort
    p.run("app.reap", 4, 4)
    w = tb.process("W")
    w.run("app.write1", 1, 2)
    w.send(2, "pipe", "h:pipe:1", 0, 3)
    w.recv(7, "tcp", "r:1>w:1", 0, 1)
    w.run("app.write2", 8, 8)
    w.send(8, "pipe", "h:pipe:1", 3, 6)
    r = tb.process("R")
    r.run("app.r_early", 1, 2)
    r.recv(4, "pipe", "h:pipe:2", 0, 6)
    r.run("app.r_mid", 5, 5)
    r.send(6, "tcp", "r:1>w:1", 0, 1)
    run = load(tb)
    m = run.matching
    assert m.external == 0 and m.ambiguous == 0
    assert (m.by_kind["pipe"].relayed, m.by_kind["exit"].relayed) == (1, 1)
    # R 4 comes after sort's spawn (P 1: certain), so does all R does then, and W's
    # work after it hears from R (W 7)
    assert impacted(run, "app.start") == {("P", "app.start"), ("P", "app.reap"),
                                          ("R", "app.r_mid"), ("W", "app.write2")}
    # R 4 comes after W 2 too, not after W 8 (which is after R 6, after R 4)
    assert ("R", "app.r_mid") in impacted(run, "app.write1")
    # P's wait (P 3) may come after either write: nothing orders W 8 after it
    assert impacted(run, "app.write2") == {("W", "app.write2"), ("P", "app.reap")}
    # R's early work reaches W at W 7 (R 6), and through W 8 sort's stdin, so P's wait
    assert impacted(run, "app.r_early") == {("R", "app.r_early"), ("R", "app.r_mid"),
                                            ("W", "app.write2"), ("P", "app.reap")}
    assert any("sort" in note for note in run.notes)
    assert any("not Python" in p and "(sort)" in p for p in run.problems)  # files unseen


def test_children_sharing_one_output_pipe_carry_each_others_inputs(tb: TraceBuilder) -> None:
    # P starts ``ls`` and ``cat`` (stdin pipe 1) with one stdout, pipe 9, that R reads at
    # R 3; W writes pipe 1 at W 2. What R read may come from either child: it is
    # ordered after both spawns and after W's write.
    p = tb.process("P")
    p.run("app.start", 1, 2)
    p.send(1, "proc", "P#1", 0, 1)
    p.untraced(70, ["ls"], f"{NOT_PYTHON} (ls)", token="P#1", pipes=[None, "h:pipe:9", None])
    p.send(2, "proc", "P#2", 0, 1)
    p.untraced(71, ["cat"], f"{NOT_PYTHON} (cat)", token="P#2",
               pipes=["h:pipe:1", "h:pipe:9", None])
    w = tb.process("W")
    w.run("app.write", 1, 2)
    w.send(2, "pipe", "h:pipe:1", 0, 3)
    r = tb.process("R")
    r.run("app.before", 1, 2)
    r.recv(3, "pipe", "h:pipe:9", 0, 8)
    r.run("app.after", 4, 4)
    run = load(tb)
    assert run.matching.external == 0 and run.matching.by_kind["pipe"].relayed == 1
    assert ("R", "app.after") in impacted(run, "app.write")
    assert ("R", "app.after") in impacted(run, "app.start")
    assert ("R", "app.before") not in impacted(run, "app.write", "app.start")
