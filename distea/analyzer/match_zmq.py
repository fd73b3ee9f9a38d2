"""ZeroMQ fan-in, fan-out and broadcast: FIFO, time, fingerprints and envelopes.

One ZeroMQ channel name (``ENDPOINT connect>bind``) often carries several
sockets' messages: many REQ/DEALER/PUSH peers into one ROUTER or PULL
(fan-in), or one bound PUSH/DEALER's messages split among many connected
workers (fan-out). When payloads repeat (every worker's empty result, every
client's ``b"Hello"``), the fingerprint class rule is ambiguous for nearly
every receive. What the tracer records narrows it
(:mod:`distea.tracer.channels.zmq`):

- **per-socket FIFO**: what one socket sends to one peer arrives in order;
  ``meta["sock"]`` tells a process's sockets of one name apart, and
  ``meta["multi"]`` marks a socket with several endpoints (its messages may
  leave by an endpoint the name does not show: such channels are left to the
  safe rule);
- **same-host time**: ``meta["t"]``, ``CLOCK_MONOTONIC`` read before a send
  hands its message over and after a receive got it. On one host a receive
  cannot have got a message whose send began later: ``send.t <= recv.t``;
  a SUB's receives also carry ``meta["since"]``, read before its first
  bind or connect, and a PUB's sends ``meta["t_end"]``, read after the send
  returned: a publisher sends only to subscriptions it knows, which come
  after the subscriber's connect, so ``since <= send.t_end``;
- **fingerprints**: a receive reads a message of its own look;
- **envelopes**: a DEALER records the routing frames of each message up to
  the empty delimiter (``meta["env"]``); two DEALERs see the same ones.

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
are taken out, and so are sends a receive cannot have read because then the
receives could not each have read a send of their own (no assignment of one
send to every receive, none twice, has that pair), until nothing changes.
Several candidates remain where payloads repeat within a burst; when every
event of the sender between the first and the last candidate is a send (its
clock advanced by one at each: no method started and nothing was received in
between), every answer distea gives (impact, dependencies, the order of
every other event) is the same whichever candidate it was, so the receive is
paired with the last of them and counted as matched. Only the send an explanation names may be a
neighbour of the real one.

**Broadcast** (a PUB's sends, ``meta["fanout"]``): each subscriber reads an
increasing subsequence of the one publisher's stream (it joined late, its
filters and full queues drop the rest), independently of the others: the
fan-out windows without taking out what others read. The burst rule applies.

**REP workers behind a DEALER** (a request-reply broker's backend): a REP
answers strictly in turn (``meta["rep"]``), and its k-th reply goes back with
the envelope of its k-th request. So the reader of the k-th reply has the
envelope of one of the k-th request's candidate sends, and when the k-th
reply was read for certain, the k-th request's send has the envelope of one
of its possible readers: both directions of the endpoint are solved again
under these limits until nothing changes (:func:`_through_rep`). Requests
of one client whose replies both waited stay uncertain: either worker may
have had either.

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
MAX_MATCHED = 512
"""Fan-out: candidate pairs at most in a group of receives that share candidates
for which :func:`_exclusive` tries assignments (each try walks the group)."""

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


@dataclass(slots=True)
class _Solved:
    """One channel's receives and the sends each may have read, before reporting."""

    recvs: list[int]
    candidates: list[tuple[int, ...] | None]
    """Per receive, its candidate sends in order; None: more than :data:`MAX_LISTED`
    (a fan-out window, given by ``windows``)."""
    read: set[int]
    """Sends some receive read for certain (the real ones, not a burst's last)."""
    stream: list[int] | None = None
    """Fan-out and broadcast: the one sending socket's sends, which ``windows`` index."""
    windows: list[tuple[int, int]] | None = None


def pair_zmq(m: Matching, sends: list[int], recvs: list[int],
             processes: Mapping[str, ProcessInfo] | None) -> ZmqPairs | None:
    """Pair one ZeroMQ channel's fan-in, fan-out or broadcast; None to leave it to
    the safe rule."""
    if not sends or not recvs:
        return None
    hosts = [processes[k].host if processes and k in processes else None
             for k in m.process_keys]
    feasible = _Feasible(m, hosts)
    solved = _solve(m, sends, recvs, feasible)
    if solved is None:
        return None
    links = _rep_links(m, sends, recvs)
    if links:
        solved = _through_rep(m, sends, recvs, solved, links, feasible)
        if solved is None:
            return None
    found = _report(m, solved)
    read = {s for s, _ in found.edges} | found.maybe_read
    for _, chains in found.uncertain:
        for chain in chains:
            read.update(chain)
    found.unmatched_sends = len(sends) - len(read)
    return found


