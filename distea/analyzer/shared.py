"""Shared memory: processes that map one segment are ordered by same-host time.

A store into shared memory is no event: nothing says when it was written or
read. What the trace has is who shares a segment (``shm`` attaches, see
:mod:`distea.tracer.channels.sharedmem`) and, on some records, the time
(``meta["t"]``, CLOCK_MONOTONIC, one clock for the whole host): attaches,
semaphore operations, signals. The safe rule (docs/semantics.md, "Shared
memory"):

    an effect that reached sharer P at clock c may be written to the segment
    from time t = max(P's attach, the latest time known to precede P's clock
    c) on; it may be read by every other sharer R from R's first event after
    t, that is from clock max(R's attach, the latest clock of R recorded at
    or before t).

A time known to precede (P, c): one recorded in P at or before c, or one
recorded in another process of the host before a send that reached P at
or before c through a pairing that carried its content (bytes of a pipe or
stream, a spawn token, an exit, a timed semaphore or signal, a file):
that receive came after that send in real time (:class:`KnownTimes`). Without
it, a child that got its last order through a pipe with no time of its own
would seem to store from its attach on.

Only mappings that can write carry an effect out (a read-only sharer
receives). Backwards (dependencies), the mirror image: what R ran at clock c
may have read what a writer P stored before the earliest time recorded in R
at or after c, that is up to (not including) P's earliest clock recorded at
or after it.

The times are sparse (a process that only computes records none between its
attach and its end), so the rule is coarse: R is impacted from its latest
timed event before t, which may be long before t. That is the price of
seeing no store; more timed events (any semaphore use) make it sharper.
Applied at query time, to a fixed point with the message order
(:class:`~distea.analyzer.impact.Analysis`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from distea.analyzer.matching import STREAM_KINDS, Matching
from distea.analyzer.order import Order

INF = 1 << 62
"""Later than any clock or time of a run."""
CONTENT_KINDS = STREAM_KINDS | {"pipe", "mp", "proc", "exit", "sem", "signal", "file"}
"""Kinds whose certain pairings carry what the receive got (bytes, a token, an exit) or
are decided by same-host time: the receive returned after its send was made. The
pairings of other kinds (a window of ZeroMQ sends, hubs, candidates) may name a send
the receive did not need, so they give no time."""


@dataclass(slots=True)
class Sharer:
    """One process's first attach to a segment."""

    process: int
    clock: int
    time: int
    writable: bool


@dataclass(slots=True)
class Segment:
    """A shared segment with at least two sharing processes."""

    channel: str
    path: str
    sharers: list[Sharer]


@dataclass(slots=True)
class Timeline:
    """The timed events of one process, for bounds both ways between clocks and times."""

    clocks: list[int]
    """Clocks of the timed events, increasing; ``floor_time[k]``: the greatest time
    among the first ``k + 1``, ``ceil_time[k]``: the least among those from ``k`` on."""
    floor_time: list[int]
    ceil_time: list[int]
    times: list[int]
    """Times, increasing; ``floor_clock[k]``: the greatest clock among the first ``k + 1``,
    ``ceil_clock[k]``: the least among those from ``k`` on."""
    floor_clock: list[int]
    ceil_clock: list[int]

    @classmethod
    def of(cls, points: list[tuple[int, int]]) -> Timeline:
        """From (clock, time) pairs."""
        by_clock = sorted(points)
        by_time = sorted((t, c) for c, t in points)
        return cls([c for c, _ in by_clock], _running(max, [t for _, t in by_clock]),
                   _running(min, [t for _, t in by_clock], backwards=True),
                   [t for t, _ in by_time], _running(max, [c for _, c in by_time]),
                   _running(min, [c for _, c in by_time], backwards=True))

    def time_at_least(self, clock: int) -> int | None:
        """A time no later than the event at ``clock``: the latest recorded at or before it."""
        k = bisect_right(self.clocks, clock)
        return self.floor_time[k - 1] if k else None

    def time_at_most(self, clock: int) -> int:
        """A time no earlier than the event at ``clock``: the earliest recorded at or after."""
        k = bisect_left(self.clocks, clock)
        return self.ceil_time[k] if k < len(self.clocks) else INF

    def clock_at_most(self, time: int) -> int:
        """Every event after ``time`` has at least this clock (-1: every event)."""
        k = bisect_right(self.times, time)
        return self.floor_clock[k - 1] if k else -1

    def clock_at_least(self, time: int) -> int:
        """Every event before ``time`` has at most this clock (INF: every event)."""
        k = bisect_left(self.times, time)
        return self.ceil_clock[k] if k < len(self.times) else INF


def _running(op: Callable[[int, int], int], values: list[int], backwards: bool = False
             ) -> list[int]:
    out: list[int] = []
    for v in (reversed(values) if backwards else values):
        out.append(v if not out else op(out[-1], v))
    return out[::-1] if backwards else out


