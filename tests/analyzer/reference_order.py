"""The happens-before sweep as it was before vectors were packed into ints.

Kept verbatim (tuples of ints, one Python comparison per entry) as the
oracle that tests/analyzer/test_order_packed.py compares
:func:`distea.analyzer.order.compute_order` with.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from operator import itemgetter

from distea.analyzer.matching import Matching
from distea.analyzer.order import OrderCycleError

Vector = tuple[int, ...]


@dataclass(slots=True)
class Order:
    """Vector times of a run's receives, and queries on them."""

    process_keys: list[str]
    index: dict[str, int]
    rclocks: list[list[int]]
    """Per process: clocks of its receives that have a recorded send, increasing."""
    rvecs: list[list[Vector]]
    """Per process: the vector time at each of those receives."""
    sources: dict[int, list[int]]
    """Receive id → the send ids it was finally ordered after (certain + chosen candidates)."""
    hub_of: dict[int, int]
    """Receive id → index into ``Matching.hubs``."""
    lamport: list[int]
    """Lamport timestamp of every event id."""
    clocks: list[list[int]]
    """Per process: clocks of all its message events (for Lamport lookups)."""
    dropped_candidates: int = 0
    """Uncertain candidate sends left out of the vector clocks (they closed a cycle)."""
    extra: list[tuple[int, int]] = field(default_factory=list)
    """(send, receive) candidates that were left out of the vector clocks only because
    another uncertain candidate closed a cycle with them: either could be the true one,
    so impact and dependency reachability still follow these edges (safety)."""
    notes: list[str] = field(default_factory=list)

    @property
    def base(self) -> Vector:
        return (-1,) * len(self.process_keys)

    def vector_at(self, p: int, clock: int) -> Vector:
        """Vector time of process ``p`` at local ``clock``: -1 where nothing is known."""
        k = bisect_right(self.rclocks[p], clock) - 1
        vec = list(self.rvecs[p][k]) if k >= 0 else [-1] * len(self.process_keys)
        vec[p] = clock
        return tuple(vec)

    def earliest_after(self, p: int, x: int, clock: int) -> int | None:
        """Clock of the earliest receive in ``p`` that happens after clock ``clock`` of ``x``."""
        vecs = self.rvecs[p]
        k = bisect_left(vecs, clock, key=itemgetter(x))
        return self.rclocks[p][k] if k < len(vecs) else None

    def happens_before(self, p: int, clock_p: int, q: int, clock_q: int) -> bool:
        """Whether (p, clock_p) happens before or is (q, clock_q)."""
        if p == q:
            return clock_p <= clock_q
        return self.vector_at(q, clock_q)[p] >= clock_p

    def lamport_at(self, p: int, clock: int, offsets: list[int]) -> int:
        """Lamport time of process ``p`` at ``clock`` (events between messages count 1 each)."""
        k = bisect_right(self.clocks[p], clock) - 1
        if k < 0:
            return clock
        return self.lamport[offsets[p] + k] + (clock - self.clocks[p][k])


