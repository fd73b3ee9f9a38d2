"""Happens-before over a run's message events: vector clocks from one sweep.

Every process is a chain of events in clock order; a receive also waits for
its sends (:class:`~distea.analyzer.matching.Matching`). One topological
sweep visits every event once and gives each receive its vector time: for
every process Q, the latest clock of Q that happens before (or is) that
receive. Only receives change what a process knows, so vectors are stored
per receive (``rclocks``/``rvecs``) and the vector at any (process, clock) is
the one of the latest receive at or before that clock, with the process's
own entry set to the clock (:meth:`Order.vector_at`). Entries never decrease
along a process, so "the earliest receive in P that knows clock f of X" is a
binary search (:meth:`Order.earliest_after`).

Uncertain receives (:attr:`Matching.uncertain`) are ordered after the latest
send of every candidate chain that is not causally after the receive
(DESIGN.md §4). A first pass over the certain edges alone finds that send by
binary search; when the main sweep still stalls on a cycle through such a
candidate (uncertain edges closing a cycle among themselves), the chain steps
back to its previous send, and a candidate left out that way stays in
``Order.extra`` so that reachability still follows it. A stall with no uncertain
edge on its cycle means a pairing is wrong (a write the tracer could not see
shifted a channel's offsets, or the trace is damaged): the weakest pairing of
the cycle is demoted to an uncertain receive and reported, so that every run
can be ordered (:func:`compute_order`); only ``strict=True``, which tests use
as an assertion, raises :class:`OrderCycleError` naming the events. Nothing
loops.

Vectors are packed into one int each (:class:`Packing`): every entry is a
fixed-width bit field with a spare top bit, so that the element-wise maximum
of two vectors is a handful of big-int operations (a SWAR maximum) instead of
a Python loop over the processes. That keeps the sweep cheap for many
processes; :meth:`Order.vector_at` unpacks a vector into a tuple.

The sweep also computes Lamport timestamps (``lamport``), used by the DistIA
baseline only.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from distea.analyzer.matching import Matching
from distea.model import MessageEvent

Vector = tuple[int, ...]


class OrderCycleError(Exception):
    """The recorded order has a cycle: a receive would happen before its own send."""

    def __init__(self, message: str, events: list[MessageEvent]) -> None:
        super().__init__(message)
        self.events = events


class Packing:
    """How a vector time of ``n`` processes is packed into one non-negative int.

    Entry ``x`` (a clock, or -1 for "nothing known") is stored as ``clock - lo``
    in bits ``[x * width, (x + 1) * width - 1)``; the top bit of every field
    stays 0, so that subtracting two packed vectors field by field never
    borrows across fields. ``lo`` is at most -1 and at most every clock of the
    run, so stored values are never negative.
    """

    __slots__ = ("all_fields", "base", "clear", "field", "guards", "lo", "n", "shifts", "width")

    def __init__(self, n: int, lo: int, hi: int) -> None:
        self.n = n
        self.lo = lo
        self.width = width = max(hi - lo, 1).bit_length() + 1
        self.shifts = [x * width for x in range(n)]
        self.field = (1 << width) - 1
        self.all_fields = (1 << (n * width)) - 1
        self.guards = sum(1 << (sh + width - 1) for sh in self.shifts)
        self.clear = [self.all_fields ^ (self.field << sh) for sh in self.shifts]
        """Per process: a mask that keeps every field but that process's."""
        self.base = sum((-1 - lo) << sh for sh in self.shifts)
        """-1 in every entry: nothing known."""

    def pack(self, vec: Vector) -> int:
        lo = self.lo
        return sum((c - lo) << sh for c, sh in zip(vec, self.shifts, strict=True))

    def unpack(self, packed: int) -> Vector:
        lo, field = self.lo, self.field
        return tuple(((packed >> sh) & field) + lo for sh in self.shifts)

    def entry(self, packed: int, x: int) -> int:
        return ((packed >> self.shifts[x]) & self.field) + self.lo

    def maximum(self, a: int, b: int) -> int:
        """Entry-wise maximum of two packed vectors."""
        g = ((a | self.guards) - b) & self.guards  # the guard bit stays where a >= b
        return b ^ ((a ^ b) & ((g << 1) - (g >> (self.width - 1))))


