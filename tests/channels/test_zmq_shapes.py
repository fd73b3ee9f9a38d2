"""ZeroMQ fan-out and fan-in in the shapes of ``benchmarks/workloads/zmq_shapes.py``
(pipeline, request-reply broker, PUB/SUB with late subscribers, ROUTER to DEALER
load balancer), run under a real ``distea run`` and checked against each
program's own account of which message each process got.

Every message of one kind has one fingerprint there (forged payloads), so only
per-socket FIFO, same-host time, routing ids and envelopes tell them apart.
Checked for every shape: each certain pair is the real one (or a later send of
the same process with only sends between: the same answers), each uncertain
receive names its real send. How many stay uncertain depends on timing on a
loaded machine: bounds only where the shape leaves little to chance.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from benchmarks.workloads.zmq_shapes import SHAPES
from benchmarks.zmq_ambiguity import REPO, answer, judge, trace, truth
from distea.analyzer.run import Run

pytest.importorskip("zmq")

CHECKED = {"pipeline": 83, "broker": 120, "pubsub": 100, "lb": 83}
"""Receives whose real send the accounts name (a payload sent once on its port):
all but the ``stop``/``END``/``bye`` ones."""
MOST_AMBIGUOUS = {"pubsub": 0.25, "lb": 0.2}
"""Loose bounds on the share of uncertain receives (measured: a few percent and
none); the pipeline's sink and the broker's backend depend on which results
waited together, so only their pairs are checked."""


@pytest.mark.parametrize("shape", SHAPES)
def test_every_claim_agrees_with_the_programs_account(shape: str, tmp_path: Path) -> None:
    run, accounts = trace(shape, tmp_path)
    assert all(p.complete for p in run.processes.values()), run.problems
    verdict = judge(run, truth(run, accounts), answer(REPO, tmp_path / "run"))
    assert verdict.wrong == []
    assert verdict.checked >= CHECKED[shape]
    assert run.matching.by_kind["zmq"].external == 0
    if shape in MOST_AMBIGUOUS:
        assert verdict.share <= MOST_AMBIGUOUS[shape], verdict
    if shape == "broker":
        _broker_envelopes(run)
    if shape == "pubsub":
        _subscribers_since(run)


def _broker_envelopes(run: Run) -> None:
    """The broker forwards each message whole: the backend DEALER's send carries, as
    its envelope, the routing id the frontend ROUTER received the request with,
    and its receive the id the ROUTER then sends the reply to. REP workers' events
    say they are REP's."""
    m = run.matching
    broker = next(k for k, p in run.processes.items()
                  if any(e.kind == "zmq" and e.meta and "peer" in e.meta
                         for e in run.messages[k]))
    events = [e for e in run.messages[broker] if e.kind == "zmq" and e.meta]
    forwarded = 0
    for before, after in pairwise(events):
        if before.direction == "recv" and after.direction == "send":
            ids = {before.meta.get("peer"), before.meta.get("env")} - {None}
            to = {after.meta.get("peer"), after.meta.get("env")} - {None}
            if ids and to and ids != {""}:
                assert ids == to, (before, after)
                forwarded += 1
    assert forwarded >= 60  # 30 requests, 30 replies
    reps = [e for i, e in enumerate(m.events) if e.kind == "zmq" and m.proc_of[i] != broker
            and e.meta and e.meta.get("rep")]
    assert len(reps) == 2 * 33  # 3 workers: 10 requests each, and "stop"


def _subscribers_since(run: Run) -> None:
    """A SUB's receives carry the time before it connected: no later than each receive."""
    subs = [e for e in run.matching.events if e.kind == "zmq" and e.direction == "recv"
            and e.meta and e.meta.get("since")]
    assert subs
    assert all(e.meta["since"] < e.meta["t"] for e in subs)  # type: ignore[index,operator]
