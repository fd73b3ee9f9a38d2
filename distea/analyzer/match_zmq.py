"""ZeroMQ fan-in and fan-out: per-socket FIFO, same-host time, and fingerprints.

One ZeroMQ channel name (``ENDPOINT connect>bind``) often carries several
sockets' messages: many REQ/DEALER/PUSH peers into one ROUTER or PULL
(fan-in), or one bound PUSH/DEALER's messages split among many connected
workers (fan-out). When payloads repeat (every worker's empty result, every
client's ``b"Hello"``), the fingerprint class rule is ambiguous for nearly
every receive. Three facts the tracer records narrow it
(:mod:`distea.tracer.channels.zmq`):

- **per-socket FIFO**: what one socket sends to one peer arrives in order;
  ``meta["sock"]`` tells a process's sockets of one name apart, and
  ``meta["multi"]`` marks a socket with several endpoints (its messages may
  leave by an endpoint the name does not show: such channels are left to the
  safe rule);
- **same-host time**: ``meta["t"]``, ``CLOCK_MONOTONIC`` read before a send
  hands its message over and after a receive got it. On one host a receive
  cannot have got a message whose send began later: ``send.t <= recv.t``;
- **fingerprints**: a receive reads a message of its own look.

Each is a necessary condition, so the set of sends a receive could have read
under all of them still holds its real send; a receive with one such send is
certain, and one with several is uncertain with exactly those candidates
(the happens-before sweep orders it after the latest of each sender's
candidates that is not causally after it: safe).

**Fan-in** (several sending sockets, one receiving socket; no socket with
several endpoints, no PUB fan-out): each sender's messages on the channel
all go to the one receiver, and arrive in order; so the receives are an
interleaving of the senders' streams, of which each has read a prefix. A
ROUTER also records the routing id of each message's peer; an id libzmq
made up names one connection, so all receives that carry it come from one
socket. The interleavings that agree with fingerprints, time and routing ids
are enumerated as a set
of states (how far each stream has been read), merged where equal, at most
:data:`MAX_STATES` at a time; a receive is certain when every surviving
interleaving gives it the same send.

**Fan-out** (one sending socket, several receiving sockets): each receiver
reads an increasing subsequence of the sender's stream. A receive's possible
sends are those of its look, not sent after it, between its earliest and its
latest embedding in that stream; sends that another receive read for certain
are taken out, until nothing changes. Several candidates remain where
payloads repeat within a burst; when every event of the sender between the
first and the last candidate is a send (its clock advanced by one at each:
no method started and nothing was received in between), every answer distea
gives (impact, dependencies, the order of every other event) is the same
whichever candidate it was, so the receive is paired with the last of them
and counted as matched. Only the send an explanation names may be a
neighbour of the real one.

Anything else (many to many, a model that no interleaving satisfies, too many
states) returns None, and the caller's safe rule applies.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from distea.model import MessageEvent, ProcessInfo

if TYPE_CHECKING:
    from distea.analyzer.matching import Matching

MAX_STATES = 256
"""Fan-in interleavings followed at once; more means: too ambiguous to be worth it."""
MAX_KEPT = 1 << 20
"""Fan-in states kept over all receives (for the way back): a bound on memory."""
MAX_LISTED = 64
"""Fan-out: a receive with more candidates than this names its sender's whole
stream as its chain (one shared tuple, as the fingerprint rule does), not a list
of its own: a long burst of look-alikes must not cost memory squared."""
MAX_ROUNDS = 8
"""Fan-out: rounds of taking out what other receives read for certain."""

Stream = tuple[int, int]  # (process index, socket number)


@dataclass(slots=True)
class ZmqPairs:
    """What :func:`pair_zmq` found for one channel."""

    edges: list[tuple[int, int]] = field(default_factory=list)
    uncertain: list[tuple[int, tuple[tuple[int, ...], ...]]] = field(default_factory=list)
    unmatched_sends: int = 0
    maybe_read: set[int] = field(default_factory=set)
    """Sends some receive may have read besides those named by ``edges`` and
    ``uncertain`` (fan-out windows paired with their last send)."""


def pair_zmq(m: Matching, sends: list[int], recvs: list[int],
             processes: Mapping[str, ProcessInfo] | None) -> ZmqPairs | None:
    """Pair one ZeroMQ channel's fan-in or fan-out; None to leave it to the safe rule."""
    events = m.events
    if not sends or not recvs:
        return None
    for i in sends:
        meta = events[i].meta
        if not meta or "t" not in meta or meta.get("multi") or meta.get("fanout"):
            return None
    for i in recvs:
        meta = events[i].meta
        if not meta or "t" not in meta or meta.get("multi"):
            return None
    senders = _streams(m, sends)
    receivers = _streams(m, recvs)
    if len(senders) == 1 and len(receivers) == 1:
        return None  # one to one: FIFO per fingerprint class already pairs it
    hosts = [processes[k].host if processes and k in processes else None
             for k in m.process_keys]
    feasible = _Feasible(m, hosts)
    if len(receivers) == 1:
        found = _fan_in(m, list(senders.values()), next(iter(receivers.values())), feasible)
    elif len(senders) == 1:
        found = _fan_out(m, next(iter(senders.values())), list(receivers.values()), feasible)
    else:
        return None
    if found is None:
        return None
    read = {s for s, _ in found.edges} | found.maybe_read
    for _, chains in found.uncertain:
        for chain in chains:
            read.update(chain)
    found.unmatched_sends = len(sends) - len(read)
    return found