@dataclass(slots=True)
class Order:
    """Vector times of a run's receives, and queries on them."""

    process_keys: list[str]
    index: dict[str, int]
    rclocks: list[list[int]]
    """Per process: clocks of its receives that have a recorded send, increasing."""
    rpacked: list[list[int]]
    """Per process: the vector time at each of those receives, packed (``packing``)."""
    packing: Packing
    recv_from: list[list[list[int]]]
    """``recv_from[p][y]``: ids of the receives of ``p`` ordered after some send of another
    process ``y`` (through ``sources``, a hub or ``extra``), increasing."""
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
    edges: list[tuple[int, int]] = field(default_factory=list)
    """``Matching.edges``, from which ``sources`` is built when first asked for."""
    multi: dict[int, list[int]] = field(default_factory=dict)
    """Receive id → its certain sends, for receives with several."""
    chosen: dict[int, list[int]] = field(default_factory=dict)
    """Uncertain receive id → the candidate sends it was finally ordered after."""
    demoted: list[tuple[int, int]] = field(default_factory=list)
    """(send, receive) pairings of the matching that closed a cycle of certain edges:
    the receive would happen before its own send. Each was taken out and its receive
    ordered as an uncertain one instead (:func:`compute_order`)."""
    hub_demoted: list[tuple[int, int]] = field(default_factory=list)
    """(hub, receive): as ``demoted``, for a receive's membership of a hub."""
    _sources: dict[int, list[int]] | None = None

    @property
    def sources(self) -> dict[int, list[int]]:
        """Receive id → the send ids it was finally ordered after (certain + chosen
        candidates), in the order the matching's edges name the receives."""
        if self._sources is None:
            multi = self.multi
            sources: dict[int, list[int]] = {}
            for s, r in self.edges:
                if r not in sources:
                    sources[r] = list(multi[r]) if r in multi else [s]
            for r, chosen in self.chosen.items():
                sources.setdefault(r, []).extend(chosen)
            self._sources = sources
        return self._sources

    @property
    def base(self) -> Vector:
        return (-1,) * len(self.process_keys)

    @property
    def demoted_receives(self) -> set[int]:
        """Receives that lost a pairing because it closed a cycle."""
        return {r for _, r in self.demoted} | {r for _, r in self.hub_demoted}

    @property
    def rvecs(self) -> list[list[Vector]]:
        """Per process: the vector time at each receive of ``rclocks``, unpacked (slow)."""
        unpack = self.packing.unpack
        return [[unpack(v) for v in vs] for vs in self.rpacked]

    def vector_at(self, p: int, clock: int) -> Vector:
        """Vector time of process ``p`` at local ``clock``: -1 where nothing is known."""
        k = bisect_right(self.rclocks[p], clock) - 1
        vec = list(self.packing.unpack(self.rpacked[p][k])) if k >= 0 \
            else [-1] * len(self.process_keys)
        vec[p] = clock
        return tuple(vec)

    def earliest_after(self, p: int, x: int, clock: int) -> int | None:
        """Clock of the earliest receive in ``p`` that happens after clock ``clock`` of ``x``."""
        vecs = self.rpacked[p]
        sh, fm = self.packing.shifts[x], self.packing.field
        k = bisect_left(vecs, clock - self.packing.lo, key=lambda v: (v >> sh) & fm)
        return self.rclocks[p][k] if k < len(vecs) else None

    def earliest_after_any(self, p: int, clocks: Mapping[int, int]) -> int | None:
        """Clock of the earliest receive in ``p`` that happens after clock ``clocks[x]`` of
        some process ``x`` other than ``p``: the least :meth:`earliest_after` over them.

        One binary search: entries never decrease along ``p``, so "some entry has
        reached its clock" never turns false again, and all entries are compared at
        once (SWAR: the guard bit of a field survives ``(v | guards) - wanted``
        where that entry is at least the wanted one).
        """
        vecs = self.rpacked[p]
        if not vecs:
            return None
        pk = self.packing
        lo, top = pk.lo, pk.field >> 1  # the largest value a field holds
        wanted, fields = 0, 0
        for x, clock in clocks.items():
            if x == p:
                continue
            need = clock - lo
            if need > top:
                continue  # later than any clock of the run: never reached
            sh = pk.shifts[x]
            wanted |= max(need, 0) << sh
            fields |= 1 << (sh + pk.width - 1)
        if not fields:
            return None
        guards = pk.guards
        k = bisect_left(vecs, True, key=lambda v: (((v | guards) - wanted) & fields) != 0)
        return self.rclocks[p][k] if k < len(vecs) else None

    def known_at(self, q: int, clock_q: int, p: int) -> int:
        """The latest clock of ``p`` that happens before or is (q, clock_q); -1 if none."""
        if p == q:
            return clock_q
        k = bisect_right(self.rclocks[q], clock_q) - 1
        return self.packing.entry(self.rpacked[q][k], p) if k >= 0 else -1

    def happens_before(self, p: int, clock_p: int, q: int, clock_q: int) -> bool:
        """Whether (p, clock_p) happens before or is (q, clock_q)."""
        if p == q:
            return clock_p <= clock_q
        k = bisect_right(self.rclocks[q], clock_q) - 1
        known = self.packing.entry(self.rpacked[q][k], p) if k >= 0 else -1
        return known >= clock_p

    def lamport_at(self, p: int, clock: int, offsets: list[int]) -> int:
        """Lamport time of process ``p`` at ``clock`` (events between messages count 1 each)."""
        k = bisect_right(self.clocks[p], clock) - 1
        if k < 0:
            return clock
        return self.lamport[offsets[p] + k] + (clock - self.clocks[p][k])


