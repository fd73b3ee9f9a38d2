"""kvstore traced by the real ``distea run``: primary/backup replication, then a failover.

The sample (sample_systems/kvstore): three threaded TCP nodes (backup-1,
backup-2, then the primary) each build their server (`NodeServer.__init__`)
and announce their port before the launcher starts the next process; the
client starts last. The client's `run_workload`:

1. four puts through the primary (`handle_put` -> `replicate_write`, which
   calls both backups' `apply_replicated` and waits for their acks before the
   reply) and gets from the primary and from backup-2;
2. `failover`: `stop_node(primary)` (the stop request is the last thing the
   primary ever receives), `wait_until_down` (connects only: no data), then a
   new connection to backup-1 carrying the promote request
   (`promote_to_primary`) -- the client's first message to backup-1;
3. two puts through backup-1 (now replicating to backup-2 only, over a new
   connection), gets from backup-1 and backup-2, then stops both.

Every step waits for the previous reply, so the order of all messages is
fixed; only which handler thread runs what differs.
"""

from __future__ import annotations

import pytest

from tests.samples.support import (
    LAUNCHER_BEFORE_CHILDREN_RUN,
    SampleRun,
    check_clean_channel,
    check_launcher_channels,
    check_never_impacted,
    check_processes,
    check_stdout,
    run_sample,
)

KV = "sample_systems.kvstore"
NODE, CLIENT, PROTO = f"{KV}.node", f"{KV}.client", f"{KV}.protocol"
NODES = ("primary", "backup-1", "backup-2")


@pytest.fixture(scope="module")
def sr(tmp_path_factory: pytest.TempPathFactory) -> SampleRun:
    return run_sample("kvstore", tmp_path_factory.mktemp("kvstore"))


def first_recv_from(sr: SampleRun, name: str, sender: str) -> int:
    """Clock of the first stream receive in `name` of bytes that `sender` wrote."""
    channels = sr.send_channels(sender, "tcp")
    clocks = [ev.clock for ev in sr.events(name, "recv", "tcp") if ev.channel in channels]
    assert clocks, f"{name} never received from {sender}"
    return min(clocks)


def test_processes_and_output(sr: SampleRun) -> None:
    check_processes(sr, {
        "launcher": KV,
        "backup-1": NODE,
        "backup-2": NODE,
        "primary": NODE,
        "client": CLIENT,
    })
    check_stdout(sr)
    assert "[client] promoted backup-1 at seq 4, replicating to backup-2" in sr.traced.stdout


def test_channels(sr: SampleRun) -> None:
    check_launcher_channels(sr)
    # Every request and reply (JSON lines) is read by the other end; the
    # failure detector's probe connections carry no bytes and record nothing.
    check_clean_channel(sr, "tcp")
    assert set(sr.show["messages"]["by_kind"]) == {"proc", "exit", "pipe", "tcp"}


def test_never_impacted(sr: SampleRun) -> None:
    # NodeServer.__init__ binds the node's port before it announces it; the
    # client, the only source of anything an interesting query starts, is
    # started after all three nodes announced.
    check_never_impacted(sr)


def test_handle_put(sr: SampleRun) -> None:
    res = sr.impact(f"{NODE}.NodeState.handle_put")
    assert sr.start(res, "primary") == sr.first("primary", f"{NODE}.NodeState.handle_put")
    sr.expect(res, "primary", impacted=[f"{NODE}.replicate_write", f"{NODE}.NodeState.handle_get"],
              not_impacted=[f"{NODE}.NodeServer.__init__", "sample_systems._launch.announce_ready"])
    # Backups: through the primary -> backup edge, from the first replicated write.
    for backup in ("backup-1", "backup-2"):
        assert sr.start(res, backup) == first_recv_from(sr, backup, "primary")
        sr.expect(res, backup, impacted=[f"{NODE}.NodeState.apply_replicated"],
                  not_impacted=[f"{NODE}.NodeServer.__init__"])
    sr.expect(res, "backup-1", impacted=[f"{NODE}.NodeState.promote_to_primary",
                                         f"{NODE}.replicate_write"])
    # Client: from the reply to its first put (its first receive); Cluster was
    # built before it sent anything.
    assert sr.start(res, "client") == sr.events("client", "recv", "tcp")[0].clock
    sr.expect(res, "client",
              impacted=[f"{CLIENT}.put", f"{CLIENT}.get", f"{CLIENT}.failover",
                        f"{CLIENT}.wait_until_down"],
              not_impacted=[f"{CLIENT}.Cluster.__init__"])
    sr.expect(res, "launcher", impacted=["sample_systems._launch.RoleGroup.finish"],
              not_impacted=LAUNCHER_BEFORE_CHILDREN_RUN)


