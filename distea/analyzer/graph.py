"""The run as a networkx graph, for exports and the HTML report.

Nodes:

- ``("exec", process, method)``: one method's execution in one process;
  attributes ``kind="exec"``, ``process``, ``method``, ``first``, ``last``,
  ``impacted`` (bool, when an impact result is given);
- ``("msg", event_id)``: one send or receive (ids from
  :class:`~distea.analyzer.matching.Matching`); attributes ``kind="send"`` or
  ``"recv"``, ``process``, ``clock``, ``channel`` (``"KIND CHANNEL"``),
  ``method`` (on top of the stack, or None).

Edges (attribute ``kind``):

- ``"program"``: consecutive nodes of one process in clock order (an
  execution sits at its ``first`` clock);
- ``"message"``: send → receive as the happens-before sweep used them
  (certain pairs, collectives, and the chosen candidates of uncertain
  receives, these with ``ambiguous=True``).

Every node also carries ``label`` (short text) and the graph carries
``graph["processes"]``: process key → ``role (pid N)``.
"""

from __future__ import annotations

from itertools import pairwise
from typing import TYPE_CHECKING

import networkx as nx

if TYPE_CHECKING:
    from distea.analyzer.impact import ImpactResult
    from distea.analyzer.run import Run


def build_graph(run: Run, impact: ImpactResult | None = None) -> nx.DiGraph:
    m = run.matching
    order = run.order
    g: nx.DiGraph = nx.DiGraph()
    g.graph["processes"] = {key: run.label(key) for key in run.processes}
    impacted = set(impact.pairs()) if impact is not None else set()
    keys = sorted(set(m.process_keys) | set(run.executions))
    for key in keys:
        chain: list[tuple[int, int, tuple[object, ...]]] = []
        node: tuple[object, ...]
        for name, ex in run.executions.get(key, {}).items():
            node = ("exec", key, name)
            g.add_node(node, kind="exec", process=key, method=name, first=ex.first,
                       last=ex.last, impacted=(key, name) in impacted,
                       label=name.rsplit(".", 1)[-1])
            chain.append((ex.first, 0, node))
        if key in order.index:
            for i in m.events_of(order.index[key]):
                ev = m.events[i]
                node = ("msg", i)
                g.add_node(node, kind=ev.direction, process=key, clock=ev.clock,
                           channel=f"{ev.kind} {ev.channel}", method=ev.method,
                           label=f"{ev.direction} {ev.kind}")
                chain.append((ev.clock, 1, node))
        chain.sort(key=lambda t: (t[0], t[1]))
        for (_, _, a), (_, _, b) in pairwise(chain):
            g.add_edge(a, b, kind="program")
    ambiguous = {r for r, _ in m.uncertain}
    for r, sends in order.sources.items():
        for s in sends:
            g.add_edge(("msg", s), ("msg", r), kind="message", ambiguous=r in ambiguous)
    for r, h in order.hub_of.items():
        for s in m.hubs[h][0]:
            if m.proc_of[s] != m.proc_of[r]:
                g.add_edge(("msg", s), ("msg", r), kind="message", ambiguous=False)
    return g