def _streams(m: Matching, ids: list[int]) -> dict[Stream, list[int]]:
    """(process, socket) → its ids, in clock order (ids increase with the clock)."""
    streams: dict[Stream, list[int]] = defaultdict(list)
    for i in ids:
        meta = m.events[i].meta
        sock = meta.get("sock", 0) if meta else 0
        streams[(m.proc_of[i], sock if isinstance(sock, int) else 0)].append(i)
    return streams


class _Feasible:
    """Could receive ``r`` have read send ``s``: same look, not sent after it (one host)."""

    __slots__ = ("events", "hosts", "proc_of")

    def __init__(self, m: Matching, hosts: list[str | None]) -> None:
        self.events = m.events
        self.proc_of = m.proc_of
        self.hosts = hosts

    def __call__(self, s: int, r: int) -> bool:
        send, recv = self.events[s], self.events[r]
        if _fp(send) != _fp(recv):
            return False
        host = self.hosts[self.proc_of[s]]
        if host is None or host != self.hosts[self.proc_of[r]]:
            return True  # clocks of two hosts say nothing about each other
        return send.meta["t"] <= recv.meta["t"]  # type: ignore[index,operator]


def _fp(ev: MessageEvent) -> object:
    fp = ev.meta.get("fp") if ev.meta else None
    return tuple(fp) if isinstance(fp, list) else fp


def _auto_peer(ev: MessageEvent) -> str | None:
    """The routing id a ROUTER gave this receive's peer, if libzmq made it up.

    libzmq's own ids start with a zero byte, which ids set by programs may not:
    such an id names one connection, so every receive that carries it came from
    one socket. An id a program chose may be taken again by a restarted peer:
    not used."""
    peer = ev.meta.get("peer") if ev.meta else None
    return peer if isinstance(peer, str) and peer.startswith("00") else None


def _fan_in(m: Matching, streams: list[list[int]], recvs: list[int],
            ok: _Feasible) -> ZmqPairs | None:
    """The receives as an interleaving of the streams' prefixes (module docstring).

    A state is (how far each stream was read, the stream behind each routing id
    met so far, -1 while unknown)."""
    peer_slot: dict[str, int] = {}
    slots: list[int | None] = []
    for r in recvs:
        peer = _auto_peer(m.events[r])
        slots.append(None if peer is None else peer_slot.setdefault(peer, len(peer_slot)))
    State = tuple[tuple[int, ...], tuple[int, ...]]
    start: State = ((0,) * len(streams), (-1,) * len(peer_slot))
    layers: list[dict[State, list[tuple[State, int]]]] = []
    states: list[State] = [start]
    kept = 0
    for r, slot in zip(recvs, slots, strict=True):
        nxt: dict[State, list[tuple[State, int]]] = {}
        for state in states:
            ptrs, peers = state
            for j, stream in enumerate(streams):
                p = ptrs[j]
                if p >= len(stream) or not ok(stream[p], r):
                    continue
                after_peers = peers
                if slot is not None:
                    if peers[slot] not in (-1, j):
                        continue  # this id came from another socket before
                    after_peers = (*peers[:slot], j, *peers[slot + 1:])
                after = ((*ptrs[:j], p + 1, *ptrs[j + 1:]), after_peers)
                nxt.setdefault(after, []).append((state, j))
        kept += len(nxt)
        if not nxt or len(nxt) > MAX_STATES or kept > MAX_KEPT:
            return None
        layers.append(nxt)
        states = list(nxt)
    # back from every surviving end state: which send each receive read on some path
    found = ZmqPairs()
    alive = set(states)
    candidates: list[set[int]] = [set() for _ in recvs]
    for k in range(len(recvs) - 1, -1, -1):
        before: set[State] = set()
        for state in alive:
            for prev, j in layers[k][state]:
                candidates[k].add(streams[j][prev[0][j]])
                before.add(prev)
        alive = before
    for r, sends in zip(recvs, candidates, strict=True):
        _record(found, ok, r, sends)
    return found


