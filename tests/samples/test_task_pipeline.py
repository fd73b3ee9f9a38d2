"""task_pipeline traced by the real ``distea run``: ZeroMQ PUSH/PULL fan-out, PUB/SUB stop.

The sample (sample_systems/task_pipeline): the sink binds a results PULL and a
control PUB; the ventilator binds a tasks PUSH and a ready PULL and connects a
PUSH to the sink. Each worker connects (waiting for the handshakes), sends its
name (`report_ready`), then in `process_tasks` pulls tasks, runs
`count_primes` (-> `is_prime`) and pushes a RESULT to the sink, until the
sink's STOP arrives. The ventilator waits for both names
(`wait_for_workers`), runs `generate_tasks`, tells the sink the batch size
(`announce_batch`: b"BATCH", b"24") and then `dispatch_tasks`. The sink
collects the 24 results (`collect_results`) and publishes STOP
(`broadcast_stop`). Nothing ever flows back to the ventilator after the
workers' ready messages.
"""

from __future__ import annotations

import pytest

from sample_systems.task_pipeline.ventilator import generate_tasks
from sample_systems.task_pipeline.worker import count_primes
from tests.samples.support import (
    LAUNCHER_BEFORE_CHILDREN_RUN,
    SampleRun,
    check_clean_channel,
    check_launcher_channels,
    check_never_impacted,
    check_processes,
    check_stdout,
    fingerprint,
    fp_of,
    run_sample,
    stable_name,
)

PIPE = "sample_systems.task_pipeline"
SINK, VENT, WORKER = f"{PIPE}.sink", f"{PIPE}.ventilator", f"{PIPE}.worker"
WORKERS = ("worker-1", "worker-2")
TASKS = 24
BATCH_FP = fingerprint(str(TASKS).encode())  # last frame of [b"BATCH", b"24"]


@pytest.fixture(scope="module")
def sr(tmp_path_factory: pytest.TempPathFactory) -> SampleRun:
    return run_sample("task_pipeline", tmp_path_factory.mktemp("task_pipeline"))


def results_received(sr: SampleRun) -> list[int]:
    """Clocks of the sink's RESULT receives (every receive but the BATCH one)."""
    recvs = sr.events("sink", "recv", "zmq")
    assert [fp_of(ev) for ev in recvs].count(BATCH_FP) == 1
    return [ev.clock for ev in recvs if fp_of(ev) != BATCH_FP]


def test_processes_and_output(sr: SampleRun) -> None:
    check_processes(sr, {
        "launcher": PIPE,
        "sink": SINK,
        "ventilator": VENT,
        "worker-1": WORKER,
        "worker-2": WORKER,
    })
    check_stdout(sr)
    assert "[sink] collected 24 results; total = 11524" in sr.traced.stdout


def test_channels(sr: SampleRun) -> None:
    check_launcher_channels(sr)
    # Premise of certain pairing (fingerprints are of the last frame): the 24
    # task bounds, the 24 prime counts and the two worker names all differ.
    bounds = generate_tasks(TASKS)
    assert len(set(bounds)) == TASKS
    assert len({count_primes(b) for b in bounds} | {TASKS}) == TASKS + 1
    counts = check_clean_channel(sr, "zmq")
    # Counted by hand: 2 ready + 1 BATCH + 24 tasks + 24 results + 1 STOP = 52
    # sends; the STOP is one PUB send read by both workers: 53 receives.
    assert (counts["sends"], counts["recvs"]) == (52, 53), counts
    assert set(sr.show["messages"]["by_kind"]) == {"proc", "exit", "pipe", "zmq"}


def test_never_impacted(sr: SampleRun) -> None:
    # ventilator.generate_tasks and wait_for_workers run before dispatch_tasks,
    # and the ventilator receives nothing after the ready messages, which the
    # workers send before any task exists; worker.report_ready runs before the
    # worker's first task receive. So no interesting query reaches them.
    check_never_impacted(sr)


