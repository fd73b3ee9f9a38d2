"""Each export validated against its format's rules, on the small and the big synthetic run."""

from __future__ import annotations

import io
import json
import re
from collections import defaultdict
from itertools import pairwise
from typing import Any

import networkx as nx
import pytest

from distea.analyzer.impact import ImpactResult
from distea.analyzer.run import Run
from distea.exports import FORMATS, exporters
from distea.exports.shiviz import PARSER_REGEX
from distea.exports.timeline import lanes, message_links
from tests.report.synthetic import BIG_QUERY, SMALL_QUERY

RUNS = [("small", SMALL_QUERY), ("big", BIG_QUERY)]


@pytest.fixture(params=RUNS, ids=[name for name, _ in RUNS])
def case(request: pytest.FixtureRequest) -> tuple[Run, ImpactResult]:
    name, query = request.param
    run: Run = request.getfixturevalue(name)
    return run, run.impact(query)


def test_registry() -> None:
    table = exporters()
    assert tuple(table) == FORMATS
    for name, exp in table.items():
        assert exp.name == name and exp.suffix.startswith(".") and exp.description


# -- GraphML -------------------------------------------------------------------


def test_graphml_parses_back(case: tuple[Run, ImpactResult]) -> None:
    run, impact = case
    text = exporters()["graphml"].export(run, impact)
    g = nx.read_graphml(io.BytesIO(text.encode()))
    original = run.graph(impact)
    assert g.number_of_nodes() == original.number_of_nodes()
    assert g.number_of_edges() == original.number_of_edges()
    execs = {n: a for n, a in g.nodes(data=True) if a["kind"] == "exec"}
    assert len(execs) == impact.mcov_size
    impacted = {(a["process"], a["method"]) for a in execs.values() if a["impacted"]}
    assert impacted == set(impact.pairs())
    assert {a["method"] for a in execs.values() if a["query"]} == set(impact.methods)
    for a in g.nodes.values():
        assert isinstance(a["hb_time"], int) and isinstance(a["lane"], int)
    kinds = {a["kind"] for _, _, a in g.edges(data=True)}
    assert kinds == {"program", "message"}
    assert g.graph["queries"] == " ".join(impact.queries)


def test_graphml_without_query(small: Run) -> None:
    g = nx.read_graphml(io.BytesIO(exporters()["graphml"].export(small).encode()))
    assert not any(a.get("impacted") for a in g.nodes.values())


# -- ShiViz --------------------------------------------------------------------


def parse_shiviz(text: str) -> list[tuple[str, str, dict[str, int]]]:
    """(event, host, clock) per event, parsed the way ShiViz does: the file's regex."""
    lines = text.split("\n")
    regex, delimiter = lines[0], lines[1]
    assert regex == PARSER_REGEX and delimiter == ""
    log = "\n".join(lines[2:])
    # ShiViz's JavaScript named groups (?<name>...) are (?P<name>...) in Python
    pattern = re.compile(regex.replace("(?<", "(?P<"), re.MULTILINE)
    events = []
    end = 0
    for match in pattern.finditer(log):
        assert log[end:match.start()].strip() == "", f"unparsed text: {log[end:match.start()]!r}"
        end = match.end()
        events.append((match["event"], match["host"], json.loads(match["clock"])))
    assert log[end:].strip() == ""
    return events


def check_shiviz_rules(events: list[tuple[str, str, dict[str, int]]]) -> None:
    """ShiViz's checks: own counter starts at 1 and grows by 1; every entry names an
    event that exists; each clock is the standard merge of its host's previous
    event and the events its entries point to (ShiViz's stepThroughAndVerify)."""
    by_host: dict[str, list[dict[str, int]]] = defaultdict(list)
    for _, host, clock in events:
        assert clock.get(host) == len(by_host[host]) + 1, (host, clock)
        by_host[host].append(clock)
    for host, clocks in by_host.items():
        prev: dict[str, int] = {}
        for clock in clocks:
            merged = dict(prev)
            for other, value in clock.items():
                assert other in by_host, f"unknown host {other}"
                assert 1 <= value <= len(by_host[other]), (other, value)
                if other != host and value > prev.get(other, 0):
                    parent = by_host[other][value - 1]
                    for h, v in parent.items():
                        merged[h] = max(merged.get(h, 0), v)
            merged[host] = clock[host]
            assert merged == clock, f"{host}: {clock} is not the merge {merged}"
            prev = clock


def test_shiviz_log_follows_the_rules(case: tuple[Run, ImpactResult]) -> None:
    run, impact = case
    events = parse_shiviz(exporters()["shiviz"].export(run, impact))
    check_shiviz_rules(events)
    n_messages = len(run.matching.events)
    assert len(events) == impact.mcov_size + n_messages
    hosts = {host for _, host, _ in events}
    assert len(hosts) == len(run.processes)
    assert sum("[query]" in text for text, _, _ in events) == sum(
        1 for ex in run.executions.values() for m in ex if m in impact.methods)