def compute_order(m: Matching, *, strict: bool = False) -> Order:
    """Happens-before of a matching; never fails on a cycle unless ``strict``.

    First the certain edges and hubs alone are swept. A cycle among them (a
    receive paired with a send that the recorded order puts after it) is
    broken by demoting one of its pairings (:func:`_weakest`) to an uncertain
    receive (:func:`_demote`); ``strict`` raises
    :class:`OrderCycleError` instead, which tests use as an assertion. Then,
    if there are uncertain receives, the full sweep orders them.
    """
    certain = _sweep(replace(m, uncertain=[]), None, strict)
    if not m.uncertain and not certain.demoted and not certain.hub_demoted:
        return certain
    if certain.demoted or certain.hub_demoted:
        m = _demote(m, certain.demoted, certain.hub_demoted)
    order = _sweep(m, certain, strict)  # cycles left can only run through uncertain edges
    order.demoted[:0] = certain.demoted
    order.hub_demoted[:0] = certain.hub_demoted
    order.notes[:0] = _demotion_notes(m, order.demoted_receives)
    return order


DEMOTION_RANK = {"tcp": 1, "unix": 1, "ssl": 1, "pipe": 1, "proc": 4, "exit": 4}
"""Which pairing of a cycle to doubt first (lowest): byte offsets shift when a write
goes unseen; a spawn token or a pid is hard to get wrong. Message kinds rank 2,
collectives (hubs) 3."""


def _weakest(m: Matching, cycle: list[tuple[int, int, bool]],
             is_edge: Callable[[int, int], bool]) -> tuple[int, int]:
    """The (receive, send) step of a cycle of certain pairings to demote.

    One pairing per cycle, so that every other recorded order is kept (more
    order only ever widens impact). First choice: a receive paired with a later
    send of its own process (its own clock says the pairing is wrong; the
    wakeup byte of a signal handler on asyncio's self-pipe does this); then by
    :data:`DEMOTION_RANK`; then the first in the cycle.
    """
    events, proc_of = m.events, m.proc_of

    def rank(step: tuple[int, tuple[int, int, bool]]) -> tuple[int, int]:
        k, (r, s, _) = step
        if proc_of[r] == proc_of[s]:
            return (0, k)
        if not is_edge(r, s):
            return (3, k)
        return (DEMOTION_RANK.get(events[r].kind, 2), k)

    _, (r, s, _) = min(enumerate(cycle), key=rank)
    return r, s