def _solve(m: Matching, sends: list[int], recvs: list[int], ok: _Feasible) -> _Solved | None:
    """The candidates of each receive of one channel, by its shape; None if it has
    none of the shapes handled here."""
    events = m.events
    fanout = False
    for i in sends:
        meta = events[i].meta
        if not meta or "t" not in meta or meta.get("multi"):
            return None
        fanout = fanout or bool(meta.get("fanout"))
    for i in recvs:
        meta = events[i].meta
        if not meta or "t" not in meta or meta.get("multi"):
            return None
    senders = _streams(m, sends)
    receivers = _streams(m, recvs)
    if fanout:  # PUB: each subscriber reads a subsequence of what it published
        if len(senders) != 1:
            return None
        return _broadcast(next(iter(senders.values())), list(receivers.values()), ok)
    if len(senders) == 1 and len(receivers) == 1:
        return None  # one to one: FIFO per fingerprint class already pairs it
    if len(receivers) == 1:
        return _fan_in(m, list(senders.values()), next(iter(receivers.values())), ok)
    if len(senders) == 1:
        return _fan_out(next(iter(senders.values())), list(receivers.values()), ok)
    return None


def _streams(m: Matching, ids: list[int]) -> dict[Stream, list[int]]:
    """(process, socket) → its ids, in clock order (ids increase with the clock)."""
    streams: dict[Stream, list[int]] = defaultdict(list)
    for i in ids:
        streams[_socket(m, i)].append(i)
    return streams


def _socket(m: Matching, i: int) -> Stream:
    meta = m.events[i].meta
    sock = meta.get("sock", 0) if meta else 0
    return (m.proc_of[i], sock if isinstance(sock, int) else 0)


class _Feasible:
    """Could receive ``r`` have read send ``s``: same look, same envelope where both
    ends saw it, not sent after it (one host), and inside ``limits``."""

    __slots__ = ("events", "hosts", "limits", "proc_of")

    def __init__(self, m: Matching, hosts: list[str | None]) -> None:
        self.events = m.events
        self.proc_of = m.proc_of
        self.hosts = hosts
        self.limits: dict[int, frozenset[object]] = {}
        """Event id → the envelopes its other end may have (:func:`_through_rep`)."""

    def __call__(self, s: int, r: int) -> bool:
        send, recv = self.events[s], self.events[r]
        if _fp(send) != _fp(recv):
            return False
        send_env, recv_env = _env(send), _env(recv)
        if send_env is not None and recv_env is not None and send_env != recv_env:
            return False  # two DEALERs: both saw the whole envelope
        if self.limits:
            allowed = self.limits.get(r)
            if allowed is not None and send_env not in allowed:
                return False
            allowed = self.limits.get(s)
            if allowed is not None and recv_env not in allowed:
                return False
        host = self.hosts[self.proc_of[s]]
        if host is None or host != self.hosts[self.proc_of[r]]:
            return True  # clocks of two hosts say nothing about each other
        if send.meta["t"] > recv.meta["t"]:  # type: ignore[index,operator]
            return False
        # a SUB gets nothing whose publishing ended before it bound or connected
        since, ended = recv.meta.get("since"), send.meta.get("t_end")  # type: ignore[union-attr]
        return since is None or ended is None or since <= ended  # type: ignore[operator]


def _fp(ev: MessageEvent) -> object:
    fp = ev.meta.get("fp") if ev.meta else None
    return tuple(fp) if isinstance(fp, list) else fp


def _env(ev: MessageEvent) -> object:
    """The envelope a DEALER saw (routing frames up to the empty delimiter), if any."""
    return ev.meta.get("env") if ev.meta else None


def _auto_peer(ev: MessageEvent) -> str | None:
    """The routing id a ROUTER gave this receive's peer, if libzmq made it up.

    libzmq's own ids start with a zero byte, which ids set by programs may not:
    such an id names one connection, so every receive that carries it came from
    one socket. An id a program chose may be taken again by a restarted peer:
    not used."""
    peer = ev.meta.get("peer") if ev.meta else None
    return peer if isinstance(peer, str) and peer.startswith("00") else None