def _record(found: ZmqPairs, ok: _Feasible, r: int, sends: set[int]) -> None:
    if len(sends) == 1:
        found.edges.append((next(iter(sends)), r))
        return
    chains: dict[int, list[int]] = defaultdict(list)
    for s in sorted(sends):
        chains[ok.proc_of[s]].append(s)
    found.uncertain.append((r, tuple(tuple(c) for c in chains.values())))


def _fan_out(m: Matching, stream: list[int], receivers: list[list[int]],
             ok: _Feasible) -> ZmqPairs | None:
    """Each receiver reads an increasing subsequence of ``stream`` (module docstring)."""
    owner: dict[int, int] = {}  # position in ``stream`` -> the receive that read it for certain
    for _ in range(MAX_ROUNDS):
        windows: list[list[tuple[int, int]]] = []
        for recvs in receivers:
            window = _windows(stream, recvs, ok, owner)
            if window is None:
                return None
            windows.append(window)
        certain = {lo: r for recvs, window in zip(receivers, windows, strict=True)
                   for r, (lo, hi) in zip(recvs, window, strict=True) if lo == hi}
        if certain.items() <= owner.items():
            break
        owner.update(certain)
    found = ZmqPairs()
    sender = m.proc_of[stream[0]]
    base = m.offsets[sender]
    clocks = [ev.clock for ev in m.events[base:m.offsets[sender + 1]]]
    sends_before = [0]  # sends among the sender's first k events
    for ev in m.events[base:m.offsets[sender + 1]]:
        sends_before.append(sends_before[-1] + (ev.direction == "send"))
    whole = tuple(stream)
    for recvs, window in zip(receivers, windows, strict=True):
        for r, (lo, hi) in zip(recvs, window, strict=True):
            first, last = stream[lo], stream[hi]
            if lo == hi or _only_sends_between(m, clocks, sends_before, first, last):
                found.edges.append((last, r))  # every candidate gives the same answers
                found.maybe_read.update(stream[lo:hi])
            elif hi - lo < MAX_LISTED:
                _record(found, ok, r, {stream[q] for q in range(lo, hi + 1)
                                       if owner.get(q, r) == r and ok(stream[q], r)})
            else:
                found.uncertain.append((r, (whole,)))
    return found


def _windows(stream: list[int], recvs: list[int], ok: _Feasible,
             owner: Mapping[int, int]) -> list[tuple[int, int]] | None:
    """Per receive, the first and last position of ``stream`` it could have read
    (its earliest and latest embedding; the positions between that it could have
    read are its candidates); None if the receives cannot be a subsequence of it.
    A position another receive read for certain (``owner``) is no candidate."""
    n = len(stream)

    def possible(p: int, r: int) -> bool:
        return owner.get(p, r) == r and ok(stream[p], r)

    lo: list[int] = []
    p = 0
    for r in recvs:
        while p < n and not possible(p, r):
            p += 1
        if p == n:
            return None
        lo.append(p)
        p += 1
    window: list[tuple[int, int]] = [(0, 0)] * len(recvs)
    p = n - 1
    for k in range(len(recvs) - 1, -1, -1):
        while p >= 0 and not possible(p, recvs[k]):
            p -= 1
        if p < lo[k]:
            return None
        window[k] = (lo[k], p)
        p -= 1
    return window


def _only_sends_between(m: Matching, clocks: list[int], sends_before: list[int],
                         first: int, last: int) -> bool:
    """Whether every event of the sender from ``first`` to ``last`` is a send, at
    consecutive clocks: nothing else was recorded (no method started, nothing
    received) in between. ``clocks``: the sender's event clocks, in order;
    ``sends_before[k]``: how many of its first k events are sends."""
    a, b = m.events[first].clock, m.events[last].clock
    i, j = bisect_left(clocks, a), bisect_right(clocks, b)
    return j - i == b - a + 1 and sends_before[j] - sends_before[i] == j - i
