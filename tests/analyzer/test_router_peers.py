"""ZeroMQ ROUTER replies are paired by routing id, not only by content.

A parameter server sends the same weights to every worker: by content alone
each worker's receive could be any of the replies (ambiguous, ordered after
all of them: safe but imprecise). The ROUTER records each reply's routing id
(``meta["peer"]``) and the id each request came from; a certainly paired
request names the process behind an id, so replies pair exactly.
"""

from __future__ import annotations

from pathlib import Path

import distea
from distea.analyzer.run import Run
from tests.analyzer.tracebuilder import TraceBuilder

UP = "tcp://h:5555 connect>bind"
DOWN = "tcp://h:5555 bind>connect"


def write_run(tmp_path: Path, *, with_peers: bool) -> Path:
    b = TraceBuilder(tmp_path / ("peers" if with_peers else "plain"))
    server = b.process("server")
    a = b.process("worker-a")
    w = b.process("worker-b")
    peer = (lambda name: {"peer": name}) if with_peers else (lambda name: {})
    a.run("w.push", first=1, last=2).send(2, "zmq", UP, fp=1)
    w.run("w.push", first=1, last=2).send(2, "zmq", UP, fp=2)
    server.run("s.serve", first=1, last=9)
    server.recv(2, "zmq", UP, fp=1, **peer("a"))
    server.recv(3, "zmq", UP, fp=2, **peer("b"))
    server.send(4, "zmq", DOWN, fp=9, **peer("b"))  # same weights to both workers
    server.run("s.between", first=5, last=5)
    server.send(6, "zmq", DOWN, fp=9, **peer("a"))
    a.recv(3, "zmq", DOWN, fp=9).run("w.pull", first=4, last=4)
    w.recv(3, "zmq", DOWN, fp=9).run("w.pull", first=4, last=4)
    return b.write()


def impacted_roles(run: Run, query: str) -> set[str]:
    result = run.impact([query])
    return {run.processes[key].role for key in result.impacted}


def test_replies_pair_by_routing_id(tmp_path: Path) -> None:
    run = distea.load(write_run(tmp_path, with_peers=True))
    assert run.matching.ambiguous == 0
    assert run.matching.matched == 4
    # worker-b's reply left before s.between ran; worker-a's after it.
    assert impacted_roles(run, "s.between") == {"server", "worker-a"}


def test_without_routing_ids_the_same_replies_are_ambiguous_and_safe(tmp_path: Path) -> None:
    run = distea.load(write_run(tmp_path, with_peers=False))
    assert run.matching.ambiguous == 2
    # each worker is ordered after both replies: worker-b is (imprecisely) impacted
    assert impacted_roles(run, "s.between") == {"server", "worker-a", "worker-b"}