def _demote(m: Matching, demoted: list[tuple[int, int]],
            hub_demoted: list[tuple[int, int]]) -> Matching:
    """``m`` with the demoted pairings taken out and their receives made uncertain.

    The candidates of a receive demoted from a point-to-point pairing are the
    sender's sends on the same channel up to the paired one: if the offsets or
    indexes were shifted by writes distea could not see, its true sender is
    one of those, or unseen. Of a hub (collective), all the hub's sends. The
    sweep then orders the receive after the latest candidate of each chain that
    is not causally after it (safe), as for every uncertain receive.
    """
    events, proc_of = m.events, m.proc_of
    chains: dict[int, list[tuple[int, ...]]] = {}
    hub_loss: dict[int, set[int]] = {}
    for h, r in hub_demoted:
        hub_loss.setdefault(h, set()).add(r)
        by_proc: dict[int, list[int]] = {}
        for x in m.hubs[h][0]:
            by_proc.setdefault(proc_of[x], []).append(x)
        chains.setdefault(r, []).extend(tuple(sorted(c)) for c in by_proc.values())
    gone = set(demoted)
    senders = {proc_of[s] for s, _ in gone}
    on_channel: dict[tuple[int, str, str], list[int]] = {}  # sends per process and channel
    for p in senders:
        for i in m.events_of(p):
            ev = events[i]
            if ev.direction == "send":
                on_channel.setdefault((p, ev.kind, ev.channel), []).append(i)
    for s, r in dict.fromkeys(demoted):  # in order, once each
        ev = events[s]
        sends = on_channel[(proc_of[s], ev.kind, ev.channel)]
        chains.setdefault(r, []).append(tuple(sends[:bisect_right(sends, s)]))
    hubs = [(sends, tuple(x for x in recvs if x not in hub_loss.get(h, ())))
            for h, (sends, recvs) in enumerate(m.hubs)]
    return replace(m, edges=[e for e in m.edges if e not in gone], hubs=hubs,
                   uncertain=m.uncertain + [(r, tuple(c)) for r, c in chains.items()])


def _demotion_notes(m: Matching, demoted: set[int]) -> list[str]:
    """One problem line per channel whose pairings were demoted."""
    per_channel: dict[tuple[str, str], int] = {}
    for r in sorted(demoted):
        ev = m.events[r]
        per_channel[(ev.kind, ev.channel)] = per_channel.get((ev.kind, ev.channel), 0) + 1
    return [f"{kind} channel {channel!r}: {count} receive(s) were paired with a send that "
            "the recorded order puts after them (a write distea could not see, or a damaged "
            "log); each is ordered after every earlier send on the channel instead (safe, "
            "less precise)"
            for (kind, channel), count in sorted(per_channel.items())]


