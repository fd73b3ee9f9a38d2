"""asyncio's self-pipe and the signal wakeup fd: a channel with writes distea cannot see.

CPython's C signal handler writes one byte to the wakeup fd that asyncio set
(``signal.set_wakeup_fd``); no wrapper sees it, so the self-pipe's offsets
run behind what its reader gets. Before the wakeup channel and cycle
demotion, this 11-line program gave a run that no query could order
("the recorded order has a cycle"). Now the channel is marked, paired
without offsets and reported; and a run recorded without the mark (a tracer
that cannot see the write) is still analysable, the bad pairing demoted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from distea.analyzer.order import compute_order
from distea.cli import main
from tests.analyzer.conftest import load
from tests.analyzer.tracebuilder import TraceBuilder
from tests.channels.support import run_both

PROGRAM = '''\
import asyncio, os, signal, threading

async def main():
    loop = asyncio.get_running_loop()
    got = asyncio.Event()
    loop.add_signal_handler(signal.SIGUSR1, got.set)
    os.kill(os.getpid(), signal.SIGUSR1)
    await got.wait()
    done = asyncio.Event()
    threading.Thread(target=lambda: loop.call_soon_threadsafe(done.set)).start()
    await done.wait()
    print("done")

asyncio.run(main())
'''


@pytest.fixture
def script(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    path = work / "selfpipe.py"
    path.write_text(PROGRAM)
    return path


def test_signal_wakeup_channel_is_marked_and_the_run_analysable(script: Path) -> None:
    traced = run_both(script)
    run = traced.run
    assert traced.stdout == "done\n"
    markers = traced.events("untrusted")
    assert len(markers) == 1 and "set_wakeup_fd" in str(markers[0].meta)
    # the self-pipe's receives are not paired by offsets; their only writer is their
    # own process, whose clock orders them exactly
    assert not traced.edges("unix")
    unix = run.matching.by_kind["unix"]
    assert unix.recvs >= 1 and unix.matched == unix.recvs and not unix.ambiguous
    assert "untrusted" not in run.matching.by_kind  # markers are not messages
    compute_order(run.matching, strict=True)  # no cycle left to demote
    assert not run.order.demoted
    assert any("signal wakeup fd" in p and "unix channel" in p for p in run.problems)
    for args in (["show"], ["impact", "selfpipe.main"], ["deps", "selfpipe.main"]):
        result = CliRunner().invoke(main, [*args, "--run", str(run.path)])
        assert result.exit_code == 0, result.output
        assert "signal wakeup fd" in result.stdout.replace("\n", " ")


def test_unmarked_self_pipe_is_demoted_not_fatal(tmp_path: Path) -> None:
    """What the program above recorded before the wakeup channel existed (one process,
    the self-pipe a linked socket pair): the C handler's unseen byte makes the read of
    [0, 1) at clock 3 pair with the send at clock 4, and [1, 2) at 5 with the send at 7.

    By hand: the byte read at 5 is truly the send at 4 (asyncio's own wakeup after the
    signal). Demoted, the receive at 5 falls back on the latest earlier send on the
    channel, the one at 4; the receive at 3 has none and orders nothing.
    """
    tb = TraceBuilder(tmp_path / "run")
    p = tb.process("P")
    p.link("socketpair", "h:sock:1", "h:sock:2")
    p.run("app.main", 1, 9)
    p.recv(3, "unix", "h:sock:1", 0, 1)
    p.send(4, "unix", "h:sock:2", 0, 1)
    p.recv(5, "unix", "h:sock:1", 1, 2)
    p.send(7, "unix", "h:sock:2", 1, 2)
    p.recv(8, "unix", "h:sock:1", 2, 3)
    run = load(tb)
    order = run.order
    events = run.matching.events
    assert {events[r].clock: [events[s].clock for s in ss]
            for r, ss in order.sources.items() if ss} == {5: [4]}
    assert sorted(events[r].clock for r in order.demoted_receives) == [3, 5]
    counts = run.matching.by_kind["unix"]
    assert (counts.matched, counts.ambiguous, counts.external) == (0, 1, 2)
    assert any("unix channel 'h:sock:1'" in p and "2 receive(s)" in p for p in run.problems)


def test_marked_channel_is_paired_without_offsets(tmp_path: Path) -> None:
    """By hand: A marks its wakeup fd (end h:sock:2 of a pair whose other end A reads).
    A forked child B writes to it too (clock 2, offsets [0, 1)), and A itself (clock 4,
    [0, 1) by its own count). A's reads [0, 1) at 3, [1, 2) at 5, [2, 3) at 6 (one
    byte came from the C handler) may each have read B's byte: each is uncertain over
    B's send, which the sweep keeps (it is not after any of them). Impact of b.work,
    run before B's send, reaches A from its first read. No pairing by offsets, so no
    cycle and nothing demoted, though the offsets disagree."""
    tb = TraceBuilder(tmp_path / "run")
    a, b = tb.process("A"), tb.process("B")
    a.link("socketpair", "h:sock:1", "h:sock:2")
    a.send(1, "untrusted", "h:sock:2", 0, 0, why="signal wakeup fd (test)", of="unix")
    a.run("app.after", 3, 7)
    a.recv(3, "unix", "h:sock:1", 0, 1)
    a.send(4, "unix", "h:sock:2", 0, 1)
    a.recv(5, "unix", "h:sock:1", 1, 2)
    a.recv(6, "unix", "h:sock:1", 2, 3)
    b.run("app.work", 1, 2)
    b.send(2, "unix", "h:sock:2", 0, 1)
    run = load(tb)
    counts = run.matching.by_kind["unix"]
    assert (counts.recvs, counts.matched, counts.ambiguous, counts.external) == (3, 0, 3, 0)
    assert "untrusted" not in run.matching.by_kind
    assert not run.order.demoted_receives
    result = run.impact("app.work")
    assert {run.processes[k].role: s for k, s in result.starts.items()} == {"A": 3, "B": 1}
    assert any("signal wakeup fd (test)" in p for p in run.problems)


def test_exactly_ordered_wakeup_channels_share_one_line(tmp_path: Path) -> None:
    """By hand: three event loops of one process, each with its own self-pipe marked,
    each read only after its own process's send (ordered exactly): one line for the
    three. A fourth, also read by a forked child's write, keeps its own line."""
    tb = TraceBuilder(tmp_path / "run")
    a, b = tb.process("A"), tb.process("B")
    clock = 0
    for n in range(4):
        a.link("socketpair", f"h:sock:{n}r", f"h:sock:{n}w")
        a.send(clock := clock + 1, "untrusted", f"h:sock:{n}w", 0, 0,
               why="signal wakeup fd (test)", of="unix")
        a.send(clock := clock + 1, "unix", f"h:sock:{n}w", 0, 1)
        a.recv(clock := clock + 1, "unix", f"h:sock:{n}r", 0, 1)
    b.send(1, "unix", "h:sock:3w", 0, 1)
    run = load(tb)
    lines = [p for p in run.problems if "signal wakeup fd (test)" in p]
    assert len(lines) == 2, lines
    assert lines[0].startswith("unix channel 'h:sock:3r': ") and "1 are ordered after" in lines[0]
    assert lines[1].startswith("3 unix channels ('h:sock:0r', ...): ")
    assert "their 3 receives" in lines[1]
