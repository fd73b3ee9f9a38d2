"""The run laid out in time, shared by every exporter and the HTML report.

Nothing here decides happens-before: it reads the analyzer's
:class:`~distea.analyzer.order.Order` (vector clocks and Lamport times) and
:class:`~distea.analyzer.matching.Matching` (which send each receive was
ordered after), and names things the way the outputs show them:

- :func:`lanes`: the processes in a stable display order (start time, pid);
- :func:`hb_time`: a global position for (process, clock) that respects
  happens-before (the analyzer's Lamport time): if a → b then
  ``hb_time(a) < hb_time(b)``, and within one process it grows with the clock;
- :func:`message_links`: every send → receive pair the happens-before sweep
  used (certain pairs, expanded collectives, chosen candidates of uncertain
  receives), between different processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from distea.model import channel_label

if TYPE_CHECKING:
    from distea.analyzer.run import Run
    from distea.model import MessageEvent


@dataclass(frozen=True, slots=True)
class Lane:
    """One process as the outputs show it."""

    key: str
    role: str
    pid: int | None
    host: str
    rank: int | None
    world_size: int | None
    complete: bool

    @property
    def label(self) -> str:
        """``role (pid N)``, as the terminal output names a process."""
        return f"{self.role} (pid {self.pid})" if self.pid is not None else self.role

    @property
    def slug(self) -> str:
        """A name without spaces, unique per run: ``role-pid`` (ShiViz host names)."""
        base = "".join(c if c.isalnum() or c in "._-" else "_" for c in self.role) or "proc"
        return f"{base}-{self.pid}" if self.pid is not None else base


def lanes(run: Run) -> list[Lane]:
    """Every process of the run (also those with no event), in start order."""
    keys = set(run.processes) | set(run.executions) | set(run.order.index)
    out = []
    for key in keys:
        p = run.processes.get(key)
        if p is None:
            out.append(Lane(key, key, None, "", None, None, False))
        else:
            out.append(Lane(key, p.role, p.pid, p.host, p.rank, p.world_size, p.complete))

    def sort_key(lane: Lane) -> tuple[int, int, str]:
        p = run.processes.get(lane.key)
        return (p.started_ns, p.pid, lane.key) if p else (0, 0, lane.key)

    return sorted(out, key=sort_key)


def hb_time(run: Run, key: str, clock: int) -> int:
    """The analyzer's Lamport time of ``clock`` in process ``key``."""
    order = run.order
    p = order.index.get(key)
    if p is None:
        return clock
    return order.lamport_at(p, clock, run.matching.offsets)


@dataclass(frozen=True, slots=True)
class MessageLink:
    """One send → receive edge of the happens-before sweep (event ids of the Matching)."""

    send: int
    recv: int
    ambiguous: bool


def message_links(run: Run) -> list[MessageLink]:
    """Cross-process send → receive pairs, ordered by the receive's then the send's id."""
    m, order = run.matching, run.order
    ambiguous = {r for r, _ in m.uncertain}
    seen: set[tuple[int, int]] = set()
    out: list[MessageLink] = []
    for r, sends in order.sources.items():
        for s in sends:
            if m.proc_of[s] != m.proc_of[r] and (s, r) not in seen:
                seen.add((s, r))
                out.append(MessageLink(s, r, r in ambiguous))
    for r, h in order.hub_of.items():
        for s in m.hubs[h][0]:
            if m.proc_of[s] != m.proc_of[r] and (s, r) not in seen:
                seen.add((s, r))
                out.append(MessageLink(s, r, False))
    out.sort(key=lambda link: (link.recv, link.send))
    return out


def event(run: Run, event_id: int) -> MessageEvent:
    return run.matching.events[event_id]


def channel_text(ev: MessageEvent) -> str:
    return channel_label(ev)


@dataclass(frozen=True, slots=True)
class LaneEvent:
    """One event of a process, for per-event formats (ShiViz)."""

    clock: int
    action: str
    """``start`` (a method's first start), ``send`` or ``recv``."""
    method: str | None
    """The method that starts, or the one on top of the stack at a message."""
    event_id: int | None
    """Message event id in the Matching (``send``/``recv`` only)."""


def lane_events(run: Run, key: str) -> list[LaneEvent]:
    """First starts and message events of process ``key`` in clock order.

    At equal clocks a method start comes before a message event (the order
    :mod:`distea.analyzer.graph` uses too).
    """
    out: list[tuple[int, int, LaneEvent]] = []
    for name, ex in run.executions.get(key, {}).items():
        out.append((ex.first, 0, LaneEvent(ex.first, "start", name, None)))
    p = run.order.index.get(key)
    if p is not None:
        m = run.matching
        for i in m.events_of(p):
            ev = m.events[i]
            out.append((ev.clock, 1, LaneEvent(ev.clock, ev.direction, ev.method, i)))
    out.sort(key=lambda t: (t[0], t[1], t[2].method or ""))
    return [e for _, _, e in out]