def compute_order(m: Matching) -> Order:
    """Sweep all events once; raise :class:`OrderCycleError` on a real cycle."""
    n = len(m.process_keys)
    events = m.events
    proc_of = m.proc_of
    n_events = len(events)

    srcs: dict[int, list[int]] = {}
    for s, r in m.edges:
        srcs.setdefault(r, []).append(s)
    hub_of: dict[int, int] = {}
    for h, (_, recvs) in enumerate(m.hubs):
        for r in recvs:
            hub_of[r] = h
    # receive id -> list of [chain, index of the candidate in use]
    soft: dict[int, list[list]] = {}
    for r, chains in m.uncertain:
        soft.setdefault(r, []).extend([chain, len(chain) - 1] for chain in chains)
    # Start each candidate chain at its latest send that is not causally after the
    # receive through certain edges alone (binary search: along a chain, "after the
    # receive" never turns false again). Only cycles among uncertain edges are left
    # for the sweep to break, one step at a time.
    certain: Order | None = None
    stepped_back = 0  # chains whose latest send(s) are causally after the receive
    if soft:
        certain = compute_order(replace(m, uncertain=[]))
        for r, entries in soft.items():
            pr, cr = proc_of[r], events[r].clock
            for entry in entries:
                chain = entry[0]
                lo, hi = 0, len(chain)
                while lo < hi:
                    mid = (lo + hi) // 2
                    s = chain[mid]
                    if certain.happens_before(pr, cr, proc_of[s], events[s].clock):
                        hi = mid
                    else:
                        lo = mid + 1
                entry[1] = lo - 1
                if lo < len(chain):
                    stepped_back += 1

    base: Vector = (-1,) * n
    know: list[Vector] = [base] * n
    clk = [ev.clock for ev in events]
    # per event: 0 send, 1 receive with exactly one certain send, 2 other receive with
    # sends (several, hub, uncertain), 3 receive with no recorded send
    code = bytearray(3 if ev.direction == "recv" else 0 for ev in events)
    src1 = [-1] * n_events
    for r, ss in srcs.items():
        if len(ss) == 1:
            code[r] = 1
            src1[r] = ss[0]
        else:
            code[r] = 2
    for r in hub_of:
        code[r] = 2
    for r in soft:
        code[r] = 2
    snap_vec: list[Vector | None] = [None] * n_events  # vector known at each processed send
    # clock of the receive that last changed each process's vector (-1: none yet)
    know_t = [-1] * n
    lamport = [0] * n_events
    done = bytearray(n_events)
    last_l = [0] * n  # Lamport and clock of each process's last processed event
    last_c = [0] * n
    pos = list(m.offsets[:n])
    ends = m.offsets[1:]
    rclocks: list[list[int]] = [[] for _ in range(n)]
    rvecs: list[list[Vector]] = [[] for _ in range(n)]
    hub_vec: dict[int, tuple[Vector, int]] = {}
    waiting: dict[int, list[int]] = {}
    ready = deque(range(n))
    queued = [True] * n
    dropped: list[tuple[int, int]] = []
    notes: list[str] = []

    def blocker(r: int) -> tuple[int, bool] | None:
        """First unprocessed send that receive ``r`` waits for, and whether it is uncertain."""
        for s in srcs.get(r, ()):
            if not done[s]:
                return s, False
        h = hub_of.get(r)
        if h is not None and h not in hub_vec:
            for s in m.hubs[h][0]:
                if not done[s]:
                    return s, False
        for entry in soft.get(r, ()):
            if entry[1] >= 0 and not done[entry[0][entry[1]]]:
                return entry[0][entry[1]], True
        return None

    while True:
        while ready:
            p = ready.popleft()
            queued[p] = False
            i = pos[p]
            end = ends[p]
            kp = know[p]
            lp = last_l[p]
            cp = last_c[p]
            rcl = rclocks[p]
            rvs = rvecs[p]
            kt = know_t[p]
            while i < end:
                c = clk[i]
                kind = code[i]
                if kind == 0:  # send: remember what p knows
                    snap_vec[i] = kp
                    lp += c - cp
                    lamport[i] = lp
                    cp = c
                    done[i] = 1
                    if i in waiting:
                        for q in waiting.pop(i):
                            if not queued[q]:
                                queued[q] = True
                                ready.append(q)
                    i += 1
                    continue
                if kind == 1:  # the common receive: one certain send
                    s = src1[i]
                    if not done[s]:
                        waiting.setdefault(s, []).append(p)
                        break
                    sv = snap_vec[s]
                    q = proc_of[s]
                    # (Its shortcut "p knows q's clock at the receive that last set q's
                    # vector, so nothing is new" was dropped: with two events of q at one
                    # clock, a send after that receive, it lost what the receive brought.)
                    if sv is kp:
                        vec = list(kp)
                    else:  # element-wise max; a comprehension is much faster than map(max)
                        vec = [a if a >= b else b for a, b in zip(kp, sv, strict=True)]  # type: ignore[arg-type]
                    if clk[s] > vec[q]:
                        vec[q] = clk[s]
                    vec[p] = c
                    kp = tuple(vec)
                    kt = c
                    rcl.append(c)
                    rvs.append(kp)
                    lp += c - cp
                    if lamport[s] >= lp:
                        lp = lamport[s] + 1
                elif kind == 2:
                    b = blocker(i)
                    if b is not None:
                        waiting.setdefault(b[0], []).append(p)
                        break
                    vec = list(kp)
                    lmax = lp + (c - cp)
                    used: list[int] = list(srcs.get(i, ()))
                    for entry in soft.get(i, ()):
                        if entry[1] >= 0:
                            used.append(entry[0][entry[1]])
                    for s in used:
                        sv = snap_vec[s]
                        assert sv is not None
                        if sv is not kp:
                            vec = [a if a >= b else b for a, b in zip(vec, sv, strict=True)]
                        q = proc_of[s]
                        if clk[s] > vec[q]:
                            vec[q] = clk[s]
                        if lamport[s] + 1 > lmax:
                            lmax = lamport[s] + 1
                    hub = hub_of.get(i)
                    if hub is not None:
                        hv = hub_vec.get(hub)
                        if hv is None:
                            hv = hub_vec[hub] = _hub_vector(m, hub, snap_vec, lamport, base)
                        vec = [a if a >= b else b for a, b in zip(vec, hv[0], strict=True)]
                        if hv[1] + 1 > lmax:
                            lmax = hv[1] + 1
                    vec[p] = c
                    kp = tuple(vec)
                    kt = c
                    rcl.append(c)
                    rvs.append(kp)
                    lp = lmax
                else:  # a receive from outside: knows nothing new
                    lp += c - cp
                lamport[i] = lp
                cp = c
                done[i] = 1
                i += 1
            pos[p] = i
            know[p] = kp
            know_t[p] = kt
            last_l[p] = lp
            last_c[p] = cp
        stuck = [p for p in range(n) if pos[p] < ends[p]]
        if not stuck:
            break
        # A stall: follow "waits for" from a stuck process until it repeats.
        cycle = _find_cycle(stuck[0], pos, proc_of, blocker)
        soft_step = next(((r, s) for r, s, is_soft in cycle if is_soft), None)
        if soft_step is None:
            raise OrderCycleError(_describe_cycle(m, cycle), [events[r] for r, _, _ in cycle])
        r, s = soft_step
        for entry in soft[r]:
            if entry[1] >= 0 and entry[0][entry[1]] == s:
                entry[1] -= 1
                dropped.append((r, s))
                break
        p = proc_of[r]
        if not queued[p]:
            queued[p] = True
            ready.append(p)

    sources: dict[int, list[int]] = {r: list(s) for r, s in srcs.items()}
    for r, entries in soft.items():
        chosen = [e[0][e[1]] for e in entries if e[1] >= 0]
        sources.setdefault(r, []).extend(chosen)
    extra: list[tuple[int, int]] = []
    if dropped:
        # Which dropped candidates are causally after their receive through certain
        # edges alone? Those could never be the sender; the others stay possible.
        assert certain is not None
        for r, s in dropped:
            pr, ps = proc_of[r], proc_of[s]
            if not certain.happens_before(pr, events[r].clock, ps, events[s].clock):
                extra.append((s, r))
        stepped_back += len(dropped) - len(extra)
        if extra:
            notes.append(f"{len(extra)} uncertain candidate sends could not be placed in one "
                         "consistent order with the others; impact still follows them")
    clocks = [[events[i].clock for i in m.events_of(p)] for p in range(n)]
    return Order(
        process_keys=m.process_keys,
        index={k: i for i, k in enumerate(m.process_keys)},
        rclocks=rclocks,
        rvecs=rvecs,
        sources=sources,
        hub_of=hub_of,
        lamport=lamport,
        clocks=clocks,
        dropped_candidates=stepped_back + len(extra),
        extra=extra,
        notes=notes,
    )


