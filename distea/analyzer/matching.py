"""Pair sends with receives, per channel kind (DESIGN.md §4).

Nothing travels on the wire with a message, so pairing is done offline from
what both ends could observe (the conventions are in
:mod:`distea.traceformat`'s docstring). The result, :class:`Matching`, holds
three kinds of edges:

- ``edges``: certain send → receive pairs;
- ``hubs``: groups where every send happens before every receive (torch
  collectives): stored once instead of as ``len(sends) * len(recvs)`` edges;
- ``uncertain``: receives whose sender cannot be told apart. Each carries its
  candidate sends, one chain per candidate sender in clock order; the
  happens-before sweep (:mod:`distea.analyzer.order`) orders the receive after
  the latest send of each chain that is not causally after the receive. That
  is safe: the receive comes after its real sender whichever it was.

Counting (every receive lands in exactly one bucket): ``matched`` (certain
edge or hub), ``ambiguous`` (uncertain), ``external`` (no send recorded: the
peer was not traced, or its records were lost). ``unmatched_sends`` counts
sends that no receive could have read (peer untraced, data never read).

Per kind:

- streams ``tcp``/``unix``/``ssl``: byte ranges per channel direction, split
  into generations where offsets restart; a receive of ``[a, b)`` pairs with
  the send carrying byte ``b - 1`` of the same generation;
- ``proc``: the spawn token; one send may start several children;
- ``exit``: ``HOST:PID``; sends and receives paired in order;
- ``sem``, ``signal``: by same-host time (:mod:`distea.analyzer.match_timed`);
  an ``exit`` that a killed process never recorded: its ``wait`` is ordered
  after the fatal signals sent to it (uncertain);
- ``shm``: attaches to a shared segment; nothing to pair (the sharers are
  ordered at query time, :mod:`distea.analyzer.shared`);
- ``torch`` with ``meta["role"]``: a collective ``GROUP:SEQ``, all sends →
  all receives (a hub); without a role it is point-to-point, as below;
- message kinds (``mp``, ``zmq``, ``udp``, ``unixgram``, ``pipe`` and any kind
  not named here): per channel — a send on a LINKed end is received on the
  other end, otherwise the channel strings are equal — then per fingerprint
  class (``meta["fp"]``, or "no fingerprint"), FIFO per sender. One
  candidate sender: FIFO alignment, certain (``meta["fanout"]`` sends are
  aligned with each receiver separately). Several candidate senders, or one
  non-fanout sender whose messages several receivers share: uncertain. A
  process's own sends are candidates only when no other process sends on the
  channel (its own clock already orders them before its receives); on ``mp``
  and ``pipe`` channels, where a process may read back its own message from
  a shared queue, a receiver that also sends in that class is uncertain. ``udp``
  classes where the counts differ (a datagram was lost) are uncertain too.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from distea.analyzer.match_timed import TIMED_KINDS, link_killed, match_timed
from distea.model import ChannelLink, MessageEvent, ProcessInfo

STREAM_KINDS = frozenset({"tcp", "unix", "ssl"})
LIFECYCLE_KINDS = frozenset({"proc", "exit"})
MESSAGE_KINDS = frozenset({"mp", "zmq", "udp", "unixgram", "pipe"})
LOSSY_KINDS = frozenset({"udp"})
SELF_READ_KINDS = frozenset({"mp", "pipe"})
"""Kinds where one channel name can be a queue that a process both writes and reads."""

Hub = tuple[tuple[int, ...], tuple[int, ...]]
Uncertain = tuple[int, tuple[tuple[int, ...], ...]]


@dataclass(slots=True)
class KindCounts:
    """Per-kind counts, for ``distea show``."""

    sends: int = 0
    recvs: int = 0
    matched: int = 0
    ambiguous: int = 0
    external: int = 0
    unmatched_sends: int = 0


@dataclass(slots=True)
class Matching:
    """All message events of a run and how sends pair with receives.

    Event ids are indexes into ``events``: process by process (in the order
    of ``process_keys``), each process's events in clock order, so the ids of
    process ``p`` are ``range(offsets[p], offsets[p + 1])``.
    """

    process_keys: list[str]
    events: list[MessageEvent]
    offsets: list[int]
    proc_of: list[int]
    """Process index of every event id."""
    edges: list[tuple[int, int]] = field(default_factory=list)
    """Certain (send id, receive id) pairs."""
    hubs: list[Hub] = field(default_factory=list)
    """(send ids, receive ids): every send happens before every receive."""
    uncertain: list[Uncertain] = field(default_factory=list)
    """(receive id, candidate send chains, one per candidate sender, clock order)."""
    matched: int = 0
    ambiguous: int = 0
    external: int = 0
    unmatched_sends: int = 0
    by_kind: dict[str, KindCounts] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def sends(self) -> int:
        return sum(c.sends for c in self.by_kind.values())

    @property
    def recvs(self) -> int:
        return sum(c.recvs for c in self.by_kind.values())

    def events_of(self, process_index: int) -> range:
        return range(self.offsets[process_index], self.offsets[process_index + 1])

    def certain_pairs(self) -> Iterator[tuple[int, int]]:
        """Certain edges plus expanded hubs (not the uncertain candidates)."""
        yield from self.edges
        for sends, recvs in self.hubs:
            for r in recvs:
                rp = self.proc_of[r]
                for s in sends:
                    if self.proc_of[s] != rp:
                        yield s, r


def match(
    messages: Mapping[str, Sequence[MessageEvent]],
    links: Sequence[ChannelLink] = (),
    processes: Mapping[str, ProcessInfo] | None = None,
) -> Matching:
    """Pair every send with its receives; see the module docstring for the rules."""
    keys = sorted(messages)
    events: list[MessageEvent] = []
    offsets = [0]
    proc_of: list[int] = []
    for p, key in enumerate(keys):
        evs = messages[key]
        events.extend(evs)
        proc_of.extend([p] * len(evs))
        offsets.append(len(events))
    m = Matching(keys, events, offsets, proc_of)
    started = {k: (processes[k].started_ns if processes and k in processes else 0) for k in keys}

    link_map: dict[str, str] = {}
    for link in links:
        link_map[link.end_a] = link.end_b
        link_map[link.end_b] = link.end_a

    # Group by (kind, channel as the receiving end names it), in order of first use.
    groups: dict[tuple[str, str], tuple[list[int], list[int]]] = {}
    get_group = groups.get
    i = -1
    for ev in events:
        i += 1
        gk = (ev.kind, ev.channel)
        if ev.direction == "send":
            if link_map and gk[0] not in LIFECYCLE_KINDS:
                gk = (gk[0], link_map.get(gk[1], gk[1]))
            group = get_group(gk)
            if group is None:
                group = groups[gk] = ([], [])
            group[0].append(i)
        else:
            group = get_group(gk)
            if group is None:
                group = groups[gk] = ([], [])
            group[1].append(i)

    unknown: set[str] = set()
    routed: list[tuple[str, str, list[int], list[int]]] = []
    signal_sends = [s for (kind, _), (sends, _) in groups.items() if kind == "signal"
                    for s in sends]
    for (kind, channel), (sends, recvs) in groups.items():
        if kind == "zmq" and any(_peer(events[s]) for s in sends):
            routed.append((kind, channel, sends, recvs))  # after the peers are known
            continue
        if kind == "exit" and not sends and signal_sends:  # killed before it could say so
            killed = link_killed(events, proc_of, channel, recvs, signal_sends)
            m.uncertain.extend(killed)
            _count(m, kind, sends, recvs, _Result(ambiguous=len(killed)))
            continue
        _count(m, kind, sends, recvs, _match_group(m, kind, sends, recvs, started, unknown))
    peers = _learn_peers(m) if routed else {}
    for kind, channel, sends, recvs in routed:
        result = _Result()
        by_destination = _split_by_destination(m, channel, sends, peers)
        if by_destination is None:
            _match_messages(m, kind, sends, recvs, result)
        else:
            for process, to_process in by_destination.items():
                mine = [r for r in recvs if m.proc_of[r] == process]
                _match_messages(m, kind, to_process, mine, result)
        _count(m, kind, sends, recvs, result)
    for counts in m.by_kind.values():
        m.matched += counts.matched
        m.ambiguous += counts.ambiguous
        m.external += counts.external
        m.unmatched_sends += counts.unmatched_sends
    for kind in sorted(unknown):
        m.notes.append(f"channel kind {kind!r} is unknown to this analyzer; "
                       "paired as a message channel (FIFO per sender)")
    return m


def _match_group(m: Matching, kind: str, sends: list[int], recvs: list[int],
                 started: Mapping[str, int], unknown: set[str]) -> _Result:
    result = _Result()
    if kind in STREAM_KINDS:
        _match_stream(m, sends, recvs, result)
    elif kind == "proc":
        _match_proc(m, sends, recvs, result)
    elif kind == "exit":
        _match_exit(m, sends, recvs, result, started)
    elif kind == "torch" and _is_collective(m.events, sends, recvs):
        _match_collective(m, sends, recvs, result)
    elif kind in TIMED_KINDS:
        timed = match_timed(m.events, m.proc_of, kind, sends, recvs)
        m.edges.extend(timed.edges)
        result.matched, result.unmatched_sends = timed.matched, timed.unmatched_sends
    elif kind == "shm":
        pass  # attaches, no pairs: sharers are ordered at query time (analyzer.shared)
    else:
        if kind not in MESSAGE_KINDS and kind != "torch":
            unknown.add(kind)
        _match_messages(m, kind, sends, recvs, result)
    return result


def _count(m: Matching, kind: str, sends: list[int], recvs: list[int], result: _Result) -> None:
    counts = m.by_kind.get(kind)
    if counts is None:
        counts = m.by_kind[kind] = KindCounts()
    counts.sends += len(sends)
    counts.recvs += len(recvs)
    counts.matched += result.matched
    counts.ambiguous += result.ambiguous
    counts.external += len(recvs) - result.matched - result.ambiguous
    counts.unmatched_sends += result.unmatched_sends


def _peer(ev: MessageEvent) -> object:
    return ev.meta.get("peer") if ev.meta else None


def _endpoint(channel: str) -> str:
    """``"tcp://h:1 bind>connect"`` → ``"tcp://h:1"``: both directions of one endpoint."""
    return channel.rsplit(" ", 1)[0]


def _learn_peers(m: Matching) -> dict[tuple[str, object], int | None]:
    """ZeroMQ routing ids → the process behind them, from certain pairings.

    A ROUTER records the routing id of the peer each message came from; the
    certain edge into that receive names the process. An id seen for two
    processes is unusable (None).
    """
    peers: dict[tuple[str, object], int | None] = {}
    for s, r in m.edges:
        ev = m.events[r]
        peer = _peer(ev) if ev.kind == "zmq" else None
        if peer is None:
            continue
        key = (_endpoint(ev.channel), peer)
        process = m.proc_of[s]
        peers[key] = process if peers.get(key, process) == process else None
    return peers


def _split_by_destination(m: Matching, channel: str, sends: list[int],
                          peers: Mapping[tuple[str, object], int | None],
                          ) -> dict[int, list[int]] | None:
    """A ROUTER's sends grouped by the process each was addressed to; None if any is unknown.

    Replies of equal content to several peers (the same weights to every
    worker) are then paired exactly instead of ambiguously.
    """
    endpoint = _endpoint(channel)
    split: dict[int, list[int]] = defaultdict(list)
    for s in sends:
        process = peers.get((endpoint, _peer(m.events[s])))
        if process is None:
            return None
        split[process].append(s)
    return split


@dataclass(slots=True)
class _Result:
    matched: int = 0
    ambiguous: int = 0
    unmatched_sends: int = 0


def _fp(ev: MessageEvent) -> object:
    meta = ev.meta
    if not meta:
        return None
    fp = meta.get("fp")
    return tuple(fp) if isinstance(fp, list) else fp


def _is_collective(events: list[MessageEvent], sends: list[int], recvs: list[int]) -> bool:
    for i in sends[:1] + recvs[:1]:
        meta = events[i].meta
        if meta and meta.get("role"):
            return True
    return False


# -- streams -----------------------------------------------------------------


def _generations(m: Matching, ids: list[int]) -> list[tuple[int, list[int]]]:
    """Split one side of a stream into (process, ids) generations: offsets restart at 0.

    ``ids`` increase, so they are grouped by process already when the first and
    the last are of the same process (a process's ids are one range).
    """
    proc_of, events = m.proc_of, m.events
    if not ids:
        return []
    by_proc: dict[int, list[int]]
    if proc_of[ids[0]] == proc_of[ids[-1]]:
        by_proc = {proc_of[ids[0]]: ids}
    else:
        by_proc = defaultdict(list)
        for i in ids:
            by_proc[proc_of[i]].append(i)
    gens: list[tuple[int, list[int]]] = []
    for p, pids in by_proc.items():
        current: list[int] = []
        prev_end = -1
        for i in pids:  # clock order within a process
            ev = events[i]
            start = ev.start
            if current and (start < prev_end or (start == 0 and prev_end > 0)):
                gens.append((p, current))
                current = []
                prev_end = -1
            current.append(i)
            if ev.end > prev_end:
                prev_end = ev.end
        if current:
            gens.append((p, current))
    return gens


def _match_stream(m: Matching, sends: list[int], recvs: list[int], out: _Result) -> None:
    send_gens = _generations(m, sends)
    recv_gens = _generations(m, recvs)
    events = m.events
    edges = m.edges
    received: set[int] = set()  # send gen indexes that some receive reads from
    candidate_sends: set[int] = set()
    one_to_one = len({p for p, _ in send_gens}) <= 1 and len({p for p, _ in recv_gens}) <= 1
    out_of_step = one_to_one and len(send_gens) > 1
    starts = [[events[s].start for s in sids] for _, sids in send_gens]
    for g, (rp, rids) in enumerate(recv_gens):
        if one_to_one:
            candidates = [g] if g < len(send_gens) else []
        else:
            candidates = [j for j, (sp, _) in enumerate(send_gens) if sp != rp] or \
                [j for j in range(len(send_gens))]
        if len(candidates) == 1:
            # the common case: one generation to read from, so its carrier is certain
            j = candidates[0]
            sids, sts = send_gens[j][1], starts[j]
            matched = 0
            for r in rids:
                rev = events[r]
                a, b = rev.start, rev.end
                byte = b - 1 if b > a else a - 1
                if byte >= 0:  # _carrier, inlined
                    k = bisect_right(sts, byte) - 1
                    if k >= 0 and events[sids[k]].end > byte:
                        edges.append((sids[k], r))
                        matched += 1
                        continue
                if out_of_step:
                    _stream_out_of_step(m, r, byte, send_gens, starts, received,
                                        candidate_sends, out)
            if matched:
                received.add(j)
                out.matched += matched
            continue
        for r in rids:
            rev = events[r]
            byte = rev.end - 1 if rev.end > rev.start else rev.start - 1
            carriers: list[int] = []
            for j in candidates:
                s = _carrier(events, send_gens[j][1], starts[j], byte)
                if s is not None:
                    carriers.append(s)
                    received.add(j)
            certain = one_to_one or len(candidates) == 1
            if not carriers and out_of_step:
                _stream_out_of_step(m, r, byte, send_gens, starts, received, candidate_sends,
                                    out)
            elif len(carriers) == 1 and certain:
                edges.append((carriers[0], r))
                out.matched += 1
            elif carriers:
                m.uncertain.append((r, tuple((s,) for s in carriers)))
                candidate_sends.update(carriers)
                out.ambiguous += 1
    # A send is unmatched when no receive read any of its bytes.
    gen_read_to = [max(events[r].end for r in rids) for _, rids in recv_gens]
    any_read_to = max(gen_read_to, default=0)
    for j, (_, sids) in enumerate(send_gens):
        if j not in received:
            out.unmatched_sends += sum(1 for s in sids if s not in candidate_sends)
            continue
        own = gen_read_to[j] if j < len(gen_read_to) else 0
        read_to = own if one_to_one else any_read_to
        out.unmatched_sends += sum(1 for s, start in zip(sids, starts[j], strict=True)
                                   if start >= read_to and events[s].end > start)


def _stream_out_of_step(
    m: Matching, r: int, byte: int, send_gens: list[tuple[int, list[int]]],
    starts: list[list[int]], received: set[int], candidate_sends: set[int], out: _Result,
) -> None:
    """Generations out of step (a connection one side never used?): every generation
    that holds the byte is a candidate, none of them certain."""
    carriers: list[int] = []
    for j in range(len(send_gens)):
        s = _carrier(m.events, send_gens[j][1], starts[j], byte)
        if s is not None:
            carriers.append(s)
            received.add(j)
    if carriers:
        m.uncertain.append((r, tuple((s,) for s in carriers)))
        candidate_sends.update(carriers)
        out.ambiguous += 1


def _carrier(
    events: list[MessageEvent], sids: list[int], starts: list[int], byte: int
) -> int | None:
    """The send of a generation (``starts``: its sends' first bytes) that holds ``byte``."""
    if byte < 0:
        return None
    k = bisect_right(starts, byte) - 1
    if k >= 0 and events[sids[k]].end > byte:
        return sids[k]
    return None


# -- lifecycle ---------------------------------------------------------------


def _match_proc(m: Matching, sends: list[int], recvs: list[int], out: _Result) -> None:
    if not recvs:
        out.unmatched_sends += len(sends)
        return
    if len(sends) == 1:
        for r in recvs:
            m.edges.append((sends[0], r))
        out.matched += len(recvs)
    elif sends:
        chains = tuple((s,) for s in sends)
        for r in recvs:
            m.uncertain.append((r, chains))
        out.ambiguous += len(recvs)
        m.notes.append(f"spawn token {m.events[sends[0]].channel!r} was sent {len(sends)} times")


def _match_exit(
    m: Matching, sends: list[int], recvs: list[int], out: _Result, started: Mapping[str, int]
) -> None:
    if not sends:
        return
    keys = m.process_keys
    sends = sorted(sends, key=lambda s: (started[keys[m.proc_of[s]]], m.events[s].clock))
    recvs = sorted(recvs, key=lambda r: (started[keys[m.proc_of[r]]], m.events[r].clock))
    for k, r in enumerate(recvs):
        m.edges.append((sends[min(k, len(sends) - 1)], r))
    out.matched += len(recvs)
    out.unmatched_sends += max(0, len(sends) - len(recvs))


# -- torch collectives -------------------------------------------------------


def _match_collective(m: Matching, sends: list[int], recvs: list[int], out: _Result) -> None:
    if sends and recvs:
        m.hubs.append((tuple(sends), tuple(recvs)))
        out.matched += len(recvs)
    elif sends:
        out.unmatched_sends += len(sends)


# -- message channels --------------------------------------------------------


def _match_messages(
    m: Matching, kind: str, sends: list[int], recvs: list[int], out: _Result
) -> None:
    events = m.events
    # fingerprint class -> sender process -> send ids (clock order)
    send_classes = _classes(m, sends)
    recv_classes = _classes(m, recvs)
    edges = m.edges
    used: set[int] = set()  # sends paired with certainty
    candidate: set[int] = set()  # sends named as uncertain candidates
    for fp, receivers in recv_classes.items():
        senders = send_classes.get(fp, {})
        cands: dict[int, list[int]] = {}
        for rp in receivers:
            others = [sp for sp in senders if sp != rp]
            cands[rp] = others if others else [sp for sp in senders if sp == rp]
        sharing: dict[int, int] = defaultdict(int)  # sender -> receivers it may serve
        for cs in cands.values():
            for sp in cs:
                sharing[sp] += 1
        for rp, rids in receivers.items():
            cs = cands[rp]
            if not cs:
                continue  # external
            # On a shared queue a process may read its own message: then its own sends
            # are possible senders too (ordered by its clock already, so not candidates).
            self_possible = kind in SELF_READ_KINDS and rp in senders and cs != [rp]
            if len(cs) == 1 and not self_possible:
                sp = cs[0]
                sids = senders[sp]
                lossy = kind in LOSSY_KINDS and len(sids) != len(rids)
                if not lossy and (sharing[sp] == 1 or any(
                        (events[s].meta or {}).get("fanout") for s in sids)):
                    n = min(len(sids), len(rids))
                    # FIFO: the k-th receive reads the k-th send
                    edges.extend(zip(sids, rids, strict=False))
                    used.update(sids[:n])
                    out.matched += n
                    continue
            chains = tuple(tuple(senders[sp]) for sp in cs)
            m.uncertain.extend((r, chains) for r in rids)
            for chain in chains:
                candidate.update(chain)
            out.ambiguous += len(rids)
    # every send of ``used`` and ``candidate`` is one of ``sends``
    out.unmatched_sends += len(sends) - len(used | candidate if candidate else used)


def _classes(m: Matching, ids: list[int]) -> dict[object, dict[int, list[int]]]:
    """Fingerprint class (:func:`_fp`) -> process -> ids, each in the order of ``ids``."""
    events, proc_of = m.events, m.proc_of
    classes: dict[object, dict[int, list[int]]] = {}
    get_class = classes.get
    last_p: int = -1  # the previous id's process and class: runs of both are common
    last_fp: object = None
    lst: list[int] = []
    for i in ids:
        meta = events[i].meta
        if meta:  # _fp, inlined
            fp = meta.get("fp")
            if isinstance(fp, list):
                fp = tuple(fp)
        else:
            fp = None
        p = proc_of[i]
        if p == last_p and (fp is last_fp or fp == last_fp):  # the same dict key
            lst.append(i)
            continue
        by_proc = get_class(fp)
        if by_proc is None:
            by_proc = classes[fp] = {}
        found = by_proc.get(p)
        if found is None:
            lst = by_proc[p] = [i]
        else:
            lst = found
            lst.append(i)
        last_p, last_fp = p, fp
    return classes