def test_count_primes(sr: SampleRun) -> None:
    res = sr.impact(f"{WORKER}.count_primes")
    # Never the ventilator: it receives only the ready messages, sent before any
    # task was dispatched, let alone counted.
    assert sr.start(res, "ventilator") is None
    # Sink: only through the worker -> sink edge, from the first RESULT (not
    # the BATCH, which may arrive before or after some results).
    assert sr.start(res, "sink") == results_received(sr)[0]
    sr.expect(res, "sink", impacted=[f"{SINK}.collect_results", f"{SINK}.broadcast_stop"],
              not_impacted=["sample_systems._launch.announce_ready"])
    for worker in WORKERS:
        # Each worker is impacted from its own first count_primes at the latest
        # (how the tasks are split is timing-dependent); report_ready ran before
        # it had any task.
        assert sr.start(res, worker) is not None
        sr.expect(res, worker, impacted=[f"{WORKER}.process_tasks"],
                  not_impacted=[f"{WORKER}.report_ready"])
    sr.expect(res, "launcher", impacted=["sample_systems._launch.RoleGroup.finish"],
              not_impacted=LAUNCHER_BEFORE_CHILDREN_RUN)


def test_dispatch_tasks(sr: SampleRun) -> None:
    res = sr.impact(f"{VENT}.dispatch_tasks")
    # Ventilator: generate_tasks, wait_for_workers and announce_batch all ran
    # before dispatch_tasks.
    assert sr.start(res, "ventilator") == sr.first("ventilator", f"{VENT}.dispatch_tasks")
    sr.expect(res, "ventilator", impacted=[f"{VENT}.dispatch_tasks", f"{VENT}.main"],
              not_impacted=[f"{VENT}.generate_tasks", f"{VENT}.wait_for_workers",
                            f"{VENT}.announce_batch"])
    # Workers: through the ventilator -> worker PUSH edge, from the first task
    # they receive (their receives before that: none on zmq). count_primes is
    # impacted only by way of that message.
    for worker in WORKERS:
        first_task = sr.events(worker, "recv", "zmq")[0]
        assert sr.start(res, worker) == first_task.clock
        # (The split of tasks is timing-dependent: don't require both to count.)
        counted = [m for m in (f"{WORKER}.count_primes", f"{WORKER}.is_prime")
                   if sr.executed(worker, m)]
        sr.expect(res, worker, impacted=[f"{WORKER}.process_tasks", *counted],
                  not_impacted=[f"{WORKER}.report_ready"])
    assert any(sr.executed(w, f"{WORKER}.count_primes") for w in WORKERS)
    # Sink: the BATCH message was sent before dispatch_tasks, so it carries
    # nothing; the impact arrives with the first RESULT (two edges).
    assert sr.start(res, "sink") == results_received(sr)[0]
    sr.expect(res, "sink", impacted=[f"{SINK}.collect_results", f"{SINK}.broadcast_stop"])
    # ...and the shortest chain to the sink's collect_results goes through a
    # worker: two messages, not the direct (earlier) BATCH message.
    exp = sr.run.explain(f"{VENT}.dispatch_tasks", f"{SINK}.collect_results")
    assert exp.impacted and exp.messages == 2
    hops = [stable_name(sr.run.processes[s.process]) for s in exp.steps]
    assert hops[0] == "ventilator" and hops[2] in WORKERS and hops[-1] == "sink", hops


def test_broadcast_stop(sr: SampleRun) -> None:
    res = sr.impact(f"{SINK}.broadcast_stop")
    # The ventilator never hears from the sink.
    assert sr.start(res, "ventilator") is None
    # Sink: collect_results returned before broadcast_stop.
    sr.expect(res, "sink", impacted=[f"{SINK}.broadcast_stop"],
              not_impacted=[f"{SINK}.collect_results"])
    for worker in WORKERS:
        # Each worker, through the PUB -> SUB edge, at the STOP receive: its last
        # zmq receive (it stops reading after it). Every task was counted before
        # (the sink stops only once it has all 24 results), so count_primes,
        # is_prime and report_ready are not impacted: only process_tasks, which
        # receives the STOP, and what is still on the stack.
        stop = sr.events(worker, "recv", "zmq")[-1]
        assert fp_of(stop) == fingerprint(b"STOP")
        assert sr.start(res, worker) == stop.clock
        sr.expect(res, worker, impacted=[f"{WORKER}.process_tasks", f"{WORKER}.main"],
                  not_impacted=[f"{WORKER}.report_ready"])
        got = sr.impacted(res, worker)
        assert got <= {f"{WORKER}.process_tasks", f"{WORKER}.main", f"{WORKER}.<module>"}, got