def _fan_in(m: Matching, streams: list[list[int]], recvs: list[int],
            ok: _Feasible) -> _Solved | None:
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
    # every surviving interleaving read at least this much of each stream
    read = {s for j, stream in enumerate(streams)
            for s in stream[:min(state[0][j] for state in states)]}
    # back from every surviving end state: which send each receive read on some path
    alive = set(states)
    candidates: list[set[int]] = [set() for _ in recvs]
    for k in range(len(recvs) - 1, -1, -1):
        before: set[State] = set()
        for state in alive:
            for prev, j in layers[k][state]:
                candidates[k].add(streams[j][prev[0][j]])
                before.add(prev)
        alive = before
    return _Solved(recvs, [tuple(sorted(c)) for c in candidates], read)


def _fan_out(stream: list[int], receivers: list[list[int]], ok: _Feasible) -> _Solved | None:
    """Each receiver reads an increasing subsequence of ``stream``, and no two read
    one message (module docstring)."""
    owner: dict[int, int] = {}  # position in ``stream`` -> the receive that read it for certain
    position = {s: p for p, s in enumerate(stream)}
    solved = _Solved([], [], set())
    for _ in range(MAX_ROUNDS):
        windows = []
        for recvs in receivers:
            window = _windows(stream, recvs, ok, owner)
            if window is None:
                return None
            windows.append(window)
        solved = _listed(stream, receivers, windows, ok, owner)
        solved.candidates = _exclusive(solved.candidates)
        certain = {position[sends[0]]: r
                   for r, sends in zip(solved.recvs, solved.candidates, strict=True)
                   if sends is not None and len(sends) == 1}
        if certain.items() <= owner.items():
            break
        owner.update(certain)
    solved.read = {stream[p] for p in owner}
    return solved


def _exclusive(candidates: list[tuple[int, ...] | None]) -> list[tuple[int, ...] | None]:
    """Fan-out candidates less the sends a receive cannot have read because then the
    other receives could not each have read a send of their own.

    Each receive read one send and no two read the same one; so a receive's
    candidate is kept only when some such assignment gives it to that receive
    (a matching of all receives, with that pair in it). Receives that share no
    candidate, even through others, are decided apart; a group with more than
    :data:`MAX_MATCHED` candidate pairs is left as it is, and so is everything
    when any receive's candidates are unlisted."""
    if any(c is None for c in candidates):
        return candidates
    lists: list[tuple[int, ...]] = [c for c in candidates if c is not None]
    root: dict[int, int] = {}

    def find(s: int) -> int:
        while root.get(s, s) != s:
            root[s] = root.get(root[s], root[s])
            s = root[s]
        return s

    for sends in lists:
        for s in sends[1:]:
            a, b = find(sends[0]), find(s)
            if a != b:
                root[a] = b
    groups: dict[int, list[int]] = defaultdict(list)
    for k, sends in enumerate(lists):
        groups[find(sends[0])].append(k)
    out: list[tuple[int, ...] | None] = list(lists)
    for ks in groups.values():
        group = [lists[k] for k in ks]
        if len(ks) > 1 and sum(len(c) for c in group) <= MAX_MATCHED:
            for k, kept in zip(ks, _assignable(group), strict=True):
                out[k] = kept
    return out