class KnownTimes:
    """Per process, times known to precede its events: ``time_before(p, c)``.

    A time recorded at clock c' <= c of p (its :class:`Timeline`), or carried in
    by a receive of p at c' <= c paired by a certain edge (kinds in
    :data:`CONTENT_KINDS`, same host) with a send whose own known time is that:
    the send was made after it, and the receive returned after the send.

    Only receives after p's latest recorded time at or before c can carry a
    later one (what came before was known when that time was read), so a
    question looks at that stretch of p only, and at the senders' stretches
    before their sends, and so on back: computed on demand, each stretch
    scanned once (:meth:`_scan`), without recursion (chains may be long).
    """

    def __init__(self, m: Matching, order: Order, timelines: Mapping[int, Timeline]) -> None:
        self.m = m
        self.order = order
        self.timelines = timelines
        self.hosts = [_host(key) for key in m.process_keys]
        self._sent_by: dict[int, int] | None = None
        self._stretches: dict[tuple[int, int], _Stretch] = {}

    def time_before(self, p: int, clock: int) -> int | None:
        """A time no later than (p, clock), the latest known; None if none is."""
        stack = [(p, clock)]
        while stack:
            q, c = stack[-1]
            wanted = self._scan(q, c)
            if wanted is None:
                stack.pop()
            else:
                stack.append(wanted)
        return self._known(p, clock)[1]

    def _known(self, p: int, clock: int) -> tuple[bool, int | None]:
        """(whether the stretch of p up to ``clock`` is scanned, the time known then)."""
        own_clock, own = -1, None
        timeline = self.timelines.get(p)
        if timeline is not None:
            k = bisect_right(timeline.clocks, clock)
            if k:
                own_clock, own = timeline.clocks[k - 1], timeline.floor_time[k - 1]
        stretch = self._stretches.get((p, own_clock))
        if stretch is None:
            return own_clock == clock, own  # a stretch is empty up to its own time
        if stretch.end < clock:
            return False, own
        k = bisect_right(stretch.clocks, clock)
        if not k:
            return True, own
        carried = stretch.times[k - 1]
        return True, carried if own is None or carried > own else own

    def _scan(self, p: int, clock: int) -> tuple[int, int] | None:
        """Scan p's stretch up to ``clock``; or the (process, clock) it needs first."""
        own_clock = -1
        timeline = self.timelines.get(p)
        if timeline is not None:
            k = bisect_right(timeline.clocks, clock)
            if k:
                own_clock = timeline.clocks[k - 1]
        clocks = self.order.clocks[p]
        stretch = self._stretches.get((p, own_clock))
        if stretch is None:
            stretch = self._stretches[(p, own_clock)] = _Stretch(
                bisect_right(clocks, own_clock), own_clock, [], [])
        m, base, sent_by = self.m, self.m.offsets[p], self._sends()
        proc_of, events = m.proc_of, m.events
        end = bisect_right(clocks, clock)
        while stretch.next < end:
            r = base + stretch.next
            best = -1
            if r in sent_by:
                for s in self._content_sends(r, sent_by[r]):
                    done, t = self._known(proc_of[s], events[s].clock)
                    if not done:
                        return proc_of[s], events[s].clock
                    if t is not None and t > best:
                        best = t
            if best >= 0 and (not stretch.times or best > stretch.times[-1]):
                stretch.clocks.append(clocks[stretch.next])
                stretch.times.append(best)
            stretch.end = clocks[stretch.next]
            stretch.next += 1
        if stretch.end < clock:
            stretch.end = clock  # nothing else of p up to there
        return None

    def _sends(self) -> dict[int, int]:
        """Receive → a certain send (the last; ``Order.multi`` has them all)."""
        if self._sent_by is None:
            self._sent_by = {r: s for s, r in self.m.edges}
        return self._sent_by

    def _content_sends(self, r: int, s: int) -> list[int]:
        """The sends of other processes of r's host that certainly carried r's content."""
        m, order = self.m, self.order
        if m.events[r].kind not in CONTENT_KINDS:
            return []
        pr, lamport = m.proc_of[r], order.lamport
        return [s for s in order.multi.get(r, (s,))
                if m.proc_of[s] != pr and self.hosts[m.proc_of[s]] == self.hosts[pr]
                and lamport[s] < lamport[r]]  # a demoted pairing is not in the order


@dataclass(slots=True)
class _Stretch:
    """The receives of one process after one of its recorded times, scanned so far."""

    next: int
    """Index (among the process's events) of the next event to scan."""
    end: int
    """The clock up to which it is scanned."""
    clocks: list[int]
    """Clocks where the time carried in rises, increasing."""
    times: list[int]
    """The time carried in from that clock on."""


