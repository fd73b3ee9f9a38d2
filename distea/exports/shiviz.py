"""ShiViz log export (https://bestchai.bitbucket.io/shiviz/).

File layout, as ShiViz's "upload a log" expects::

    (?<event>.*)\\n(?<host>\\S*) (?<clock>{.*})      <- line 1: the parser regex
                                                    <- line 2: no multi-execution delimiter
    start app.server.handle [query]                 <- then two lines per event:
    server-4242 {"server-4242": 1}                  <-   description, host and vector clock
    send tcp 10.0.0.1:5000>10.0.0.2:6000 in app.server.reply
    server-4242 {"server-4242": 2}
    ...

Events per process (host ``role-pid``): every method's first start and every
send and receive, in clock order. The vector clocks follow ShiViz's rules:
a host's own entry is 1 at its first event and grows by exactly 1 per event;
every other entry counts that host's events that happen before this one.
They are not recomputed here: the entry for host Q at event e of process P is
the number of Q's listed events whose clock is at most
``Order.vector_at(P, clock(e))[Q]`` — the analyzer's vector time turned into
event counts. Because every send and receive is listed, this is exactly the
standard merge (max of the previous event's and the senders' clocks, own
entry + 1). Zero entries are left out. Events are written in a linear
extension of happens-before (the analyzer's Lamport time).

With an impact result, descriptions carry ``[query]``, ``[impacted]`` and
``[impact arrives]`` markers.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from typing import TYPE_CHECKING

from distea.exports.timeline import hb_time, lane_events, lanes

if TYPE_CHECKING:
    from distea.analyzer.impact import ImpactResult
    from distea.analyzer.run import Run

PARSER_REGEX = r"(?<event>.*)\n(?<host>\S*) (?<clock>{.*})"
"""ShiViz's default parser regex (JavaScript named groups)."""


class ShiVizExporter:
    name = "shiviz"
    suffix = ".shiviz.log"
    description = "ShiViz log: events with vector clocks (space-time diagram)"

    def export(self, run: Run, impact: ImpactResult | None = None) -> str:
        order = run.order
        lane_list = lanes(run)
        hosts = _host_names([lane.slug for lane in lane_list], [lane.host for lane in lane_list])
        impacted = set(impact.pairs()) if impact is not None else set()
        queried = set(impact.methods) if impact is not None else set()
        starts = impact.starts if impact is not None else {}

        events = {lane.key: lane_events(run, lane.key) for lane in lane_list}
        clocks = {key: [e.clock for e in evs] for key, evs in events.items()}
        rows: list[tuple[int, int, int, str, str]] = []
        for li, lane in enumerate(lane_list):
            p = order.index.get(lane.key)
            for k, ev in enumerate(events[lane.key]):
                vec: dict[str, int] = {}
                if p is not None:
                    vt = order.vector_at(p, ev.clock)
                    for lj, other in enumerate(lane_list):
                        q = order.index.get(other.key)
                        if q is None or q == p or vt[q] < 0:
                            continue
                        count = bisect_right(clocks[other.key], vt[q])
                        if count:
                            vec[hosts[lj]] = count
                vec[hosts[li]] = k + 1
                text = _describe(run, lane.key, ev.action, ev.method, ev.event_id, ev.clock,
                                 impacted, queried, starts)
                clock_json = json.dumps(dict(sorted(vec.items())), separators=(", ", ": "))
                rows.append((hb_time(run, lane.key, ev.clock), li, k, text,
                             f"{hosts[li]} {clock_json}"))
        rows.sort(key=lambda r: (r[0], r[1], r[2]))
        lines = [PARSER_REGEX, ""]
        for _, _, _, text, stamp in rows:
            lines.append(text)
            lines.append(stamp)
        return "\n".join(lines) + "\n"


def _host_names(slugs: list[str], machines: list[str]) -> list[str]:
    out = []
    for slug, machine in zip(slugs, machines, strict=True):
        out.append(f"{slug}@{machine}" if slugs.count(slug) > 1 and machine else slug)
    seen: dict[str, int] = {}
    for i, name in enumerate(out):  # still equal: number them
        if name in seen:
            seen[name] += 1
            out[i] = f"{name}.{seen[name]}"
        else:
            seen[name] = 0
    return ["".join(c if c.isprintable() and not c.isspace() else "_" for c in n) for n in out]


def _describe(
    run: Run,
    key: str,
    action: str,
    method: str | None,
    event_id: int | None,
    clock: int,
    impacted: set[tuple[str, str]],
    queried: set[str],
    starts: dict[str, int],
) -> str:
    if action == "start":
        text = f"start {method}"
        if method in queried:
            text += " [query]"
        elif (key, method) in impacted:
            text += " [impacted]"
    else:
        assert event_id is not None
        ev = run.matching.events[event_id]
        text = f"{action} {ev.kind} {ev.channel}" + (f" in {method}" if method else "")
    if starts.get(key) == clock and action == "recv":
        text += " [impact arrives]"
    text += f" (clock {clock})"
    return " ".join(text.split())  # one line, whatever the channel names hold
