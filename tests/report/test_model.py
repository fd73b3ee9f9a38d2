"""The report's view model: what the page will show, checked without a browser."""

from __future__ import annotations

from distea.analyzer.run import Run
from distea.report.model import build_model
from tests.report.synthetic import BIG_QUERY, SMALL_QUERY


def test_lanes_counts_and_starts(small: Run) -> None:
    model = build_model(small, small.impact(SMALL_QUERY))
    assert [(lane.role, lane.pid, lane.rank) for lane in model.lanes] == [
        ("launcher", 1, None), ("server", 2, None), ("worker", 3, 0), ("worker", 4, 1),
        ("monitor", 5, None)]
    assert [(lane.impacted, lane.methods) for lane in model.lanes] == [
        (3, 5), (3, 5), (4, 7), (3, 6), (0, 3)]
    assert [lane.start for lane in model.lanes] == [8, 8, 9, 9, None]
    assert model.lanes[4].distia_start == 25  # the baseline's false positive
    assert model.size == 13 and model.mcov == 26 and model.distia == 15
    assert sum(n.impacted for n in model.nodes) == 13
    assert [model.methods[n.method].name for n in model.nodes if n.query] == [SMALL_QUERY]


def test_times_respect_happens_before(small: Run) -> None:
    model = build_model(small, small.impact(SMALL_QUERY))
    for n in model.nodes:
        assert n.t0 <= n.t1
    for e in model.edges:
        assert e.src_t < e.dst_t, e
    for chain in model.chains:
        times = [s.t for s in chain]
        assert times == sorted(times)


def test_edges_carrying_and_arrival(small: Run) -> None:
    model = build_model(small, small.impact(SMALL_QUERY))
    role = [f"{lane.role}{lane.rank if lane.rank is not None else ''}" for lane in model.lanes]
    carrying = {(role[e.src], role[e.dst]) for e in model.edges if e.carries}
    assert carrying == {("server", "worker0"), ("server", "worker1"), ("worker0", "launcher")}
    arrivals = {(role[e.src], role[e.dst]) for e in model.edges if e.arrival}
    assert arrivals == carrying
    # spawns, gradients and the heartbeat are drawn only on request: before the impact
    assert len(model.edges) == 9


def test_explanations_are_the_analyzers(small: Run) -> None:
    model = build_model(small, small.impact(SMALL_QUERY))
    names = [m.name for m in model.methods]
    by_name = {(model.lanes[n.lane].role, names[n.method]): n for n in model.nodes}
    node = by_name[("launcher", "app.launcher.summarize")]
    assert node.chain is not None
    chain = model.chains[node.chain]
    assert [s.action for s in chain] == ["start", "send", "recv", "send", "recv"]
    exp = small.explain(SMALL_QUERY, "app.launcher.summarize")
    assert [(model.lanes[s.lane].key, s.clock) for s in chain] == [
        (s.process, s.clock) for s in exp.steps if s.action != "runs"]
    assert "launcher (pid 1)" in node.why and "h:1:0" not in node.why
    # collect and main reach the launcher the same way: one stored chain
    assert by_name[("launcher", "app.launcher.main")].chain == node.chain
    setup = by_name[("launcher", "app.launcher.setup")]
    assert not setup.impacted and setup.chain is None
    assert "before the impact arrived" in setup.why


def test_big_run_scale(big: Run) -> None:
    model = build_model(big, big.impact(BIG_QUERY))
    assert len(model.lanes) == 18 and len(model.methods) == 216
    assert len(model.nodes) == 636 and model.size == 436
    assert all(n.chain is not None for n in model.nodes if n.impacted)
    assert len(model.chains) < model.size  # shared, not one per method
    assert not model.notes