def _host(key: str) -> str:
    """The host of a process key (``host:pid:start_ns``)."""
    return key.rsplit(":", 2)[0]


@dataclass(slots=True)
class Arrival:
    """Impact reaching a process through a segment: where, from whom."""

    clock: int
    segment: int
    source: int
    """The writing process."""
    time: int
    """The time from which the writer may have stored the effect."""


@dataclass(slots=True)
class SharedMemory:
    """The shared segments of a run and the safe order between their sharers."""

    segments: list[Segment] = field(default_factory=list)
    timelines: dict[int, Timeline] = field(default_factory=dict)
    known: KnownTimes | None = None
    by_process: dict[int, list[int]] = field(default_factory=dict)
    """Process → indexes of the segments it shares."""

    @classmethod
    def of(cls, m: Matching, order: Order) -> SharedMemory:
        found: dict[str, dict[int, Sharer]] = {}
        paths: dict[str, str] = {}
        for i, ev in enumerate(m.events):
            if ev.kind != "shm" or not ev.meta or not isinstance(ev.meta.get("t"), int):
                continue
            p = m.proc_of[i]
            sharers = found.setdefault(ev.channel, {})
            writable = bool(ev.meta.get("w", True))
            known = sharers.get(p)
            if known is None:
                sharers[p] = Sharer(p, ev.clock, int(ev.meta["t"]), writable)  # type: ignore[call-overload]
            else:
                known.writable = known.writable or writable
            paths.setdefault(ev.channel, str(ev.meta.get("path", ev.channel)))
        out = cls()
        for channel, sharers in found.items():
            if len(sharers) < 2:
                continue
            index = len(out.segments)
            out.segments.append(Segment(channel, paths[channel], list(sharers.values())))
            for p in sharers:
                out.by_process.setdefault(p, []).append(index)
        if out.segments:
            points: dict[int, list[tuple[int, int]]] = {}
            for i, ev in enumerate(m.events):
                t = ev.meta.get("t") if ev.meta else None
                if isinstance(t, int):
                    points.setdefault(m.proc_of[i], []).append((ev.clock, t))
            out.timelines = {p: Timeline.of(pts) for p, pts in points.items()}
            out.known = KnownTimes(m, order, out.timelines)
        return out

    def before(self, r: int, time: int, order: Order) -> int:
        """A clock of ``r`` that every event of ``r`` after ``time`` comes after (-1: none).

        ``r``'s own latest timed event at or before ``time``, or, sharper, the
        latest event of ``r`` that happens before a timed event of any process
        at or before ``time``.
        """
        clock = self.timelines[r].clock_at_most(time) if r in self.timelines else -1
        for x, timeline in self.timelines.items():
            if x == r:
                continue
            at = timeline.clock_at_most(time)
            if at >= 0:
                clock = max(clock, order.known_at(x, at, r))
        return clock

    def __bool__(self) -> bool:
        return bool(self.segments)

    def forward(self, starts: Mapping[int, int], order: Order, floors: Mapping[int, int]
                ) -> dict[int, Arrival]:
        """Where impact that starts at ``starts`` (process → clock) may arrive by memory.

        ``floors``: for processes whose start is itself an arrival through memory,
        the time it arrived from (the effect was not there before).
        """
        out: dict[int, Arrival] = {}
        for p, start in starts.items():
            for index in self.by_process.get(p, ()):
                segment = self.segments[index]
                writer = next(s for s in segment.sharers if s.process == p)
                if not writer.writable:
                    continue
                t = self.known.time_before(p, max(start, writer.clock)) \
                    if self.known is not None else None
                if t is None:
                    continue
                t = max(t, floors.get(p, t))
                for reader in segment.sharers:
                    r = reader.process
                    if r == p:
                        continue
                    clock = max(reader.clock, self.before(r, t, order) + 1)
                    if r not in out or clock < out[r].clock:
                        out[r] = Arrival(clock, index, p, t)
        return out

    def backward(self, ends: Sequence[int], limits: Sequence[int]) -> list[tuple[int, int]]:
        """(process, clock) points that what ran up to ``ends`` may have read from memory.

        ``limits``: per process, a clock no event of it exceeds (for "all of it").
        """
        points: list[tuple[int, int]] = []
        for segment in self.segments:
            for reader in segment.sharers:
                q = reader.process
                if ends[q] < reader.clock:
                    continue  # had not mapped the segment yet
                t = self.timelines[q].time_at_most(ends[q])
                for writer in segment.sharers:
                    p = writer.process
                    if p == q or not writer.writable or writer.time >= t:
                        continue
                    end = min(self.timelines[p].clock_at_least(t) - 1, limits[p])
                    if end > ends[p]:
                        points.append((p, end))
        return points
