"""JSON export: the whole run, analysed, in one documented document.

Layout (``"schema": 1``, ``"format": "distea-run"``; see docs/report.md)::

    {
      "schema": 1, "format": "distea-run", "run": "<run dir>",
      "impact": null | {"queries": [...], "methods": [...], "size": N,
                        "baselines": {"mcov": N, "distia": N}},
      "processes": [{"key", "role", "pid", "host", "rank", "world_size",
                     "complete", "impact_start"}],            # display order
      "methods":   [{"name", "module", "qualname", "file", "firstline", "lastline"}],
      "executions": [{"process", "method", "first", "last",
                      "hb_first", "hb_last", "impacted"}],
      "messages":  [{"id", "process", "direction", "kind", "channel", "clock",
                     "hb_time", "method", "thread"}],
      "edges":     [{"send", "recv", "ambiguous"}]            # message ids
    }

``hb_*`` are the analyzer's happens-before (Lamport) times: if one event
happens before another, its ``hb`` time is smaller. ``impacted`` and
``impact_start`` are null without a query.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from distea.exports.timeline import hb_time, lanes, message_links

if TYPE_CHECKING:
    from distea.analyzer.impact import ImpactResult
    from distea.analyzer.run import Run

SCHEMA = 1


class JSONExporter:
    name = "json"
    suffix = ".json"
    description = "JSON document: processes, executions, messages, edges, impact"

    def export(self, run: Run, impact: ImpactResult | None = None) -> str:
        return json.dumps(document(run, impact), indent=1) + "\n"


def document(run: Run, impact: ImpactResult | None = None) -> dict[str, Any]:
    impacted = set(impact.pairs()) if impact is not None else None
    lane_list = lanes(run)
    m = run.matching
    return {
        "schema": SCHEMA,
        "format": "distea-run",
        "run": str(run.path),
        "impact": None if impact is None else {
            "queries": impact.queries, "methods": impact.methods, "size": impact.size,
            "baselines": {"mcov": impact.mcov_size, "distia": impact.distia_size},
        },
        "processes": [
            {"key": lane.key, "role": lane.role, "pid": lane.pid, "host": lane.host,
             "rank": lane.rank, "world_size": lane.world_size, "complete": lane.complete,
             "impact_start": impact.starts.get(lane.key) if impact is not None else None}
            for lane in lane_list
        ],
        "methods": [
            {"name": meth.name, "module": meth.module, "qualname": meth.qualname,
             "file": meth.file, "firstline": meth.firstline, "lastline": meth.lastline}
            for name, meth in sorted(run.methods.items()) if name in run.executed
        ],
        "executions": [
            {"process": lane.key, "method": name, "first": e.first, "last": e.last,
             "hb_first": hb_time(run, lane.key, e.first),
             "hb_last": hb_time(run, lane.key, e.last),
             "impacted": None if impacted is None else (lane.key, name) in impacted}
            for lane in lane_list
            for name, e in sorted(run.executions.get(lane.key, {}).items(),
                                  key=lambda kv: (kv[1].first, kv[0]))
        ],
        "messages": [
            {"id": i, "process": ev.process, "direction": ev.direction, "kind": ev.kind,
             "channel": ev.channel, "clock": ev.clock,
             "hb_time": hb_time(run, ev.process, ev.clock), "method": ev.method,
             "thread": ev.thread}
            for i, ev in enumerate(m.events)
        ],
        "edges": [{"send": link.send, "recv": link.recv, "ambiguous": link.ambiguous}
                  for link in message_links(run)],
    }