def _assignable(lists: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Per receive, the candidates some assignment of one send to every receive (none
    twice) gives it; all of them if there is no assignment at all."""
    owners = _Assignment(lists)
    for k in range(len(lists)):
        if not owners.place(k, -1):
            return lists  # not this model: left to the caller's other checks
    pruned: list[tuple[int, ...]] = []
    for k, sends in enumerate(lists):
        if len(sends) == 1:
            pruned.append(sends)
            continue
        kept = []
        for s in sends:
            if s == owners.holds[k]:
                kept.append(s)
                continue
            saved = dict(owners.match), dict(owners.holds)
            holder = owners.match.get(s)
            owners.give(k, s)
            if holder is None or owners.place(holder, s):
                kept.append(s)  # k may have read s: the others still have one each
            owners.match, owners.holds = saved
        pruned.append(tuple(kept))
    return pruned


class _Assignment:
    """Receives (by index) each given one of their candidate sends, no send twice."""

    __slots__ = ("holds", "lists", "match")

    def __init__(self, lists: list[tuple[int, ...]]) -> None:
        self.lists = lists
        self.match: dict[int, int] = {}
        """Send → the receive it is given to."""
        self.holds: dict[int, int] = {}
        """Receive → its send."""

    def give(self, k: int, s: int) -> None:
        """Receive ``k`` takes ``s`` from whoever had it (who then has none)."""
        old = self.holds.pop(k, None)
        if old is not None:
            del self.match[old]
        holder = self.match.get(s)
        if holder is not None:
            del self.holds[holder]
        self.match[s], self.holds[k] = k, s

    def place(self, k: int, banned: int) -> bool:
        """Give receive ``k`` (which has no send) one, moving others to other candidates
        along a shortest path; never ``banned``. False if there is no way."""
        parent: dict[int, int] = {}  # send -> the receive that reached it
        queue = [k]
        seen = {banned}
        for r in queue:
            for s in self.lists[r]:
                if s in seen:
                    continue
                seen.add(s)
                parent[s] = r
                if s in self.match:
                    queue.append(self.match[s])
                    continue
                while True:  # s is free: each receive on the path takes the send after it
                    r = parent[s]
                    old = self.holds.get(r)
                    self.match[s], self.holds[r] = r, s
                    if old is None:
                        return True
                    s = old
        return False


def _broadcast(stream: list[int], receivers: list[list[int]], ok: _Feasible) -> _Solved | None:
    """Each subscriber reads an increasing subsequence of what the publisher sent: the
    part published after it joined, less what its filters and full queues dropped."""
    windows = []
    for recvs in receivers:
        window = _windows(stream, recvs, ok, {})
        if window is None:
            return None
        windows.append(window)
    return _listed(stream, receivers, windows, ok, {})


def _listed(stream: list[int], receivers: list[list[int]],
            windows: list[list[tuple[int, int]]], ok: _Feasible,
            owner: Mapping[int, int]) -> _Solved:
    """A windowed answer: per receive, the sends of its window it could have read."""
    recvs: list[int] = []
    candidates: list[tuple[int, ...] | None] = []
    flat: list[tuple[int, int]] = []
    for rs, window in zip(receivers, windows, strict=True):
        for r, (lo, hi) in zip(rs, window, strict=True):
            recvs.append(r)
            flat.append((lo, hi))
            candidates.append(
                None if hi - lo >= MAX_LISTED else
                tuple(stream[q] for q in range(lo, hi + 1)
                      if owner.get(q, r) == r and ok(stream[q], r)))
    return _Solved(recvs, candidates, set(), stream, flat)


def _report(m: Matching, solved: _Solved) -> ZmqPairs:
    """Edges and uncertain receives; a fan-out window whose candidates differ by sends
    only is paired with its last send (module docstring)."""
    found = ZmqPairs()
    stream, windows = solved.stream, solved.windows
    burst: _Bursts | None = None
    if stream is not None:
        burst = _Bursts(m, m.proc_of[stream[0]])
    for k, r in enumerate(solved.recvs):
        sends = solved.candidates[k]
        if stream is not None and windows is not None and burst is not None:
            lo, hi = windows[k]
            if lo == hi or burst.only_sends_between(stream[lo], stream[hi]):
                found.edges.append((stream[hi], r))  # every candidate gives the same answers
                found.maybe_read.update(stream[lo:hi])
                continue
            if sends is None:
                found.uncertain.append((r, (tuple(stream),)))
                continue
        assert sends is not None
        if len(sends) == 1:
            found.edges.append((sends[0], r))
            continue
        chains: dict[int, list[int]] = defaultdict(list)
        for s in sends:
            chains[m.proc_of[s]].append(s)
        found.uncertain.append((r, tuple(tuple(c) for c in chains.values())))
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


class _Bursts:
    """Which stretches of one sender's events are sends only."""

    __slots__ = ("clocks", "events", "sends_before")

    def __init__(self, m: Matching, sender: int) -> None:
        mine = m.events[m.offsets[sender]:m.offsets[sender + 1]]
        self.events = m.events
        self.clocks = [ev.clock for ev in mine]
        """The sender's event clocks, in order."""
        self.sends_before = [0]
        """``sends_before[k]``: how many of its first k events are sends."""
        for ev in mine:
            self.sends_before.append(self.sends_before[-1] + (ev.direction == "send"))

    def only_sends_between(self, first: int, last: int) -> bool:
        """Whether every event of the sender from ``first`` to ``last`` is a send, at
        consecutive clocks: nothing else was recorded (no method started, nothing
        received) in between."""
        a, b = self.events[first].clock, self.events[last].clock
        i, j = bisect_left(self.clocks, a), bisect_right(self.clocks, b)
        return j - i == b - a + 1 and self.sends_before[j] - self.sends_before[i] == j - i


# -- a REP socket between: its k-th reply carries its k-th request's envelope -------


def _rep_links(m: Matching, sends: list[int], recvs: list[int]) -> list[tuple[int, int]]:
    """(k-th receive, k-th send) of each REP socket with events on this channel.

    A REP socket answers strictly in turn, each reply sent back with the
    envelope of the request it answers. Its requests arrive on one direction
    of its endpoint and its replies leave by the other, so both channels are
    gathered here."""
    reps = {_socket(m, i) for i in (*sends, *recvs)
            if (meta := m.events[i].meta) and meta.get("rep")}
    if not reps:
        return []
    channel = m.events[sends[0]].channel
    names = {channel, _reverse(channel)}
    got: dict[Stream, list[int]] = defaultdict(list)
    gave: dict[Stream, list[int]] = defaultdict(list)
    for p in {proc for proc, _ in reps}:
        for i in range(m.offsets[p], m.offsets[p + 1]):
            ev = m.events[i]
            if ev.kind == "zmq" and ev.channel in names and ev.meta and ev.meta.get("rep"):
                (gave if ev.direction == "send" else got)[_socket(m, i)].append(i)
    return [pair for sock in reps for pair in zip(got[sock], gave[sock], strict=False)]


def _through_rep(m: Matching, sends: list[int], recvs: list[int], solved: _Solved,
                 links: list[tuple[int, int]], ok: _Feasible) -> _Solved | None:
    """This channel solved together with the other direction of its endpoint.

    Behind a DEALER, REP workers' requests and replies are look-alikes that
    only their envelope (the client's routing id, which the DEALER records)
    tells apart: the REP's k-th reply reaches the DEALER with the envelope of
    the DEALER's send its k-th request read. So the k-th reply's reader has one
    of the envelopes of the k-th request's candidates; and when the k-th
    reply was read for certain, the k-th request's send has one of the
    envelopes of its possible readers. Each is a necessary condition on the
    real pairs; applied in turn until nothing changes."""
    other_name = _reverse(m.events[sends[0]].channel)
    other_sends: list[int] = []
    other_recvs: list[int] = []
    for i, ev in enumerate(m.events):
        if ev.kind == "zmq" and ev.channel == other_name:
            (other_sends if ev.direction == "send" else other_recvs).append(i)
    if not other_sends or not other_recvs:
        return solved
    for _ in range(MAX_ROUNDS):
        other = _solve(m, other_sends, other_recvs, ok)
        if other is None:
            return solved
        limits = _limits(m, links, (solved, other))
        if limits == ok.limits:
            return solved
        ok.limits = limits
        again = _solve(m, sends, recvs, ok)
        if again is None:
            return None  # the model has no answer: the safe rule
        solved = again
    return solved


def _reverse(channel: str) -> str:
    """``"E bind>connect"`` → ``"E connect>bind"``: the other direction of one endpoint."""
    endpoint, _, direction = channel.rpartition(" ")
    return f"{endpoint} {'>'.join(reversed(direction.split('>')))}"


def _limits(m: Matching, links: list[tuple[int, int]],
            solved: tuple[_Solved, ...]) -> dict[int, frozenset[object]]:
    """The envelope limits the candidates of both directions imply (see :func:`_through_rep`)."""
    candidates: dict[int, tuple[int, ...]] = {}
    readers: dict[int, list[int]] = defaultdict(list)
    read: set[int] = set()
    complete: set[int] = set()  # sends whose possible readers are all listed
    for one in solved:
        listed = all(c is not None for c in one.candidates)
        for r, sends in zip(one.recvs, one.candidates, strict=True):
            if sends is not None:
                candidates[r] = sends
                for s in sends:
                    readers[s].append(r)
        read |= one.read
        if listed:
            complete.update(s for sends in one.candidates if sends is not None for s in sends)
            complete |= one.read
    limits: dict[int, frozenset[object]] = {}
    for request, reply in links:
        sends = candidates.get(request)
        if sends:
            limits[reply] = frozenset(_env(m.events[s]) for s in sends)
        if reply in read and reply in complete:
            limits[request] = frozenset(_env(m.events[r]) for r in readers[reply])
    return limits
