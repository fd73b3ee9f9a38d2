"""ring_allreduce traced by the real ``distea run``: spawned ranks, mp queues, a TCP ring.

The sample (sample_systems/ring_allreduce): the launcher creates a results
queue (which starts multiprocessing's resource tracker), then
`start_workers` spawns rank 0..2 with RANK/WORLD_SIZE/LOCAL_RANK set around
each start. Each rank (`run_worker`): `rank_from_environment`, binds a
listener, `rendezvous` (puts (rank, port) on ports_out, then gets the port
table from its own inbox), `connect_ring` (connect right, accept left: no
data), then `train`: `load_shard`, and 30 times `compute_gradient`,
`ring_allreduce` (`reduce_scatter` then `all_gather`, each 2 sends to the
right and 2 receives from the left), `apply_update`; finally it puts its
result on the results queue. The launcher's `share_ports` collects the three
ports and puts the table in every inbox; it then `wait_for`s the three results,
joins the ranks (`stop_workers`) and prints a `report`.

A rank's receives, in order: its spawn, the port table, then ring traffic,
which starts only inside its first `reduce_scatter`, after its own first
`compute_gradient`.
"""

from __future__ import annotations

import pytest

from tests.samples.support import (
    SampleRun,
    check_clean_channel,
    check_never_impacted,
    check_processes,
    check_stdout,
    kind_counts,
    run_sample,
)

RING = "sample_systems.ring_allreduce"
MAIN, WORKER, RINGMOD = f"{RING}.__main__", f"{RING}.worker", f"{RING}.ring"
RANKS = ("rank-0", "rank-1", "rank-2")
STEPS = 30
BEFORE_TRAINING = (f"{WORKER}.load_shard", f"{WORKER}.rendezvous", f"{RINGMOD}.connect_ring",
                   f"{WORKER}.rank_from_environment")
LAUNCHER_SETUP = (f"{MAIN}.start_workers", f"{MAIN}.rank_environment", f"{MAIN}.share_ports")


@pytest.fixture(scope="module")
def sr(tmp_path_factory: pytest.TempPathFactory) -> SampleRun:
    return run_sample("ring_allreduce", tmp_path_factory.mktemp("ring_allreduce"))


def results_channel_first_recv(sr: SampleRun) -> int:
    """Clock of the launcher's first receive from the results queue.

    The launcher reads two queues: ports_out (three receives in share_ports)
    then results (three receives after); the results queue is the channel of
    its last mp receive.
    """
    recvs = sr.events("launcher", "recv", "mp")
    assert len(recvs) == 6
    results = recvs[-1].channel
    assert {ev.channel for ev in recvs[:3]} != {results}
    return min(ev.clock for ev in recvs if ev.channel == results)


def test_processes_and_output(sr: SampleRun) -> None:
    check_processes(sr, {
        "launcher": RING,
        "rank-0": "rank 0/3",
        "rank-1": "rank 1/3",
        "rank-2": "rank 2/3",
        "resource-tracker": None,  # see test_resource_tracker_role
    })
    for r, name in enumerate(RANKS):
        info = sr.info(name)
        assert (info.rank, info.world_size, info.start_method) == (r, 3, "spawn")
    check_stdout(sr)
    assert "3 ranks agree on the final weights" in sr.traced.stdout


def test_resource_tracker_role(sr: SampleRun) -> None:
    # multiprocessing starts the tracker as `python [interpreter flags] -c "from
    # multiprocessing.resource_tracker import main;main(FD)"`. Its role label
    # must name a program, never an interpreter option such as -B (which
    # multiprocessing copies from sys.flags, e.g. under PYTHONDONTWRITEBYTECODE).
    role = sr.info("resource-tracker").role
    assert role and not role.startswith("-"), f"resource tracker labelled {role!r}"


