"""A stream channel recorded as TLS plaintext at one end and wire bytes at the other.

Expected by hand: offsets of the two levels mean different bytes, so a
receive that finds no carrier in its own kind is uncertain over every send
of the other process on that channel (all kinds, clock order), never
external, and one problem line names the channel; receives that do find a
carrier in their own kind (plain bytes before a STARTTLS upgrade) stay
exact.
"""

from __future__ import annotations

from distea.analyzer.run import Run
from tests.analyzer.conftest import load
from tests.analyzer.tracebuilder import TraceBuilder


def _uncertain(run: Run) -> dict[tuple[str, int], set[tuple[tuple[str, int], ...]]]:
    """(receiver role, clock) → its candidate chains as ((sender role, clock), ...)."""
    m = run.matching
    role = {k: p.role for k, p in run.processes.items()}
    return {(role[m.events[r].process], m.events[r].clock):
            {tuple((role[m.events[s].process], m.events[s].clock) for s in chain)
             for chain in chains}
            for r, chains in m.uncertain}


def test_plaintext_sends_and_ciphertext_receives_are_ordered_safely(tb: TraceBuilder) -> None:
    server, client = tb.process("server"), tb.process("client")
    server.send(2, "ssl", "s>c", 0, 8)   # an SSLSocket: plaintext
    server.send(4, "ssl", "s>c", 8, 16)
    client.recv(3, "tcp", "s>c", 0, 1500)  # TLS distea does not know: ciphertext
    client.recv(5, "tcp", "s>c", 1500, 1560)
    run = load(tb)
    chain = (("server", 2), ("server", 4))
    assert _uncertain(run) == {("client", 3): {chain}, ("client", 5): {chain}}
    m = run.matching
    assert (m.matched, m.ambiguous, m.external, m.unmatched_sends) == (0, 2, 0, 0)
    lines = [p for p in run.problems if "'s>c' was recorded as ssl and tcp" in p]
    assert len(lines) == 1 and "2 receive(s) are not paired by byte offsets" in lines[0]


def test_plain_bytes_before_the_upgrade_stay_exact(tb: TraceBuilder) -> None:
    server, client = tb.process("server"), tb.process("client")
    client.send(1, "tcp", "c>s", 0, 9)     # STARTTLS, before the upgrade: both see it
    client.send(3, "tcp", "c>s", 9, 600)   # then its TLS, recorded as wire bytes
    server.recv(2, "tcp", "c>s", 0, 9)
    server.recv(4, "ssl", "c>s", 0, 8)     # the server's plaintext after the upgrade
    run = load(tb)
    m = run.matching
    assert [(m.events[s].clock, m.events[r].clock) for s, r in m.edges] == [(1, 2)]
    assert _uncertain(run) == {("server", 4): {(("client", 1), ("client", 3))}}
    assert (m.matched, m.ambiguous, m.external) == (1, 1, 0)


def test_one_level_at_both_ends_is_not_a_problem(tb: TraceBuilder) -> None:
    server, client = tb.process("server"), tb.process("client")
    client.send(1, "tcp", "c>s", 0, 9)
    server.recv(2, "tcp", "c>s", 0, 9)
    client.send(3, "ssl", "c>s", 0, 8)
    server.recv(4, "ssl", "c>s", 0, 8)
    run = load(tb)
    m = run.matching
    assert (m.matched, m.ambiguous, m.external) == (2, 0, 0)
    assert not run.problems


def test_both_ends_in_one_process_need_no_edge(tb: TraceBuilder) -> None:
    # A test suite's asyncio client (plaintext) and a thread server driving an SSLObject
    # by hand (ciphertext), in one process: its clock orders each send before the
    # receives that follow it; a receive on a channel nobody sent on stays external.
    proc = tb.process("suite")
    proc.send(1, "ssl", "c>s", 0, 4)
    proc.recv(2, "tcp", "c>s", 0, 517)
    proc.recv(3, "tcp", "c>s", 517, 600)
    proc.recv(4, "ssl", "x>s", 0, 8)      # TLS on a channel with no send at all ...
    proc.recv(5, "tcp", "x>s", 0, 100)    # ... recorded at two levels
    run = load(tb)
    m = run.matching
    assert not m.uncertain
    assert (m.matched, m.ambiguous, m.external) == (2, 0, 2)
    assert dict(run.external_reasons) == {"ssl: untraced peer x": 1,
                                          "tcp: untraced peer x": 1}
    (line,) = [p for p in run.problems if "'c>s' was recorded as ssl and tcp" in p]
    assert "2 have the other end in their own process" in line