def test_failover(sr: SampleRun) -> None:
    res = sr.impact(f"{CLIENT}.failover")
    assert sr.start(res, "client") == sr.first("client", f"{CLIENT}.failover")
    sr.expect(res, "client", impacted=[f"{CLIENT}.put", f"{CLIENT}.wait_until_down"],
              not_impacted=[f"{CLIENT}.Cluster.__init__"])
    # Old primary: only through the stop request, the last bytes it receives
    # from the client. Every put and get it served came before.
    from_client = sr.send_channels("client", "tcp")
    stop = max(ev.clock for ev in sr.events("primary", "recv", "tcp") if ev.channel in from_client)
    assert sr.start(res, "primary") == stop
    sr.expect(res, "primary", impacted=[f"{NODE}.dispatch"],
              not_impacted=[f"{NODE}.NodeState.handle_put", f"{NODE}.replicate_write",
                            f"{NODE}.NodeState.handle_get"])
    # backup-1: from the promote request, the client's first message to it. It
    # applied replicated writes only before that.
    assert sr.start(res, "backup-1") == first_recv_from(sr, "backup-1", "client")
    sr.expect(res, "backup-1",
              impacted=[f"{NODE}.NodeState.promote_to_primary", f"{NODE}.NodeState.handle_put",
                        f"{NODE}.replicate_write"],
              not_impacted=[f"{NODE}.NodeState.apply_replicated"])
    # backup-2: client -> backup-1 -> backup-2, from the first write backup-1
    # replicates (its earlier traffic with the primary and the client's first
    # get all happened before the failover).
    assert sr.start(res, "backup-2") == first_recv_from(sr, "backup-2", "backup-1")
    sr.expect(res, "backup-2", impacted=[f"{NODE}.NodeState.apply_replicated"],
              not_impacted=[f"{NODE}.NodeServer.__init__"])


def test_promote_to_primary(sr: SampleRun) -> None:
    res = sr.impact(f"{NODE}.NodeState.promote_to_primary")
    # The old primary never receives anything after the promotion (the client
    # waited until its port refused connections): not impacted at all, however
    # late it ran.
    assert sr.start(res, "primary") is None
    assert sr.start(res, "backup-1") == sr.first("backup-1", f"{NODE}.NodeState.promote_to_primary")
    sr.expect(res, "backup-1", impacted=[f"{NODE}.NodeState.handle_put", f"{NODE}.replicate_write"],
              not_impacted=[f"{NODE}.NodeState.apply_replicated"])
    # backup-2: only through backup-1's replication (backup-1 -> backup-2 edge).
    assert sr.start(res, "backup-2") == first_recv_from(sr, "backup-2", "backup-1")
    sr.expect(res, "backup-2", impacted=[f"{NODE}.NodeState.apply_replicated"])
    # Client: through backup-1's reply to the promote request. Its failure
    # detector ran before it sent that request.
    assert sr.start(res, "client") == first_recv_from(sr, "client", "backup-1")
    sr.expect(res, "client", impacted=[f"{CLIENT}.put", f"{CLIENT}.get"],
              not_impacted=[f"{CLIENT}.wait_until_down", f"{CLIENT}.Cluster.__init__"])