def test_shiviz_clocks_order_every_message(case: tuple[Run, ImpactResult]) -> None:
    run, impact = case
    events = parse_shiviz(exporters()["shiviz"].export(run, impact))
    clock_of = {}
    for text, host, clock in events:
        found = re.search(r"\(clock (\d+)\)$", text)
        assert found
        clock_of[(host, int(found[1]), text.split()[0])] = clock
    slug = {lane.key: lane.slug for lane in lanes(run)}
    m = run.matching
    for link in message_links(run):
        s, r = m.events[link.send], m.events[link.recv]
        cs = clock_of[(slug[s.process], s.clock, "send")]
        cr = clock_of[(slug[r.process], r.clock, "recv")]
        assert all(cr.get(h, 0) >= v for h, v in cs.items()), (cs, cr)


def test_shiviz_marks_impact(small: Run) -> None:
    text = exporters()["shiviz"].export(small, small.impact(SMALL_QUERY))
    assert "start app.server.apply_update [query] (clock 8)" in text
    assert "start app.launcher.summarize [impacted] (clock 9)" in text
    assert "start app.launcher.setup (clock 2)" in text
    assert "recv tcp w0>l in app.launcher.collect [impact arrives] (clock 8)" in text


# -- Perfetto / Chrome trace ---------------------------------------------------


def test_perfetto_trace_rules(case: tuple[Run, ImpactResult]) -> None:
    run, impact = case
    doc = json.loads(exporters()["perfetto"].export(run, impact))
    events: list[dict[str, Any]] = doc["traceEvents"]
    assert isinstance(events, list) and events
    for ev in events:
        assert ev["ph"] in {"M", "X", "s", "f", "i"}
        assert isinstance(ev["pid"], int) and isinstance(ev["name"], str)
        if ev["ph"] != "M":
            assert isinstance(ev["ts"], int) and ev["ts"] >= 0
    names = {ev["pid"]: ev["args"]["name"] for ev in events
             if ev["ph"] == "M" and ev["name"] == "process_name"}
    assert len(names) == len(run.processes)
    threads = {(ev["pid"], ev["tid"]) for ev in events
               if ev["ph"] == "M" and ev["name"] == "thread_name"}
    slices: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for ev in events:
        if ev["ph"] == "X":
            assert ev["dur"] > 0
            assert (ev["pid"], ev["tid"]) in threads, "every slice is on a named thread"
            slices[(ev["pid"], ev["tid"])].append((ev["ts"], ev["ts"] + ev["dur"]))
    for spans in slices.values():  # complete events on one thread never partly overlap
        spans.sort()
        for (a0, a1), (b0, b1) in pairwise(spans):
            assert b0 >= a1 or b1 <= a1, ((a0, a1), (b0, b1))
    flows: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for ev in events:
        if ev["ph"] in ("s", "f"):
            assert ev["ph"] not in flows[ev["id"]], f"flow id {ev['id']} reused"
            flows[ev["id"]][ev["ph"]] = ev
    assert len(flows) == len(message_links(run))
    for fid, pair in flows.items():
        assert set(pair) == {"s", "f"}, f"flow {fid} lacks a start or an end"
        s, f = pair["s"], pair["f"]
        assert f["bp"] == "e" and s["cat"] == f["cat"] and s["name"] == f["name"]
        assert s["ts"] < f["ts"], "a message arrives after it is sent"
        for end in (s, f):  # bound to an enclosing slice on its thread
            assert any(a <= end["ts"] < b for a, b in slices[(end["pid"], end["tid"])])
    cats: dict[str, int] = defaultdict(int)
    for ev in events:
        if ev["ph"] == "X" and ev["cat"] != "message":
            cats[ev["cat"]] += 1
    assert cats["impacted"] + cats["query"] == impact.size
    assert sum(cats.values()) == impact.mcov_size


# -- JSON ----------------------------------------------------------------------


def test_json_document(case: tuple[Run, ImpactResult]) -> None:
    run, impact = case
    doc = json.loads(exporters()["json"].export(run, impact))
    assert doc["schema"] == 1 and doc["format"] == "distea-run"
    assert doc["impact"]["size"] == impact.size
    assert doc["impact"]["baselines"] == {"mcov": impact.mcov_size, "distia": impact.distia_size}
    assert len(doc["processes"]) == len(run.processes)
    assert len(doc["executions"]) == impact.mcov_size
    assert sum(e["impacted"] for e in doc["executions"]) == impact.size
    msgs = doc["messages"]
    assert [m["id"] for m in msgs] == list(range(len(msgs)))
    for edge in doc["edges"]:
        s, r = msgs[edge["send"]], msgs[edge["recv"]]
        assert s["direction"] == "send" and r["direction"] == "recv"
        assert s["hb_time"] < r["hb_time"]
    starts = {p["key"]: p["impact_start"] for p in doc["processes"]}
    assert {k: v for k, v in starts.items() if v is not None} == impact.starts


def test_json_without_query(small: Run) -> None:
    doc = json.loads(exporters()["json"].export(small))
    assert doc["impact"] is None
    assert all(e["impacted"] is None for e in doc["executions"])
