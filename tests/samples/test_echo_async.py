"""echo_async traced by the real ``distea run``: asyncio streams, pipelined requests.

The sample (sample_systems/echo_async): the server announces its port
(`announce_ready`) before any client exists, then answers every line with
`echo_line`. Each client (client-1, client-2) runs two batches over one
connection: `make_requests`, `send_requests` (three lines written before any
read), `read_replies` (three lines). Batch 1 is built and sent only after
batch 0's replies are read. Byte offsets decide which reply answers which
request, so several checks below are phrased in bytes of the streams, whose
content is deterministic.
"""

from __future__ import annotations

import pytest

from sample_systems.echo_async.client import make_requests
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

CLIENT, SERVER = "sample_systems.echo_async.client", "sample_systems.echo_async.server"
CLIENTS = ("client-1", "client-2")


def batch_bytes(name: str, batch: int) -> int:
    return sum(len(line.encode()) + 1 for line in make_requests(name, batch))


@pytest.fixture(scope="module")
def sr(tmp_path_factory: pytest.TempPathFactory) -> SampleRun:
    return run_sample("echo_async", tmp_path_factory.mktemp("echo_async"))


def test_processes_and_output(sr: SampleRun) -> None:
    check_processes(sr, {
        "launcher": "sample_systems.echo_async",
        "server": SERVER,
        "client-1": CLIENT,
        "client-2": CLIENT,
    })
    check_stdout(sr)
    assert "[server] echoed 12 lines for 2 clients" in sr.traced.stdout


def test_channels(sr: SampleRun) -> None:
    check_launcher_channels(sr)
    counts = check_clean_channel(sr, "tcp")
    # 2 clients x 6 request lines and 6 reply lines, written one line per write
    # (asyncio may coalesce reads, so receives are not pinned).
    assert counts["sends"] == 24, counts
    assert set(sr.show["messages"]["by_kind"]) == {"proc", "exit", "pipe", "tcp"}


def test_never_impacted(sr: SampleRun) -> None:
    # Nothing is listed for this sample (docs/samples.md); the helper still
    # checks that the list is empty-but-valid.
    check_never_impacted(sr)


def test_echo_line(sr: SampleRun) -> None:
    res = sr.impact(f"{SERVER}.echo_line")
    # The server announced its port before any client started: never impacted.
    sr.expect(res, "server", impacted=[f"{SERVER}.handle_connection"],
              not_impacted=["sample_systems._launch.announce_ready"])
    for name in CLIENTS:
        # Every reply is built by echo_line, so each client is impacted from its
        # first receive (server -> client edge), and since batch 1 is made and
        # sent after batch 0's replies, all client methods are impacted.
        assert sr.start(res, name) == sr.events(name, "recv", "tcp")[0].clock
        sr.expect(res, name, impacted=[f"{CLIENT}.make_requests", f"{CLIENT}.send_requests",
                                       f"{CLIENT}.read_replies"])
    sr.expect(res, "launcher", impacted=["sample_systems._launch.RoleGroup.finish"],
              not_impacted=LAUNCHER_BEFORE_CHILDREN_RUN)


def test_send_requests(sr: SampleRun) -> None:
    res = sr.impact(f"{CLIENT}.send_requests")
    # Each client from its own first send_requests.
    for name in CLIENTS:
        assert sr.start(res, name) == sr.first(name, f"{CLIENT}.send_requests")
    # Server: only through client -> server edges, from its first receive; its
    # announce_ready ran before any client existed.
    assert sr.start(res, "server") == sr.events("server", "recv", "tcp")[0].clock
    sr.expect(res, "server", impacted=[f"{SERVER}.echo_line", f"{SERVER}.handle_connection"],
              not_impacted=["sample_systems._launch.announce_ready"])


def test_read_replies(sr: SampleRun) -> None:
    res = sr.impact(f"{CLIENT}.read_replies")
    for name in CLIENTS:
        assert sr.start(res, name) == sr.first(name, f"{CLIENT}.read_replies")
    # Server: a client starts read_replies after writing its whole batch 0, so
    # only batch-1 bytes are written after it. The impact reaches the server
    # with the first receive that reads a byte past batch 0 on either
    # connection (a receive of [a, b) is after the send of byte b-1). A receive
    # of batch-0 bytes only carries nothing, however the reads coalesced them.
    sizes = {batch_bytes(name, 0) for name in CLIENTS}
    assert len(sizes) == 1
    (batch0,) = sizes
    first_recv = sr.events("server", "recv", "tcp")[0].clock
    start = sr.start(res, "server")
    assert start == sr.first_recv_past("server", batch0)
    assert start > first_recv
    sr.expect(res, "server", impacted=[f"{SERVER}.echo_line"],
              not_impacted=["sample_systems._launch.announce_ready"])
