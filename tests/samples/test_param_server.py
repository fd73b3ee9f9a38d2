"""param_server traced by the real ``distea run``, in compact mode and in ``--mode full``.

The sample (sample_systems/param_server): a launcher starts a ZeroMQ ROUTER
server, then worker-0 and worker-1 (REQ). Each worker loads its shard, PULLs
the step-0 weights, then 30 times computes a gradient and PUSHes it; the
server parks each PUSH's reply until both gradients of the step are in, then
`finish_step` averages them, runs `apply_update` and `evaluate_loss` and replies
to both with the new weights. Finally each worker sends DONE; once both are
in, `serve` returns and the server runs `report`.

Every test below runs against both modes' runs (the same questions, two
tracer implementations of the facts); `test_modes_agree` compares them.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from distea.analyzer.impact import ImpactResult
from tests.samples.support import (
    LAUNCHER_BEFORE_CHILDREN_RUN,
    SampleRun,
    check_launcher_channels,
    check_never_impacted,
    check_processes,
    check_stdout,
    fingerprint,
    fp_of,
    kind_counts,
    run_sample,
    stable_name,
)

PS = "sample_systems.param_server"
SERVER, WORKER, DATA, WIRE = f"{PS}.server", f"{PS}.worker", f"{PS}.data", f"{PS}.wire"
WORKERS = ("worker-0", "worker-1")
STEPS = 30
MODES = ("compact", "full")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SampleRun]:
    tmp: Path = tmp_path_factory.mktemp("param_server")
    return {mode: run_sample("param_server", tmp, mode) for mode in MODES}


@pytest.fixture(params=MODES)
def sr(request: pytest.FixtureRequest, runs: dict[str, SampleRun]) -> SampleRun:
    return runs[request.param]


def test_processes_and_output(sr: SampleRun) -> None:
    check_processes(sr, {
        "launcher": PS,
        "server": SERVER,
        "worker-0": WORKER,
        "worker-1": WORKER,
    })
    check_stdout(sr)
    assert "first loss 0.693147  last loss 0.247824" in sr.traced.stdout


def test_channels(sr: SampleRun) -> None:
    check_launcher_channels(sr)
    # ZeroMQ, counted by hand: each worker sends 1 PULL + 30 PUSH + 1 DONE = 32
    # requests and gets 32 replies, so 2 * 32 * 2 = 128 messages, all received.
    zmq = kind_counts(sr, "zmq")
    assert zmq["sends"] == zmq["recvs"] == 4 * (STEPS + 2), zmq
    assert zmq["external"] == 0 and zmq["unmatched_sends"] == 0, zmq
    # Pairing is by channel and fingerprint of the last frame (docs/channels.md).
    # Certain in any case: the 60 PUSHes, whose last frame is the worker's own
    # gradient (different shards, different gradients). Legitimately ambiguous,
    # because look-alike messages share one channel (at most 2 + 2 + 64 = 68):
    # - the 2 PULLs and the 2 DONEs at the server (identical frames from both
    #   workers on "EP connect>bind");
    # - the 64 replies at the workers: the server answers both workers with
    #   identical frames (same step, same weights; b"DONE") on "EP bind>connect".
    #   The ROUTER records the routing id of each (meta["peer"]); an analyzer
    #   that uses it can make these certain, so fewer is allowed, never more.
    # Each ambiguous receive is ordered after every candidate (safe).
    assert zmq["matched"] + zmq["ambiguous"] == zmq["recvs"], zmq
    assert zmq["matched"] >= 2 * STEPS and zmq["ambiguous"] <= 2 + 2 + 4 * (STEPS + 2) // 2, zmq
    # The look-alike classes really are the ones named above ...
    server_recvs = sr.events("server", "recv", "zmq")
    fps = [fp_of(ev) for ev in server_recvs]
    assert fps.count(fingerprint(b"PULL")) == 2 and fps.count(fingerprint(b"DONE")) == 2
    assert len(set(fps)) == 2 + 2 * STEPS  # every PUSH is unique
    # ... and every ambiguous receive is in a class with several look-alike sends.
    sends = Counter((ev.channel, fp_of(ev)) for name in sr.keys
                    for ev in sr.events(name, "send", "zmq"))
    m = sr.run.matching
    ambiguous = [m.events[r] for r, _ in m.uncertain if m.events[r].kind == "zmq"]
    assert len(ambiguous) == zmq["ambiguous"]
    lonely = [ev for ev in ambiguous if sends[(ev.channel, fp_of(ev))] < 2]
    assert not lonely, lonely


def test_never_impacted(sr: SampleRun) -> None:
    # SampleInfo.never_impacted, checked against the code:
    # - server.init_weights and the server's data.make_dataset run at the top of
    #   `serve`, before its first recv_multipart: nothing from a worker exists yet.
    # - worker.load_shard (and its make_dataset) run before the worker's first
    #   send (the PULL): its only receive before then is its own spawn.
    # Each query below starts no earlier than a worker's PULL reply or its own
    # first run, all after these return.
    check_never_impacted(sr)


def test_compute_gradient(sr: SampleRun) -> None:
    res = sr.impact(f"{WORKER}.compute_gradient")
    # Server: no compute_gradient there; the impact arrives with the first PUSH
    # (a gradient message), over the worker -> server edge. PULLs come before
    # any gradient exists. Hand-derived start: the server's first receive whose
    # last frame is neither b"PULL" nor b"DONE".
    pushes = [ev for ev in sr.events("server", "recv", "zmq")
              if fp_of(ev) not in (fingerprint(b"PULL"), fingerprint(b"DONE"))]
    assert sr.start(res, "server") == pushes[0].clock
    sr.expect(res, "server",
              # everything that handles gradients, all only reachable by message
              impacted=[f"{SERVER}.receive_gradient", f"{SERVER}.average_gradients",
                        f"{SERVER}.apply_update", f"{SERVER}.finish_step",
                        f"{SERVER}.evaluate_loss", f"{SERVER}.report", f"{SERVER}.serve"],
              # set up before the first recv_multipart of `serve`
              not_impacted=[f"{SERVER}.init_weights", f"{DATA}.make_dataset"])
    for worker in WORKERS:
        # Each worker: from its own first compute_gradient (or earlier, see
        # pull_weights below). push_gradient and say_done come later; load_shard
        # returned before the PULL was even sent.
        start = sr.start(res, worker)
        assert start is not None and start <= sr.first(worker, f"{WORKER}.compute_gradient")
        sr.expect(res, worker,
                  impacted=[f"{WORKER}.compute_gradient", f"{WORKER}.push_gradient",
                            f"{WORKER}.say_done", f"{WORKER}.train"],
                  not_impacted=[f"{WORKER}.load_shard", f"{DATA}.make_dataset"])
        # Not pinned: worker.pull_weights. If the other worker PUSHes before this
        # worker's PULL is answered, the pull reply comes after that gradient
        # (docs/samples.md: timing-dependent).
    # Launcher: reaps its roles after all of this; nothing it does before the
    # last role starts can be impacted.
    sr.expect(res, "launcher", impacted=["sample_systems._launch.RoleGroup.finish"],
              not_impacted=LAUNCHER_BEFORE_CHILDREN_RUN)


def test_apply_update(sr: SampleRun) -> None:
    res = sr.impact(f"{SERVER}.apply_update")
    # apply_update first runs once both step-0 gradients are in; both workers'
    # PULLs were answered before either worker could push. So in each worker the
    # impact arrives with the second receive (the first PUSH reply, carrying the
    # updated weights) over the server -> worker edge: pull_weights is NOT
    # impacted (deterministically), compute_gradient IS (steps 1..29 run on
    # weights that apply_update produced).
    for worker in WORKERS:
        recvs = sr.events(worker, "recv", "zmq")
        assert sr.start(res, worker) == recvs[1].clock
        sr.expect(res, worker,
                  impacted=[f"{WORKER}.compute_gradient", f"{WORKER}.push_gradient",
                            f"{WORKER}.say_done"],
                  not_impacted=[f"{WORKER}.pull_weights", f"{WORKER}.load_shard"])
    sr.expect(res, "server",
              impacted=[f"{SERVER}.receive_gradient", f"{SERVER}.evaluate_loss",
                        f"{SERVER}.report"],
              not_impacted=[f"{SERVER}.init_weights"])


def test_evaluate_loss(sr: SampleRun) -> None:
    res = sr.impact(f"{SERVER}.evaluate_loss")
    # evaluate_loss runs once in `serve` before the loop, so every reply, the
    # step-0 pull reply included, is sent after it: each worker is impacted from
    # its first receive, and its pull_weights IS impacted (only through the
    # server -> worker edge: the delay is indistinguishable from data).
    for worker in WORKERS:
        recvs = sr.events(worker, "recv", "zmq")
        assert sr.start(res, worker) == recvs[0].clock
        sr.expect(res, worker,
                  impacted=[f"{WORKER}.pull_weights", f"{WORKER}.compute_gradient"],
                  not_impacted=[f"{WORKER}.load_shard", f"{DATA}.make_dataset"])
    sr.expect(res, "server", impacted=[f"{SERVER}.receive_gradient"],
              not_impacted=[f"{SERVER}.init_weights", f"{DATA}.make_dataset"])


def test_report(sr: SampleRun) -> None:
    res = sr.impact(f"{SERVER}.report")
    # report runs after `serve` returned, i.e. after both DONE replies were sent:
    # no worker receives anything afterwards, so neither is impacted at all.
    for worker in WORKERS:
        assert sr.start(res, worker) is None
    # In the server only what is still on the stack, and report itself.
    assert sr.impacted(res, "server") == {
        f"{SERVER}.report", f"{SERVER}.main", f"{SERVER}.<module>"
    }
    # report prints the loss curve to the server's stdout pipe, which the
    # launcher reads (drain_pipes) before it reaps the server: impacted from
    # that read.
    start = sr.start_event(res, "launcher")
    assert start.kind == "pipe" and start.channel in {
        ev.channel for ev in sr.events("server", "send", "pipe")}
    sr.expect(res, "launcher", impacted=["sample_systems._launch.print_transcripts"],
              not_impacted=LAUNCHER_BEFORE_CHILDREN_RUN)


def test_explain_crosses_one_edge(sr: SampleRun) -> None:
    # The shortest chain from a gradient to the server's apply_update is one
    # message: a worker's PUSH to the server.
    exp = sr.run.explain(f"{WORKER}.compute_gradient", f"{SERVER}.apply_update")
    assert exp.impacted and exp.messages == 1
    names = [stable_name(sr.run.processes[step.process]) for step in exp.steps]
    assert names[0] in WORKERS and names[-1] == "server"
    assert {step.detail.split()[0] for step in exp.steps if step.action == "recv"} == {"zmq"}


# -- compact mode against --mode full ------------------------------------------------

QUERIES = (
    f"{WORKER}.compute_gradient",
    f"{SERVER}.apply_update",
    f"{SERVER}.evaluate_loss",
    f"{SERVER}.report",
)
TIMING_DEPENDENT = {
    # (query, process, method) whose membership may differ between two runs:
    # a worker's pull reply may or may not come after the other's first PUSH.
    (f"{WORKER}.compute_gradient", "worker-0", f"{WORKER}.pull_weights"),
    (f"{WORKER}.compute_gradient", "worker-1", f"{WORKER}.pull_weights"),
}
TIMING_DEPENDENT_ANY_QUERY = {
    # Whether the launcher's last drain_pipes call comes after the first exit
    # it reaps depends on when the roles' pipes close relative to their exits.
    ("launcher", "sample_systems._launch.drain_pipes"),
}


def _stable_pairs(sr: SampleRun, query: str, pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
    return {
        (proc, method) for proc, method in pairs
        if (query, proc, method) not in TIMING_DEPENDENT
        and (proc, method) not in TIMING_DEPENDENT_ANY_QUERY
    }


def test_modes_agree(runs: dict[str, SampleRun]) -> None:
    """Two runs, one per mode, give the same answers wherever the run is deterministic.

    The message order is not deterministic (ZeroMQ fair-queues the two workers'
    requests, the OS schedules them), so clock values differ, and so may the
    few memberships listed in TIMING_DEPENDENT*; everything else must agree:
    what executed where, which processes each query reaches, and the impacted
    (process, method) pairs.
    """
    compact, full = runs["compact"], runs["full"]

    def executed(sr: SampleRun) -> set[tuple[str, str]]:
        return {(stable_name(sr.run.processes[key]), method)
                for key, ex in sr.run.executions.items() for method in ex}

    assert executed(compact) == executed(full)
    for query in QUERIES:
        a, b = compact.impact(query), full.impact(query)
        reached_a = {stable_name(compact.run.processes[k]) for k in a.starts}
        reached_b = {stable_name(full.run.processes[k]) for k in b.starts}
        assert reached_a == reached_b, query

        def pairs(sr: SampleRun, res: ImpactResult) -> set[tuple[str, str]]:
            return {(stable_name(sr.run.processes[k]), m) for k, m in res.pairs()}

        only_a = _stable_pairs(compact, query, pairs(compact, a) - pairs(full, b))
        only_b = _stable_pairs(full, query, pairs(full, b) - pairs(compact, a))
        assert not only_a and not only_b, (query, sorted(only_a), sorted(only_b))
