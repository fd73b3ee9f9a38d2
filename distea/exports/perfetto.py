"""Chrome trace / Perfetto JSON export (open in https://ui.perfetto.dev or chrome://tracing).

The JSON object format of the Trace Event Format:

- one trace process per traced process (``pid``: the real pid, or a stand-in
  when two hosts share one), named ``role (pid N) @ host`` with a
  ``process_name`` metadata event and ordered with ``process_sort_index``;
- thread 1, ``messages``: one 5 µs slice per send and receive;
- threads 100+: ``methods`` rows, one complete slice (``ph: "X"``) per method
  execution from its first start to the last time it was executing, packed so
  that slices on one row never overlap (compact traces know first/last, not
  call nesting); ``cat`` is ``query``, ``impacted`` or ``method``;
- one flow arrow per message: a ``ph: "s"`` event inside the send's slice and
  a ``ph: "f"`` (``bp: "e"``) inside the receive's slice, with the same
  ``id``, ``cat`` and ``name``; ids are unique;
- an instant event ``impact arrives`` where the impact starts in a process.

Timestamps are the analyzer's happens-before (Lamport) times x 10 µs, not
wall-clock time: a slice left of another never happens after it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from distea.exports.timeline import channel_text, hb_time, lanes, message_links

if TYPE_CHECKING:
    from distea.analyzer.impact import ImpactResult
    from distea.analyzer.run import Run

TICK_US = 10
"""Microseconds per happens-before tick."""
MESSAGE_TID = 1
METHOD_TID0 = 100


class PerfettoExporter:
    name = "perfetto"
    suffix = ".perfetto.json"
    description = "Chrome trace / Perfetto JSON: method slices, messages as flow arrows"

    def export(self, run: Run, impact: ImpactResult | None = None) -> str:
        return json.dumps(trace(run, impact), separators=(",", ":")) + "\n"


def trace(run: Run, impact: ImpactResult | None = None) -> dict[str, Any]:
    """The trace as a dict (``{"traceEvents": [...], ...}``)."""
    lane_list = lanes(run)
    pids = [lane.pid for lane in lane_list]
    pid_of: dict[str, int] = {}
    for i, lane in enumerate(lane_list):
        unique = lane.pid is not None and pids.count(lane.pid) == 1
        pid_of[lane.key] = lane.pid if unique and lane.pid is not None else 1_000_000 + i
    impacted = set(impact.pairs()) if impact is not None else set()
    queried = set(impact.methods) if impact is not None else set()
    starts = impact.starts if impact is not None else {}

    events: list[dict[str, Any]] = []
    for i, lane in enumerate(lane_list):
        pid = pid_of[lane.key]
        name = lane.label + (f" @ {lane.host}" if lane.host else "")
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                       "args": {"name": name}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                       "args": {"sort_index": i}})
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": MESSAGE_TID,
                       "args": {"name": "messages"}})
        rows: list[int] = []  # end time of the last slice on each method row
        ex = run.executions.get(lane.key, {})
        for mname in sorted(ex, key=lambda n: (ex[n].first, n)):
            e = ex[mname]
            t0 = hb_time(run, lane.key, e.first) * TICK_US
            t1 = hb_time(run, lane.key, e.last) * TICK_US
            dur = max(t1 - t0, TICK_US // 2)
            row = next((r for r, end in enumerate(rows) if end <= t0), len(rows))
            if row == len(rows):
                rows.append(0)
                events.append({"ph": "M", "name": "thread_name", "pid": pid,
                               "tid": METHOD_TID0 + row, "args": {"name": f"methods {row + 1}"}})
            rows[row] = t0 + dur + 1
            cat = ("query" if mname in queried
                   else "impacted" if (lane.key, mname) in impacted else "method")
            events.append({"ph": "X", "name": mname.rsplit(".", 1)[-1] if "." in mname else mname,
                           "cat": cat, "ts": t0, "dur": dur, "pid": pid,
                           "tid": METHOD_TID0 + row,
                           "args": {"method": mname, "first_clock": e.first,
                                    "last_clock": e.last,
                                    "impacted": (lane.key, mname) in impacted}})
        if lane.key in starts:
            events.append({"ph": "i", "s": "p", "name": "impact arrives", "cat": "impact",
                           "ts": hb_time(run, lane.key, starts[lane.key]) * TICK_US,
                           "pid": pid, "tid": MESSAGE_TID,
                           "args": {"clock": starts[lane.key]}})

    m = run.matching
    for i, ev in enumerate(m.events):
        events.append({"ph": "X", "name": f"{ev.direction} {ev.kind}", "cat": "message",
                       "ts": hb_time(run, ev.process, ev.clock) * TICK_US, "dur": TICK_US // 2,
                       "pid": pid_of[ev.process], "tid": MESSAGE_TID,
                       "args": {"channel": channel_text(ev), "clock": ev.clock,
                                "method": ev.method, "event": i}})
    for flow_id, link in enumerate(message_links(run), 1):
        s, r = m.events[link.send], m.events[link.recv]
        common = {"name": "message", "cat": "message", "id": flow_id}
        events.append({**common, "ph": "s", "ts": hb_time(run, s.process, s.clock) * TICK_US,
                       "pid": pid_of[s.process], "tid": MESSAGE_TID})
        events.append({**common, "ph": "f", "bp": "e",
                       "ts": hb_time(run, r.process, r.clock) * TICK_US,
                       "pid": pid_of[r.process], "tid": MESSAGE_TID})
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": "distea",
            "run": str(run.path),
            "time": f"happens-before (Lamport) ticks x {TICK_US} us, not wall-clock time",
            "queries": list(impact.queries) if impact is not None else [],
        },
    }
