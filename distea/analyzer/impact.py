"""Forward impact, backward dependencies and explanations (DESIGN.md §5).

Definitions, with ``first_P(m)``/``last_P(m)`` the Execute-After facts of
method ``m`` in process ``P`` and ``→`` happens-before:

- start of impact ``s_P(Q)``: the earliest of ``first_P(m)`` for ``m`` in ``Q``
  that ran in ``P``, and the clock of the earliest receive in ``P`` that
  happens after some ``first_X(m)``, ``m`` in ``Q``;
- ``impact(Q) = {(P, m') : s_P(Q) defined and last_P(m') >= s_P(Q)}``;
- ``deps(T) = {(P, m) : first_P(m) → or = an event at which some t in T was
  executing}``; since ``last_Q(t)`` is the latest such event in ``Q``, that is
  ``first_P(m) <= V(Q, last_Q(t))[P]`` for some ``(Q, t)``;
- ``explain(Q, target)``: the chain with the fewest messages from a first
  start of a query method to an execution of the target in the impact set.

Baselines, reported with every result:

- MCov: every (process, method) pair that executed in the run — what a
  coverage-only analysis would call impacted;
- DistIA (Cai & Thain, ASE 2016), our reading of its per-sender
  first-receipt rule: a process ``P`` becomes impacted at the first receive
  from an impacted sender ``Y`` whose Lamport time is later than ``Y``'s
  impact start, iterated to a fixed point. It compares Lamport timestamps
  instead of happens-before, and does not ask whether that message was sent
  after the impact reached ``Y``; it is therefore a superset of ``impact``.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from distea.analyzer.matching import Matching
from distea.analyzer.order import Order
from distea.analyzer.shared import Arrival, SharedMemory
from distea.analyzer.unseen import PossibleEdge, backward, crossings
from distea.model import Execution, channel_label


@dataclass(slots=True)
class ImpactResult:
    """What ``impact(queries)`` returns: impacted methods per process key."""

    queries: list[str]
    """The query strings as given."""
    methods: list[str]
    """The methods they resolved to."""
    starts: dict[str, int]
    """Process key → s_P(Q), for every process the impact reached."""
    impacted: dict[str, list[str]]
    """Process key → impacted method names (sorted), only processes with some."""
    mcov_size: int
    distia_size: int
    distia_starts: dict[str, int] = field(default_factory=dict)
    """Process key → where the DistIA baseline starts impact."""
    unseen: list[tuple[str, str, str]] = field(default_factory=list)
    """Connections with bytes the tracer did not see that the impact may have crossed:
    (sender key, receiver key, channel). Where they lead, the set is safe, not precise."""
    shared_memory: dict[str, str] = field(default_factory=dict)
    """Process key → the shared segment (its path) through which the impact reaches
    it first, where that is how it arrives: a safe guess by time, not a seen message."""

    @property
    def size(self) -> int:
        """Number of impacted (process, method) pairs."""
        return sum(len(v) for v in self.impacted.values())

    @property
    def method_names(self) -> list[str]:
        """Distinct impacted method names over all processes."""
        return sorted({name for names in self.impacted.values() for name in names})

    def pairs(self) -> Iterator[tuple[str, str]]:
        for key, names in self.impacted.items():
            for name in names:
                yield key, name


@dataclass(slots=True)
class DepsResult:
    """What ``deps(targets)`` returns: methods the targets may depend on, per process."""

    targets: list[str]
    methods: list[str]
    ends: dict[str, int]
    """Process key → latest clock of that process that happens before a target execution."""
    deps: dict[str, list[str]]
    mcov_size: int

    @property
    def size(self) -> int:
        return sum(len(v) for v in self.deps.values())

    @property
    def method_names(self) -> list[str]:
        return sorted({name for names in self.deps.values() for name in names})

    def pairs(self) -> Iterator[tuple[str, str]]:
        for key, names in self.deps.items():
            for name in names:
                yield key, name


@dataclass(frozen=True, slots=True)
class Step:
    """One link of an explanation chain."""

    process: str
    clock: int
    action: str
    """``start`` (query method first starts), ``send``, ``recv``, or ``runs`` (the target)."""
    method: str | None
    """Query/target method, or the method on top of the stack at a send/receive."""
    detail: str
    """Channel (``kind channel``) for messages, a short sentence otherwise."""


@dataclass(slots=True)
class Explanation:
    """Why (or why not) ``target`` is impacted by ``query``."""

    query: list[str]
    target: str
    process: str | None
    """The process whose execution of the target the chain reaches."""
    impacted: bool
    steps: list[Step]
    reason: str

    @property
    def messages(self) -> int:
        return sum(1 for s in self.steps if s.action == "recv")


Via = tuple[int, ...] | None
"""(send id, receive id) that brought the impact into a process, or None for a start;
through shared memory: (-1 - segment index, writing process, its clock)."""


class Analysis:
    """Precomputed per-process indexes for fast repeated queries on one run."""

    def __init__(
        self,
        executions: Mapping[str, Mapping[str, Execution]],
        matching: Matching,
        order: Order,
        unseen: Sequence[PossibleEdge] = (),
    ) -> None:
        self.executions = executions
        self.unseen = unseen
        """Possible edges of connections with unseen bytes (:mod:`distea.analyzer.unseen`)."""
        self.matching = matching
        self.order = order
        self.shared = SharedMemory.of(matching, order)
        self.keys = order.process_keys
        self.index = order.index
        # per process: (name, first, last) sorted by name, for filtering in name order
        self._rows: list[list[tuple[str, int, int]]] = []
        for key in self.keys:
            ex = executions.get(key, {})
            # names are unique per process: sorting them sorts the rows (and is faster)
            self._rows.append([(n, e.first, e.last) for n in sorted(ex) for e in (ex[n],)])
        self._lasts = [sorted([last for _, _, last in rows]) for rows in self._rows]
        # executions of processes that logged no message at all are still analysed
        self.mcov_size = sum(len(ex) for ex in executions.values())
        self._distia: dict[int, list[tuple[int, list[int], list[int]]]] | None = None
        self._by_sender: list[list[tuple[int, int, int, int]]] | None = None
        self._search_cache: dict[
            tuple[str, ...],
            tuple[dict[int, int], dict[int, int], dict[int, list[tuple[int, int, Via]]]],
        ] = {}

    def prepare(self) -> None:
        """Build the indexes every impact query needs (the DistIA baseline's), up front."""
        self._distia_index()

    # -- forward ---------------------------------------------------------------

    def query_firsts(self, methods: list[str]) -> dict[int, int]:
        """Process index → earliest first_X(m) over the query methods."""
        firsts: dict[int, int] = {}
        for x, key in enumerate(self.keys):
            ex = self.executions.get(key, {})
            for name in methods:
                e = ex.get(name)
                if e is not None and (x not in firsts or e.first < firsts[x]):
                    firsts[x] = e.first
        return firsts

    def starts(self, firsts: Mapping[int, int]) -> dict[int, int]:
        """s_P(Q) for every process the impact reaches."""
        return self._starts(firsts)[0]

    def _starts(self, firsts: Mapping[int, int]) -> tuple[dict[int, int], dict[int, Arrival]]:
        """s_P(Q), and the shared-memory arrivals that set some of them.

        Vector clocks give the starts directly; the few uncertain edges kept out
        of the vector clocks (``Order.extra``), the possible edges of connections
        with unseen bytes (:mod:`distea.analyzer.unseen`) and the shared-segment
        rule (:mod:`distea.analyzer.shared`) are then followed to a fixed point.
        Where a start is an arrival through memory at time t, that process's
        effect cannot be stored back before t (its ``floor``): no echo.
        """
        sources = dict(firsts)
        arrived: dict[int, Arrival] = {}
        m = self.matching
        while True:
            out = self._starts_once(sources)
            changed = False
            for s, r in self.order.extra:
                sy = out.get(m.proc_of[s])
                if sy is None or m.events[s].clock < sy:
                    continue
                p, c = m.proc_of[r], m.events[r].clock
                if (p not in out or c < out[p]) and (p not in sources or c < sources[p]):
                    sources[p] = c
                    arrived.pop(p, None)
                    changed = True
            for p, c, _ in crossings(self.unseen, out, self.order):
                if (p not in out or c < out[p]) and (p not in sources or c < sources[p]):
                    sources[p] = c
                    arrived.pop(p, None)
                    changed = True
            if self.shared:
                arrived = {p: a for p, a in arrived.items() if self._set_by(p, a, sources, out)}
                floors = {p: a.time for p, a in arrived.items()}
                for p, arrival in self.shared.forward(out, self.order, floors).items():
                    c = arrival.clock
                    if (p not in out or c < out[p]) and (p not in sources or c < sources[p]):
                        sources[p] = c
                        arrived[p] = arrival
                        changed = True
            if not changed:
                return out, arrived

    def _set_by(self, p: int, arrival: Arrival, sources: Mapping[int, int],
                out: Mapping[int, int]) -> bool:
        """Whether ``arrival`` is what sets p's start (no receive or query start as early)."""
        if sources.get(p) != arrival.clock or out.get(p) != arrival.clock:
            return False
        c = self.order.earliest_after_any(p, sources)
        return c is None or c > arrival.clock

    def _starts_once(self, firsts: Mapping[int, int]) -> dict[int, int]:
        order = self.order
        out: dict[int, int] = {}
        for p in range(len(self.keys)):
            s = firsts.get(p)
            c = order.earliest_after_any(p, firsts)
            if c is not None and (s is None or c < s):
                s = c
            if s is not None:
                out[p] = s
        return out

    def impacted_from(self, starts: Mapping[int, int]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for p, s in starts.items():
            names = [n for n, _, last in self._rows[p] if last >= s]
            if names:
                out[self.keys[p]] = names
        return out

    def impact(self, queries: list[str], methods: list[str]) -> ImpactResult:
        firsts = self.query_firsts(methods)
        starts, arrived = self._starts(firsts)
        impacted = self.impacted_from(starts)
        # the baseline crosses connections with unseen bytes where distea does, so that
        # it stays a superset (it has no rule of its own for them)
        seeds = dict(firsts)
        for p, c, _ in crossings(self.unseen, starts, self.order):
            if c < seeds.get(p, c + 1):
                seeds[p] = c
        dstarts = self.distia_starts(seeds)
        distia_size = sum(
            len(self._lasts[p]) - bisect_left(self._lasts[p], s) for p, s in dstarts.items()
        )
        return ImpactResult(
            queries=list(queries),
            methods=list(methods),
            starts={self.keys[p]: s for p, s in starts.items()},
            impacted=impacted,
            mcov_size=self.mcov_size,
            distia_size=distia_size,
            distia_starts={self.keys[p]: s for p, s in dstarts.items()},
            unseen=[(self.keys[e.sender], self.keys[e.receiver], e.channel)
                    for _, _, e in crossings(self.unseen, starts, self.order)],
            shared_memory={self.keys[p]: self.shared.segments[a.segment].path
                           for p, a in arrived.items()},
        )

    # -- DistIA baseline -------------------------------------------------------

    def _distia_index(self) -> dict[int, list[tuple[int, list[int], list[int]]]]:
        """Sender → (receiver, Lamport times, clocks) of its messages' receives, in order.

        The sweep already listed, per receiver, the receives ordered after each
        sender (``Order.recv_from``: sources, hubs and extra edges).
        """
        if self._distia is None:
            order = self.order
            lamport, events = order.lamport, self.matching.events
            index: dict[int, list[tuple[int, list[int], list[int]]]] = {}
            for p, by_sender in enumerate(order.recv_from):
                for y, rs in enumerate(by_sender):
                    if rs:  # event ids follow clock order within a process
                        index.setdefault(y, []).append(
                            (p, [lamport[r] for r in rs], [events[r].clock for r in rs]))
            self._distia = index
        return self._distia

    def distia_starts(self, firsts: Mapping[int, int]) -> dict[int, int]:
        """Impact starts under the DistIA rule (module docstring), to a fixed point."""
        index = self._distia_index()
        offsets = self.matching.offsets
        starts = dict(firsts)
        work = deque(starts)
        queued = set(starts)
        while work:
            y = work.popleft()
            queued.discard(y)
            t = self.order.lamport_at(y, starts[y], offsets)
            for p, ls, cs in index.get(y, ()):
                k = bisect_right(ls, t)
                if k < len(ls) and (p not in starts or cs[k] < starts[p]):
                    starts[p] = cs[k]
                    if p not in queued:
                        queued.add(p)
                        work.append(p)
            if not work and self.shared:  # shared memory as impact has it: still a superset
                for p, arrival in self.shared.forward(starts, self.order, {}).items():
                    if p not in starts or arrival.clock < starts[p]:
                        starts[p] = arrival.clock
                        queued.add(p)
                        work.append(p)
        return starts

    # -- backward --------------------------------------------------------------

    def deps(self, targets: list[str], methods: list[str]) -> DepsResult:
        order = self.order
        m = self.matching
        n = len(self.keys)
        ends = [-1] * n
        points = [(q, e.last) for q, key in enumerate(self.keys)
                  for name in methods if (e := self.executions.get(key, {}).get(name))]
        while points:
            for q, clock in points:
                vec = order.vector_at(q, clock)
                ends = [a if a >= b else b for a, b in zip(ends, vec, strict=True)]
            # uncertain edges kept out of the vector clocks: follow them backwards too
            points = [(m.proc_of[s], m.events[s].clock) for s, r in order.extra
                      if m.events[r].clock <= ends[m.proc_of[r]]
                      and m.events[s].clock > ends[m.proc_of[s]]]
            # and connections with unseen bytes: what a point may have read from them
            points.extend(backward(self.unseen, ends, order))
            if self.shared:  # what a target's process read from memory, written earlier
                points.extend(self.shared.backward(ends, self._limits()))
        out: dict[str, list[str]] = {}
        for p, end in enumerate(ends):
            if end < 0:
                continue
            names = [nm for nm, first, _ in self._rows[p] if first <= end]
            if names:
                out[self.keys[p]] = names
        return DepsResult(
            targets=list(targets),
            methods=list(methods),
            ends={self.keys[p]: e for p, e in enumerate(ends) if e >= 0},
            deps=out,
            mcov_size=self.mcov_size,
        )

    def _limits(self) -> list[int]:
        """Per process: its highest clock (last method execution or message event)."""
        m = self.matching
        limits = []
        for p, lasts in enumerate(self._lasts):
            events = m.events_of(p)
            limits.append(max(lasts[-1] if lasts else -1,
                              m.events[events[-1]].clock if events else -1))
        return limits

    # -- explanations ----------------------------------------------------------

    def _pairs_by_sender(self) -> list[list[tuple[int, int, int, int]]]:
        """Per sender process: (send clock, send id, receive id, receiver) sorted by clock."""
        if self._by_sender is None:
            m, order = self.matching, self.order
            by: list[list[tuple[int, int, int, int]]] = [[] for _ in self.keys]
            for r, ss in order.sources.items():
                for s in ss:
                    by[m.proc_of[s]].append((m.events[s].clock, s, r, m.proc_of[r]))
            for r, h in order.hub_of.items():
                for s in m.hubs[h][0]:
                    if m.proc_of[s] != m.proc_of[r]:
                        by[m.proc_of[s]].append((m.events[s].clock, s, r, m.proc_of[r]))
            for s, r in order.extra:
                by[m.proc_of[s]].append((m.events[s].clock, s, r, m.proc_of[r]))
            for lst in by:
                lst.sort()
            self._by_sender = by
        return self._by_sender

    def _search(
        self, methods: tuple[str, ...], shared: bool = True
    ) -> tuple[dict[int, int], dict[int, int], dict[int, list[tuple[int, int, Via]]]]:
        """Query firsts, impact starts, and the breadth-first search by messages.

        ``hist[p]`` lists every improvement of the earliest clock of ``p`` reachable
        from a query start: (number of messages, clock, (send, receive) or None). The
        search scans each send at most once over all levels; it is cached per query,
        so explaining many targets of one query (the HTML report) costs one search.
        Without ``shared``, shared-memory hops (a guess by time) are left out.
        """
        cached = self._search_cache.get((*methods, str(shared)))
        if cached is not None:
            return cached
        m = self.matching
        firsts = self.query_firsts(list(methods))
        starts = self.starts(firsts)
        reach: dict[int, int] = dict(firsts)
        hist: dict[int, list[tuple[int, int, Via]]] = {p: [(0, f, None)] for p, f in firsts.items()}
        old_reach: dict[int, int | None] = {p: None for p in firsts}
        by_sender = self._pairs_by_sender()
        level = 0
        while old_reach:
            level += 1
            new: dict[int, tuple[int, tuple[int, ...]]] = {}
            for y, prev in old_reach.items():
                lst = by_sender[y]
                for k in range(_first_at_or_after(lst, reach[y]), len(lst)):
                    sc, s, r, p = lst[k]
                    if prev is not None and sc >= prev:
                        break  # tried at an earlier level
                    rc = m.events[r].clock
                    cur = new.get(p)
                    if (p not in reach or rc < reach[p]) and (cur is None or rc < cur[0]):
                        new[p] = (rc, (s, r))
            for y in old_reach if shared and self.shared else ():
                for p, arrival in self.shared.forward({y: reach[y]}, self.order, {}).items():
                    rc = arrival.clock
                    cur = new.get(p)
                    if (p not in reach or rc < reach[p]) and (cur is None or rc < cur[0]):
                        new[p] = (rc, (-1 - arrival.segment, y, reach[y]))
            old_reach = {}
            for p, (rc, via) in new.items():
                old_reach[p] = reach.get(p)
                reach[p] = rc
                hist.setdefault(p, []).append((level, rc, via))
        if len(self._search_cache) >= 16:
            self._search_cache.clear()
        self._search_cache[(*methods, str(shared))] = (firsts, starts, hist)
        return firsts, starts, hist

    def explain(
        self, queries: list[str], methods: list[str], target: str, process: str | None = None
    ) -> Explanation:
        m = self.matching
        firsts, starts, hist = self._search(tuple(methods), shared=False)  # seen edges first
        candidates = [
            (p, self.executions[key][target])
            for p, key in enumerate(self.keys)
            if target in self.executions.get(key, {}) and (process is None or key == process)
        ]
        impacted_in = [(p, e) for p, e in candidates if p in starts and e.last >= starts[p]]
        if not impacted_in:
            reason = self._why_not(methods, target, candidates, starts, firsts)
            return Explanation(list(queries), target, None, False, [], reason)
        # the execution reached with the fewest messages
        def fewest(hist: dict[int, list[tuple[int, int, Via]]]) -> tuple[int | None, int]:
            return min(
                ((min((h[0] for h in hist.get(p, ()) if h[1] <= e.last), default=None), p)
                 for p, e in impacted_in),
                key=lambda t: (t[0] is None, t[0] or 0, t[1]),
            )

        best = fewest(hist)
        if best[0] is None and self.shared:  # only through shared memory
            firsts, starts, hist = self._search(tuple(methods))
            best = fewest(hist)
        if best[0] is None:  # only possible edges of unseen traffic lead there
            return Explanation(list(queries), target, None, True, [],
                               f"{target} is impacted through a connection whose bytes the "
                               "tracer did not see (" + "; ".join(
                                   e.describe(self.keys) for _, _, e in
                                   crossings(self.unseen, starts, self.order)) + "): no "
                               "recorded message chain leads there")
        found = best[1]
        start_of = {p: (f, self._query_method_at(p, methods, f)) for p, f in firsts.items()}
        steps: list[Step] = []
        e_target = self.executions[self.keys[found]][target]
        steps.append(Step(self.keys[found], e_target.last, "runs", target,
                          f"{target} executes at clock {e_target.last}, at or after the "
                          f"impact start {starts[found]} of its process"))
        p, limit = found, e_target.last
        while True:
            # the improvement with the fewest messages that is early enough
            _, _, via = min(h for h in hist[p] if h[1] <= limit)
            if via is None:
                break
            if via[0] < 0:  # through shared memory: a safe guess by time
                segment = self.shared.segments[-1 - via[0]]
                y, clock = via[1], via[2]
                detail = f"shared memory {segment.path} (ordered by time, not seen)"
                steps.append(Step(self.keys[p], min(h[1] for h in hist[p] if h[2] == via),
                                  "recv", None, detail))
                steps.append(Step(self.keys[y], clock, "send", None, detail))
                p, limit = y, clock
                continue
            s, r = via
            rev, sev = m.events[r], m.events[s]
            relay = m.relay_of.get(r)
            steps.append(Step(rev.process, rev.clock, "recv", rev.method,
                              channel_label(rev) + (
                                  f" — through the untraced server at {relay} (a relay, not "
                                  "observed inside)" if relay is not None else "")))
            steps.append(Step(sev.process, sev.clock, "send", sev.method,
                              channel_label(sev)))
            p, limit = m.proc_of[s], sev.clock
        f, qm = start_of[p]
        steps.append(Step(self.keys[p], f, "start", qm, f"{qm} first starts at clock {f}"))
        steps.reverse()
        hops = sum(1 for st in steps if st.action == "recv")
        reason = (f"{target} runs in {self.keys[found]} after the impact arrives there"
                  + (f" through {hops} message(s)" if hops else " (same process)"))
        shared = sorted({st.detail for st in steps if st.detail.startswith("shared memory")})
        if shared:
            reason += "; the path goes through " + ", ".join(shared)
        return Explanation(list(queries), target, self.keys[found], True, steps, reason)

    def _query_method_at(self, p: int, methods: list[str], f: int) -> str:
        ex = self.executions.get(self.keys[p], {})
        return next(n for n in methods if n in ex and ex[n].first == f)

    def _why_not(
        self,
        methods: list[str],
        target: str,
        candidates: list[tuple[int, Execution]],
        starts: Mapping[int, int],
        firsts: Mapping[int, int],
    ) -> str:
        if not firsts:
            return "no query method executed in this run, so nothing is impacted"
        if not candidates:
            return f"{target} never executed in the selected process(es)"
        parts = []
        for p, e in candidates:
            key = self.keys[p]
            if p not in starts:
                parts.append(f"in {key} the impact never arrives (no receive happens after "
                             "a query method started)")
            else:
                parts.append(f"in {key} {target} last executed at clock {e.last}, before the "
                             f"impact arrived at clock {starts[p]}")
        return "; ".join(parts)


def _first_at_or_after(lst: list[tuple[int, int, int, int]], clock: int) -> int:
    lo, hi = 0, len(lst)
    while lo < hi:
        mid = (lo + hi) // 2
        if lst[mid][0] < clock:
            lo = mid + 1
        else:
            hi = mid
    return lo