def test_channels(sr: SampleRun) -> None:
    # mp, counted by hand: 3 (rank, port) puts, 3 port tables, 3 results; each
    # payload differs within its queue (ports; one inbox per rank; ranks).
    mp = check_clean_channel(sr, "mp")
    assert (mp["sends"], mp["recvs"]) == (9, 9), mp
    # TCP ring: each rank sends 2 * (W - 1) = 4 frames per step (one sendall
    # each) and reads each frame as a header and a payload (more reads if TCP
    # splits a frame).
    tcp = check_clean_channel(sr, "tcp")
    assert tcp["sends"] == 3 * STEPS * 4 and tcp["recvs"] >= 2 * tcp["sends"], tcp
    # proc: the resource tracker and the three ranks, each started by the launcher.
    assert kind_counts(sr, "proc") == {"sends": 4, "recvs": 4, "matched": 4, "ambiguous": 0,
                                       "external": 0, "unmatched_sends": 0}
    # exit: the launcher joins the three ranks (matched). Two exits are never
    # waited for by a traced process: the launcher's own (its parent is `distea
    # run`) and the resource tracker's (it outlives the launcher's last wait and
    # is reaped by whoever inherits it).
    exits = kind_counts(sr, "exit")
    assert exits == {"sends": 5, "recvs": 3, "matched": 3, "ambiguous": 0, "external": 0,
                     "unmatched_sends": 2}, exits
    reaped = {ev.channel for ev in sr.events("launcher", "recv", "exit")}
    assert reaped == {f"{sr.info(r).host}:{sr.info(r).pid}" for r in RANKS}
    # pipe: the launcher registers and unregisters its queues' semaphores by
    # os.write to the resource tracker's pipe; the tracker reads it with `for line
    # in open(fd, "rb")`, a file object whose raw reads are recorded. And each
    # rank is spawned: the launcher writes its preparation data into a pipe
    # (`open(fd, "wb")` in multiprocessing's popen_spawn_posix) that the rank
    # reads (`open(fd, "rb")` in spawn_main). One writer (the launcher) and one
    # reader per pipe, every byte read: every pipe receive is paired with
    # certainty. The other pipe sends are stdout/stderr writes that only the
    # untraced test harness reads: those, and only those, are unmatched.
    pipe = kind_counts(sr, "pipe")
    assert pipe["matched"] == pipe["recvs"] > 0 and pipe["external"] == pipe["ambiguous"] == 0
    readers = {name: {ev.channel for ev in sr.events(name, "recv", "pipe")} for name in sr.keys}
    assert readers["launcher"] == set()
    assert all(len(readers[name]) == 1 for name in ("resource-tracker", *RANKS)), readers
    read = set().union(*readers.values())
    assert len(read) == 1 + len(RANKS)  # the tracker's pipe and one per rank
    writers = {name for name in sr.keys
               if any(ev.channel in read for ev in sr.events(name, "send", "pipe"))}
    assert writers == {"launcher"}
    unread = [ev for name in sr.keys for ev in sr.events(name, "send", "pipe")
              if ev.channel not in read]
    assert pipe["unmatched_sends"] == len(unread), pipe
    assert sr.run.executions.get(sr.keys["resource-tracker"], {}) == {}
    assert set(sr.show["messages"]["by_kind"]) == {"proc", "exit", "pipe", "mp", "tcp"}


def test_never_impacted(sr: SampleRun) -> None:
    # load_shard, rendezvous and connect_ring run before the rank's first
    # compute_gradient, and the only thing a rank receives before its first
    # reduce_scatter is the port table, sent by the launcher before any rank
    # trained. Every interesting query starts in a rank at (or after) its first
    # compute_gradient, so none of them is reached.
    check_never_impacted(sr)


@pytest.mark.parametrize("query", [f"{WORKER}.compute_gradient", f"{RINGMOD}.reduce_scatter",
                                   f"{WORKER}.apply_update"])