def _sweep(m: Matching, certain: Order | None, strict: bool) -> Order:
    """Sweep all events once. ``certain``: the order of the certain edges alone, where
    ``m`` has uncertain receives. A cycle among certain edges raises
    :class:`OrderCycleError` if ``strict``, else its weakest pairing is dropped and
    listed in ``Order.demoted``."""
    n = len(m.process_keys)
    events = m.events
    proc_of = m.proc_of
    n_events = len(events)
    clk = [ev.clock for ev in events]
    pk = Packing(n, min(-1, min(clk, default=-1)), max(clk, default=0))
    lo, shifts, clear, guards, w1 = pk.lo, pk.shifts, pk.clear, pk.guards, pk.width - 1

    # per event: 0 send, 1 receive with exactly one certain send (``src1``), 2 other
    # receive with sends (several, hub, uncertain), 3 receive with no recorded send
    code = bytearray([3 if ev.direction == "recv" else 0 for ev in events])
    src1 = [-1] * n_events
    multi: dict[int, list[int]] = {}  # receive id -> its certain sends, when several
    for s, r in m.edges:
        first = src1[r]
        if first < 0:
            src1[r] = s
            code[r] = 1
        elif r in multi:
            multi[r].append(s)
        else:
            multi[r] = [first, s]
            code[r] = 2
    hub_of: dict[int, int] = {}
    for h, (_, recvs) in enumerate(m.hubs):
        for r in recvs:
            hub_of[r] = h
            code[r] = 2
    # receive id -> list of [chain, index of the candidate in use]
    soft: dict[int, list[list]] = {}
    for r, chains in m.uncertain:
        soft.setdefault(r, []).extend([chain, len(chain) - 1] for chain in chains)
        code[r] = 2
    for r in multi:
        src1[r] = -1

    def certain_sends(r: int) -> list[int]:
        if r in multi:
            return multi[r]
        return [src1[r]] if src1[r] >= 0 else []

    # Start each candidate chain at its latest send that is not causally after the
    # receive through certain edges alone (binary search: along a chain, "after the
    # receive" never turns false again). Only cycles among uncertain edges are left
    # for the sweep to break, one step at a time.
    stepped_back = 0  # chains whose latest send(s) are causally after the receive
    if soft:
        assert certain is not None, "uncertain receives are ordered after the certain edges"
        for r, entries in soft.items():
            pr, cr = proc_of[r], clk[r]
            for entry in entries:
                chain = entry[0]
                lo_, hi_ = 0, len(chain)
                while lo_ < hi_:
                    mid = (lo_ + hi_) // 2
                    s = chain[mid]
                    if certain.happens_before(pr, cr, proc_of[s], clk[s]):
                        hi_ = mid
                    else:
                        lo_ = mid + 1
                entry[1] = lo_ - 1
                if lo_ < len(chain):
                    stepped_back += 1

    know = [pk.base] * n  # packed vector of each process at its latest receive
    # what a send carries: the sender's vector with its own entry set to the send
    snap: list[int] = [0] * n_events
    # clock of the receive that last set each process's vector (its own entry there)
    know_t = [-1] * n
    lamport = [0] * n_events
    done = bytearray(n_events)
    last_l = [0] * n  # Lamport and clock of each process's last processed event
    last_c = [0] * n
    pos = list(m.offsets[:n])
    ends = m.offsets[1:]
    rclocks: list[list[int]] = [[] for _ in range(n)]
    rpacked: list[list[int]] = [[] for _ in range(n)]
    recv_from: list[list[list[int]]] = [[[] for _ in range(n)] for _ in range(n)]
    hub_vec: dict[int, tuple[int, int]] = {}
    waiting: dict[int, list[int]] = {}
    ready = deque(range(n))
    queued = [True] * n
    dropped: list[tuple[int, int]] = []
    demoted: list[tuple[int, int]] = []
    hub_demoted: list[tuple[int, int]] = []
    notes: list[str] = []

    def blocker(r: int) -> tuple[int, bool] | None:
        """First unprocessed send that receive ``r`` waits for, and whether it is uncertain."""
        s = src1[r]
        if s >= 0:
            if not done[s]:
                return s, False
        else:
            for s in multi.get(r, ()):
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
            rvs = rpacked[p]
            kt = know_t[p]
            shp = shifts[p]
            clr = clear[p]
            frm = recv_from[p]
            while i < end:
                c = clk[i]
                kind = code[i]
                if kind == 0:  # send: remember what p knows, its own entry set to c
                    snap[i] = kp + ((c - kt) << shp)  # c >= kt: events are in clock order
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
                    b = snap[s]  # entry-wise maximum (Packing.maximum), then own entry c
                    g = ((kp | guards) - b) & guards
                    kp = ((b ^ ((kp ^ b) & ((g << 1) - (g >> w1)))) & clr) | ((c - lo) << shp)
                    kt = c
                    rcl.append(c)
                    rvs.append(kp)
                    q = proc_of[s]
                    if q != p:
                        frm[q].append(i)
                    lp += c - cp
                    if lamport[s] >= lp:
                        lp = lamport[s] + 1
                elif kind == 2:
                    blocked = blocker(i)
                    if blocked is not None:
                        waiting.setdefault(blocked[0], []).append(p)
                        break
                    vec = kp
                    lmax = lp + (c - cp)
                    used = list(certain_sends(i))
                    for entry in soft.get(i, ()):
                        if entry[1] >= 0:
                            used.append(entry[0][entry[1]])
                    senders = {proc_of[s] for s in used}
                    for s in used:
                        vec = pk.maximum(vec, snap[s])
                        if lamport[s] + 1 > lmax:
                            lmax = lamport[s] + 1
                    hub = hub_of.get(i)
                    if hub is not None:
                        hv = hub_vec.get(hub)
                        if hv is None:
                            hv = hub_vec[hub] = _hub_vector(m, hub, snap, lamport, pk)
                        vec = pk.maximum(vec, hv[0])
                        if hv[1] + 1 > lmax:
                            lmax = hv[1] + 1
                        senders.update(proc_of[s] for s in m.hubs[hub][0])
                    senders.discard(p)
                    for q in sorted(senders):
                        frm[q].append(i)
                    kp = (vec & clr) | ((c - lo) << shp)
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
            if strict:
                raise OrderCycleError(_describe_cycle(m, cycle),
                                      [events[r] for r, _, _ in cycle])
            # Not yet swept, the receive can still lose this pairing: nothing has
            # used its vector time. It is ordered as an uncertain receive later.
            r, s = _weakest(m, cycle, lambda r, s: src1[r] == s or s in multi.get(r, ()))
            if src1[r] == s or s in multi.get(r, ()):
                if src1[r] == s:
                    src1[r] = -1
                else:
                    multi[r].remove(s)
                    if not multi[r]:
                        del multi[r]
                demoted.append((s, r))
            else:
                hub_demoted.append((hub_of.pop(r), r))
            code[r] = 2 if r in multi or r in hub_of or r in soft else 1 if src1[r] >= 0 else 3
        else:
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

    chosen = {r: [e[0][e[1]] for e in entries if e[1] >= 0] for r, entries in soft.items()}
    extra: list[tuple[int, int]] = []
    if dropped:
        # Which dropped candidates are causally after their receive through certain
        # edges alone? Those could never be the sender; the others stay possible.
        assert certain is not None
        for r, s in dropped:
            pr, ps = proc_of[r], proc_of[s]
            if not certain.happens_before(pr, clk[r], ps, clk[s]):
                extra.append((s, r))
        widened: set[tuple[int, int]] = set()  # reachability follows extra edges too
        for s, r in extra:
            pr, ps = proc_of[r], proc_of[s]
            if ps != pr:
                recv_from[pr][ps].append(r)
                widened.add((pr, ps))
        for pr, ps in widened:
            recv_from[pr][ps] = sorted(set(recv_from[pr][ps]))
        stepped_back += len(dropped) - len(extra)
        if extra:
            notes.append(f"{len(extra)} uncertain candidate sends could not be placed in one "
                         "consistent order with the others; impact still follows them")
    offsets = m.offsets
    clocks = [clk[offsets[p]:offsets[p + 1]] for p in range(n)]
    return Order(
        process_keys=m.process_keys,
        index={k: i for i, k in enumerate(m.process_keys)},
        rclocks=rclocks,
        rpacked=rpacked,
        packing=pk,
        recv_from=recv_from,
        hub_of=hub_of,
        lamport=lamport,
        clocks=clocks,
        dropped_candidates=stepped_back + len(extra),
        extra=extra,
        notes=notes,
        edges=[e for e in m.edges if e not in set(demoted)] if demoted else m.edges,
        multi=multi,
        chosen=chosen,
        demoted=demoted,
        hub_demoted=hub_demoted,
    )


def _hub_vector(
    m: Matching, h: int, snap: list[int], lamport: list[int], pk: Packing
) -> tuple[int, int]:
    vec = pk.base
    lmax = 0
    for s in m.hubs[h][0]:
        vec = pk.maximum(vec, snap[s])
        lmax = max(lmax, lamport[s])
    return vec, lmax


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
