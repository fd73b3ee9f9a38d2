"""Relay edges through an untraced server in the middle, on hand-built runs.

Three processes talk to an untraced Redis at 10.0.0.9:6379 (no traced
process has that address). Expected impact sets are derived by hand in each
test from the rule in docs/semantics.md ("Relays").
"""

from __future__ import annotations

from pathlib import Path

import pytest

import distea
from distea.analyzer.resolve import QueryError
from distea.analyzer.run import Run
from tests.analyzer.tracebuilder import TraceBuilder

RELAY = "10.0.0.9:6379"
A_OUT, A_IN = f"10.0.0.1:5001>{RELAY}", f"{RELAY}>10.0.0.1:5001"
B_OUT, B_IN = f"10.0.0.2:5002>{RELAY}", f"{RELAY}>10.0.0.2:5002"
C_OUT, C_IN = f"10.0.0.3:5003>{RELAY}", f"{RELAY}>10.0.0.3:5003"


def _store_run(tmp_path: Path, b_host: str = "h") -> Path:
    """A writes at t=100 (a SET); B reads at t=50 (too early) and at t=150."""
    b = TraceBuilder(tmp_path / "run")
    a = b.process("A")
    a.run("app.produce", first=1, last=3)
    a.send(2, "tcp", A_OUT, 0, 10, t=100, cmds=["SET"], w=[7])
    a.recv(3, "tcp", A_IN, 0, 5, t=101, fps=[], r=[7])
    b_proc = b.process("B", host=b_host)
    b_proc.run("app.before", first=1, last=4)
    b_proc.send(2, "tcp", B_OUT, 0, 8, t=40, cmds=["GET"], w=[])
    b_proc.recv(5, "tcp", B_IN, 0, 5, t=50, fps=[], r=[7])
    b_proc.run("app.mid", first=6, last=6)
    b_proc.send(7, "tcp", B_OUT, 8, 16, t=140, cmds=["GET"], w=[])
    b_proc.recv(8, "tcp", B_IN, 5, 20, t=150, fps=[77], r=[7])
    b_proc.run("app.after", first=9, last=9)
    return b.write()


def _impacted(run: Run, query: str) -> dict[str, set[str]]:
    res = run.impact(query)
    return {run.processes[k].role: set(v) for k, v in res.impacted.items()}


def test_a_write_reaches_only_receives_after_it_in_time(tmp_path: Path) -> None:
    run = distea.load(_store_run(tmp_path))
    # B's receive at t=50 returned before A's send left (t=100): not after it;
    # the one at t=150 is: B is impacted from clock 8 — only app.after runs then.
    assert _impacted(run, "app.produce") == {"A": {"app.produce"}, "B": {"app.after"}}
    [relay] = run.relays
    assert (relay.address, relay.protocol, relay.relayed, relay.exact) == (RELAY, "redis", 1, 0)
    # A's own reply and B's early one follow no other process's write: "after nothing",
    # yet all three receives are from the relay (not external)
    assert relay.unordered == 2 and run.matching.relayed == 3 and run.matching.external == 0
    exp = run.explain("app.produce", "app.after")
    assert exp.impacted and any(f"untraced server at {RELAY}" in s.detail for s in exp.steps)
    assert [r.address for r in run.relays_carrying(run.impact("app.produce"))] == [RELAY]


def test_across_hosts_the_receive_follows_every_send_not_after_it(tmp_path: Path) -> None:
    run = distea.load(_store_run(tmp_path, b_host="other"))
    # no common clock: B's first receive (clock 5) may already have followed A's send
    assert _impacted(run, "app.produce") == {"A": {"app.produce"},
                                              "B": {"app.mid", "app.after"}}
    assert run.relays[0].untimed == 2


def test_no_relay_turns_it_off_and_says_so(tmp_path: Path) -> None:
    path = _store_run(tmp_path)
    run = Run.load(path, no_relay=[RELAY])
    assert _impacted(run, "app.produce") == {"A": {"app.produce"}}
    assert any("turned off (--no-relay)" in p for p in run.problems)
    with pytest.raises(QueryError, match="no such relay"):
        Run.load(path, no_relay=["1.2.3.4:1"]).matching  # noqa: B018