def test_training_queries(sr: SampleRun, query: str) -> None:
    res = sr.impact(query)
    for name in RANKS:
        # Each rank from its own first execution of the query: every ring
        # receive before it comes from a neighbour that sent it before running
        # the query method itself (the first compute_gradient precedes the first
        # ring send; a rank's first reduce_scatter starts before it receives
        # anything; the step-1 all_gather messages precede every apply_update).
        assert sr.start(res, name) == sr.first(name, query), name
        sr.expect(res, name,
                  impacted=[f"{WORKER}.compute_gradient", f"{RINGMOD}.reduce_scatter",
                            f"{RINGMOD}.all_gather", f"{WORKER}.apply_update",
                            f"{WORKER}.train"],
                  not_impacted=BEFORE_TRAINING)
    # Launcher: only through the results queue (rank -> launcher mp edge);
    # everything it did to set the ring up came before.
    assert sr.start(res, "launcher") == results_channel_first_recv(sr)
    sr.expect(res, "launcher", impacted=[f"{MAIN}.report", f"{MAIN}.wait_for",
                                         f"{MAIN}.stop_workers"],
              not_impacted=LAUNCHER_SETUP)


def test_share_ports(sr: SampleRun) -> None:
    res = sr.impact(f"{MAIN}.share_ports")
    # Each rank: through the launcher -> rank mp edge, at the port table, its
    # only mp receive. So, unlike for the training queries, load_shard and
    # connect_ring ARE impacted here; what ran before the table arrived is not.
    for name in RANKS:
        (table,) = sr.events(name, "recv", "mp")
        assert sr.start(res, name) == table.clock
        sr.expect(res, name,
                  impacted=[f"{WORKER}.rendezvous", f"{RINGMOD}.connect_ring",
                            f"{WORKER}.load_shard", f"{WORKER}.compute_gradient"],
                  not_impacted=[f"{WORKER}.rank_from_environment"])
    sr.expect(res, "launcher", impacted=[f"{MAIN}.report"],
              not_impacted=[f"{MAIN}.start_workers", f"{MAIN}.rank_environment"])


def test_deps_of_connect_ring(sr: SampleRun) -> None:
    res = sr.run.deps(f"{RINGMOD}.connect_ring")
    # connect_ring in any rank comes after that rank's port table, which the
    # launcher sent after receiving every rank's (rank, port): so every rank's
    # rendezvous (and what ran before it) happens before some connect_ring,
    # through rank -> launcher -> rank mp edges. Training never does.
    for name in RANKS:
        got = set(res.deps.get(sr.keys[name], ()))
        assert {f"{WORKER}.rendezvous", f"{WORKER}.rank_from_environment"} <= got, (name, got)
        assert not got & {f"{WORKER}.load_shard", f"{WORKER}.compute_gradient",
                          f"{RINGMOD}.reduce_scatter"}, (name, got)
    got = set(res.deps.get(sr.keys["launcher"], ()))
    assert {f"{MAIN}.start_workers", f"{MAIN}.share_ports"} <= got, got
    assert f"{MAIN}.report" not in got


def test_ring_direction(sr: SampleRun) -> None:
    # Rank r sends to r+1 and receives from r-1 (ring.py). In the first
    # reduce_scatter step every rank sends its chunk *then* receives, so rank
    # r's first ring receive (the header of its left neighbour's first frame)
    # happens after the left neighbour's first send, but not after the right
    # neighbour's: that one reaches r only through the left neighbour's first
    # receive, which comes after the left neighbour's first send. A matcher
    # that paired the ring the wrong way round, or by order instead of
    # connection and bytes, would get one of these wrong.
    for r, name in enumerate(RANKS):
        left, right = RANKS[(r - 1) % 3], RANKS[(r + 1) % 3]
        first_recv = sr.events(name, "recv", "tcp")[0]
        assert (first_recv.start, first_recv.end) == (0, 4)  # the !I length header
        assert first_send_before(sr, left, name, first_recv.clock), (left, name)
        assert not first_send_before(sr, right, name, first_recv.clock), (right, name)


def first_send_before(sr: SampleRun, sender: str, receiver: str, clock: int) -> bool:
    """Whether `sender`'s first TCP send happens before `receiver` at `clock`."""
    order = sr.run.order
    send = sr.events(sender, "send", "tcp")[0]
    return order.happens_before(order.index[sr.keys[sender]], send.clock,
                                order.index[sr.keys[receiver]], clock)
