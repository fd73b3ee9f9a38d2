"""gRPC (sync and grpc.aio): every request and response message is an edge.

The program in ``grpc_app/`` starts a server process (sync: generic handlers
and an interceptor; aio: registered method handlers) and calls a unary
method twice, a bidirectional stream, a server stream, then Quit. The
expected impact sets are worked out by hand from the program's order:
``client.tally`` runs after both Greet calls have been answered, so in the
server everything from the first Tally request on is impacted, and the Greet
handler, which ran only before, is not.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.channels.support import run_both

grpc = pytest.importorskip("grpc", reason="grpcio is not installed")

APP = Path(__file__).parent / "grpc_app"

SERVER_AFTER_TALLY = {
    "sync": {"server.<module>", "server.serve_sync", "server.Counting.intercept_service",
             "service.decode", "service.encode", "server.tally", "server.add", "server.count",
             "server.count_up", "server.serve_sync.<locals>.quit_"},
    "aio": {"server.<module>", "server.serve_aio", "service.decode", "service.encode",
            "server.tally_async", "server.add", "server.count_async", "server.count_up",
            "server.serve_aio.<locals>.quit_"},
}
GREET = {"sync": ("client.greet_twice", "server.greet"),
         "aio": ("client.greet_twice_async", "server.greet_async")}
TALLY = {"sync": "client.tally", "aio": "client.tally_async"}


@pytest.mark.parametrize("mode", ["sync", "aio"])
def test_grpc_calls_are_edges(tmp_path: Path, mode: str) -> None:
    app = shutil.copytree(APP, tmp_path / "app", ignore=shutil.ignore_patterns("__pycache__"))
    traced = run_both(app / "client.py", mode)
    assert traced.stdout.startswith("hello ada\nhello bob\n['1', '3', '6']\n['0', '1', '2']\n")
    run = traced.run
    kinds = run.matching.by_kind
    assert kinds["grpc"].ambiguous == kinds["grpc"].external == 0
    assert kinds["grpc"].unmatched_sends == 0
    # grpc.aio wakes its event loop through a socket pair that its C core writes:
    # those reads have no recorded send (external: they order nothing, safely)
    external = sum(c.external for k, c in kinds.items() if k != "unix")
    assert external == 0 and (mode == "aio" or kinds.get("unix") is None)
    assert not [p for p in run.problems if "no recorded send" not in p], run.problems
    # 2 Greet + 3 Tally + 1 Count + 1 Quit requests; 2 + 3 + 3 + 1 responses: all certain
    edges = traced.edges("grpc")
    assert len(edges) == 16
    assert {(traced.role(s), traced.role(r)) for s, r in edges} == {
        ("client.py", "server.py"), ("server.py", "client.py")}
    assert {s.channel for s, _ in edges} == {
        f"/demo.Greeter/{name}{way}" for name in ("Greet", "Tally", "Count", "Quit")
        for way in "<>"}

    result = run.impact(TALLY[mode])
    (server,) = [k for k, p in run.processes.items() if p.role == "server.py"]
    assert set(result.impacted[server]) == SERVER_AFTER_TALLY[mode]

    greet_query, greet_handler = GREET[mode]
    greet_impact = run.impact(greet_query)
    assert {greet_handler, "server.make_greeting"} <= set(greet_impact.impacted[server])

    explanation = run.explain(TALLY[mode], "server.add")
    assert explanation.impacted
    assert any(step.process == server for step in explanation.steps)
    assert any("grpc" in step.detail for step in explanation.steps), explanation.steps