def test_a_message_reaches_exactly_the_receive_that_carries_it(tmp_path: Path) -> None:
    b = TraceBuilder(tmp_path / "run")
    a = b.process("A")
    a.run("app.make_job", first=1, last=2)
    a.send(2, "tcp", A_OUT, 0, 30, t=100, cmds=["CLIENT", "LPUSH"], w=[], fps=[555])
    a.recv(3, "tcp", A_IN, 0, 9, t=101, fps=[], r=[])
    consumer = b.process("B")
    consumer.send(1, "tcp", B_OUT, 0, 20, t=10, cmds=["BRPOP"], w=[])
    consumer.recv(2, "tcp", B_IN, 0, 40, t=200, fps=[12, 555], r=[12])
    consumer.run("app.handle", first=3, last=3)
    other = b.process("C")
    other.send(1, "tcp", C_OUT, 0, 20, t=10, cmds=["BRPOP"], w=[])
    other.recv(2, "tcp", C_IN, 0, 5, t=300, fps=[], r=[12])
    other.run("app.idle", first=3, last=3)
    run = distea.load(b.write())
    # A sent nothing under the safe rule (a push and a client command): only the
    # receive carrying payload 555 follows its send, with certainty
    assert _impacted(run, "app.make_job") == {"A": {"app.make_job"}, "B": {"app.handle"}}
    assert (run.relays[0].exact, run.relays[0].relayed) == (1, 0)
    assert run.matching.by_kind["tcp"].matched == 1


def _reader(b: TraceBuilder, role: str, n: int, **reply: object) -> None:
    """A process that sends a read at t=10 and gets its reply at t=300."""
    proc = b.process(role)
    out, back = f"10.0.0.{n}:50{n:02}>{RELAY}", f"{RELAY}>10.0.0.{n}:50{n:02}"
    if reply:
        proc.send(1, "tcp", out, 0, 20, t=10, cmds=["GET"], w=[])
    else:
        proc.send(1, "tcp", out, 0, 20, t=10)
    proc.recv(2, "tcp", back, 0, 5, t=300, **reply)
    proc.run(f"app.{role}", first=3, last=3)


def test_a_write_reaches_the_readers_of_its_keys(tmp_path: Path) -> None:
    b = TraceBuilder(tmp_path / "run")
    a = b.process("A")
    a.run("app.make_job", first=1, last=2)
    a.send(2, "tcp", A_OUT, 0, 30, t=100, cmds=["MULTI", "SADD", "LPUSH", "EXEC"], w=[7],
           fps=[555])
    _reader(b, "same_key", 3, fps=[], r=[7])  # reads what A wrote: safe rule
    _reader(b, "other_key", 4, fps=[], r=[8])  # reads another key: nothing from A
    _reader(b, "any_key", 5, fps=[], r=[-1])  # a reply the tracer could not place
    _reader(b, "unparsed", 6)  # no w/r/fps at all: bytes not understood
    run = distea.load(b.write())
    assert _impacted(run, "app.make_job") == {
        "A": {"app.make_job"}, "same_key": {"app.same_key"}, "any_key": {"app.any_key"},
        "unparsed": {"app.unparsed"}}


def test_traced_peers_are_not_relays(tmp_path: Path) -> None:
    b = TraceBuilder(tmp_path / "run")
    a = b.process("A")
    a.run("app.f", first=1, last=1)
    a.send(2, "tcp", "10.0.0.1:5001>10.0.0.2:80", 0, 10, t=100)
    server = b.process("B")
    server.recv(2, "tcp", "10.0.0.1:5001>10.0.0.2:80", 0, 10)
    server.send(3, "tcp", "10.0.0.2:80>10.0.0.1:5001", 0, 10)
    c = b.process("C")
    c.recv(2, "tcp", "10.0.0.2:80>10.0.0.3:5003", 0, 10, t=300)
    run = distea.load(b.write())
    assert run.relays == []
    assert run.matching.external == 1


def test_a_broker_body_reaches_its_consumer_and_names_the_protocol(tmp_path: Path) -> None:
    b = TraceBuilder(tmp_path / "run")
    a = b.process("A")
    a.run("app.publish", first=1, last=2)
    a.send(2, "tcp", A_OUT, 0, 30, t=100, p="amqp", cmds=["60.40"], w=[], fps=[9])
    consumer = b.process("B")
    consumer.send(1, "tcp", B_OUT, 0, 20, t=10, p="amqp", cmds=["60.20"], w=[])
    consumer.recv(2, "tcp", B_IN, 0, 40, t=200, fps=[9], r=[])
    consumer.run("app.on_message", first=3, last=3)
    run = distea.load(b.write())
    assert _impacted(run, "app.publish") == {"A": {"app.publish"}, "B": {"app.on_message"}}
    assert (run.relays[0].protocol, run.relays[0].exact) == ("amqp", 1)