def _hub_vector(
    m: Matching, h: int, snap_vec: list[Vector | None], lamport: list[int], base: Vector
) -> tuple[Vector, int]:
    vec = list(base)
    lmax = 0
    for s in m.hubs[h][0]:
        sv = snap_vec[s]
        assert sv is not None
        vec = [a if a >= b else b for a, b in zip(vec, sv, strict=True)]
        q = m.proc_of[s]
        vec[q] = max(vec[q], m.events[s].clock)
        lmax = max(lmax, lamport[s])
    return tuple(vec), lmax


def _find_cycle(
    start: int,
    pos: list[int],
    proc_of: list[int],
    blocker: Callable[[int], tuple[int, bool] | None],
) -> list[tuple[int, int, bool]]:
    """(receive, send it waits for, uncertain?) steps of one wait-for cycle."""
    seen: dict[int, int] = {}
    steps: list[tuple[int, int, bool]] = []
    p = start
    while p not in seen:
        seen[p] = len(steps)
        r = pos[p]
        b = blocker(r)
        assert b is not None, "a stuck process waits for something"
        steps.append((r, b[0], b[1]))
        p = proc_of[b[0]]
    return steps[seen[p]:]


def _describe_cycle(m: Matching, cycle: list[tuple[int, int, bool]]) -> str:
    def where(i: int) -> str:
        ev = m.events[i]
        return (f"{ev.direction} on {ev.kind} {ev.channel!r} [{ev.start}, {ev.end}) "
                f"at clock {ev.clock} in process {ev.process}")

    parts = [f"{where(r)} is paired with {where(s)}" for r, s, _ in cycle]
    return ("the recorded order has a cycle (a message matching bug or a damaged trace), "
            "each receive would happen before its own send: " + "; ".join(parts))
