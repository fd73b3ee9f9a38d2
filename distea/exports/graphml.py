"""GraphML export (Gephi, yEd, networkx): the analyzer's run graph, flattened.

The graph is :func:`distea.analyzer.graph.build_graph` (see its docstring for
nodes and edges) with what GraphML can hold: node ids become strings
(``exec|KEY|METHOD`` and ``msg|ID``), attributes that are None are left out,
and each node also carries ``role``, ``pid``, ``host`` and ``hb_time`` (the
happens-before position, usable as an x coordinate; the process's display
index ``lane`` is a y coordinate). Graph attributes: ``run`` and ``queries``.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

import networkx as nx

from distea.exports.timeline import hb_time, lanes

if TYPE_CHECKING:
    from distea.analyzer.impact import ImpactResult
    from distea.analyzer.run import Run


class GraphMLExporter:
    name = "graphml"
    suffix = ".graphml"
    description = "GraphML graph of executions and messages (Gephi, yEd, networkx)"

    def export(self, run: Run, impact: ImpactResult | None = None) -> str:
        buf = io.BytesIO()
        nx.write_graphml(flat_graph(run, impact), buf, encoding="utf-8")
        return buf.getvalue().decode("utf-8")


def node_id(node: tuple[object, ...]) -> str:
    return "|".join(str(part) for part in node)


def flat_graph(run: Run, impact: ImpactResult | None = None) -> nx.DiGraph:
    """The run graph with string ids and GraphML-safe attributes."""
    g = run.graph(impact)
    lane_list = lanes(run)
    lane_of = {lane.key: (i, lane) for i, lane in enumerate(lane_list)}
    queried = set(impact.methods) if impact is not None else set()
    out: nx.DiGraph = nx.DiGraph()
    out.graph["run"] = str(run.path)
    out.graph["queries"] = " ".join(impact.queries) if impact is not None else ""
    for node, attrs in g.nodes(data=True):
        key = str(attrs.get("process"))
        idx, lane = lane_of[key]
        clock = attrs["first"] if attrs.get("kind") == "exec" else attrs["clock"]
        flat: dict[str, Any] = {k: v for k, v in attrs.items() if _scalar(v)}
        flat.update(lane=idx, role=lane.role, host=lane.host,
                    hb_time=hb_time(run, key, clock))
        if lane.pid is not None:
            flat["pid"] = lane.pid
        if attrs.get("kind") == "exec":
            flat["query"] = attrs.get("method") in queried
        out.add_node(node_id(node), **flat)
    for a, b, attrs in g.edges(data=True):
        out.add_edge(node_id(a), node_id(b), **{k: v for k, v in attrs.items() if _scalar(v)})
    return out


def _scalar(value: object) -> bool:
    return isinstance(value, str | int | float | bool)
