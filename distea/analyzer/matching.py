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
- ``exit``: ``HOST:PID``; sends and receives paired in order; the return of
  ``os.system``, named by its spawn's token, after the exits of every
  process that spawn started (a hub);
- ``sem``, ``signal``: by same-host time (:mod:`distea.analyzer.match_timed`);
  an ``exit`` that a killed process never recorded: its ``wait`` is ordered
  after the fatal signals sent to it (uncertain);
- ``shm``: attaches to a shared segment; nothing to pair (the sharers are
  ordered at query time, :mod:`distea.analyzer.shared`);
- ``torch`` with ``meta["role"]``: a collective ``GROUP:SEQ``, all sends →
  all receives (a hub); without a role it is point-to-point, as below;
- ``pipe``: byte offsets per pipe, like streams, where the processes using
  one end took turns; where several used one end at once, the pipe's order
  from same-host ``CLOCK_MONOTONIC`` brackets; safely uncertain otherwise
  (:mod:`distea.analyzer.match_pipes`);
- ``file``: by same-host real time, :mod:`distea.analyzer.match_files`;
- ``mp`` on a pipe or socket pair shared by several processes (a queue),
  where every event carries a ``CLOCK_MONOTONIC`` bracket, all on one host:
  the k-th read in bracket order pairs with the k-th write, certain
  (:mod:`distea.analyzer.match_queues` says when that is exact; otherwise
  the rule below);
- ``zmq`` fan-in (several sockets into one) and fan-out (one socket's messages
  split among several), where every message carries its time: per-socket
  FIFO, same-host ``CLOCK_MONOTONIC`` and fingerprints narrow each receive's
  candidates (:mod:`distea.analyzer.match_zmq`; otherwise the rule below);
- ``udp`` broadcasts and multicasts (channel ``*:PORT``): offered to every
  UDP receive on that port, beside its unicast sends, then as below
  (:mod:`distea.analyzer.match_broadcast`);
- message kinds (``mp``, ``zmq``, ``udp``, ``unixgram`` and any kind not named
  here): per channel — a send on a LINKed end is received on the
  other end, otherwise the channel strings are equal — then per fingerprint
  class (``meta["fp"]``, or "no fingerprint"), FIFO per sender. One
  candidate sender: FIFO alignment, certain (``meta["fanout"]`` sends are
  aligned with each receiver separately). Several candidate senders, or one
  non-fanout sender whose messages several receivers share: uncertain. A
  process's own sends are candidates only when no other process sends on the
  channel (its own clock already orders them before its receives); on ``mp``
  channels, where a process may read back its own message from
  a shared queue, a receiver that also sends in that class is uncertain. ``udp``
  classes where the counts differ (a datagram was lost) are uncertain too.
- a channel marked by a send of kind ``untrusted`` (something distea cannot see
  writes to it, such as the signal wakeup fd): no receive is paired by
  offsets; one with writers in other processes is uncertain over all their
  sends, one whose only writer is its own process is ordered by its clock
  (:mod:`distea.analyzer.match_unseen`); the markers themselves are not
  messages and are not counted.
- ``grpc`` and ``ray``: :mod:`distea.analyzer.match_rpc`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from distea.analyzer import children as child_rule
from distea.analyzer import match_pipes
from distea.analyzer import relays as relay_rule
from distea.analyzer.match_broadcast import Group, pair_port, port_of, split_broadcasts
from distea.analyzer.match_files import KIND as FILE_KIND
from distea.analyzer.match_files import match_files
from distea.analyzer.match_queues import pairs_by_brackets
from distea.analyzer.match_rpc import link_ray_dependencies, match_grpc, match_ray
from distea.analyzer.match_timed import TIMED_KINDS, link_killed, match_timed
from distea.analyzer.match_tls import MixedChannel, mixed_channels, mixed_notes, order_unpaired
from distea.analyzer.match_torch import unseen_notes as torch_unseen_notes
from distea.analyzer.match_unseen import (
    UNSEEN_KIND,
    Unseen,
    match_unseen,
    unseen_notes,
    unseen_why,
)
from distea.analyzer.match_zmq import pair_zmq
from distea.model import ChannelLink, MessageEvent, ProcessInfo, UntracedChild

STREAM_KINDS = frozenset({"tcp", "unix", "ssl"})
LIFECYCLE_KINDS = frozenset({"proc", "exit"})
MESSAGE_KINDS = frozenset({"mp", "zmq", "udp", "unixgram"})
LOSSY_KINDS = frozenset({"udp"})
SELF_READ_KINDS = frozenset({"mp"})
"""Kinds where one channel name can be a queue that a process both writes and reads."""

Hub = tuple[tuple[int, ...], tuple[int, ...]]
Uncertain = tuple[int, tuple[Sequence[int], ...]]


@dataclass(slots=True)
class KindCounts:
    """Per-kind counts, for ``distea show``."""

    sends: int = 0
    recvs: int = 0
    matched: int = 0
    ambiguous: int = 0
    external: int = 0
    unmatched_sends: int = 0
    relayed: int = 0
    """Receives from an untraced server in the middle, ordered by the relay rule (after
    the sends that may have reached them: perhaps none)."""


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
    relayed: int = 0
    by_kind: dict[str, KindCounts] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    relays: list[relay_rule.RelayInfo] = field(default_factory=list)
    """Untraced servers in the middle (:mod:`distea.analyzer.relays`), turned off ones too."""
    relay_of: dict[int, str] = field(default_factory=dict)
    """Receive id → address of the relay its edges pass through."""
    children: list[child_rule.ChildTraffic] = field(default_factory=list)
    """Non-Python children whose output or exit traced processes received
    (:mod:`distea.analyzer.children`)."""
    explained: set[int] = field(default_factory=set)
    """Receives counted matched or relayed that may have no edge: from a relay or a
    non-Python child, a signal its own process sent, a semaphore's initial count;
    ordered by their own process's clock (never external)."""

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
    no_relay: Collection[str] = (),
    untraced: Sequence[UntracedChild] = (),
) -> Matching:
    """Pair every send with its receives; see the module docstring for the rules.

    Streams to an untraced server that several processes talk to are relays
    (:mod:`distea.analyzer.relays`), except the addresses in ``no_relay``; what
    traced processes read from the non-Python children in ``untraced`` (their
    output pipes, their exits) is ordered after the children's inputs
    (:mod:`distea.analyzer.children`).
    """
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

    # channels something unseen writes to (markers: sends of kind "untrusted")
    marked = {channel: unseen_why(events[group[0][0]].meta)
              for (kind, channel), group in groups.items() if kind == UNSEEN_KIND}
    unseen: dict[tuple[str, str], Unseen] = {}
    _relays(m, groups, processes, no_relay)
    mixed = mixed_channels(groups, STREAM_KINDS)  # TLS plaintext at one end only
    deferred: dict[str, list[tuple[str, list[int], list[int]]]] = defaultdict(list)
    _children(m, groups, untraced, processes)
    unknown: set[str] = set()
    routed: list[tuple[str, str, list[int], list[int]]] = []
    files: list[tuple[list[int], list[int]]] = []
    broadcasts = split_broadcasts(groups)
    on_port: dict[str, list[Group]] = defaultdict(list)  # UDP groups a broadcast reaches
    signal_sends = [s for (kind, _), (sends, _) in groups.items() if kind == "signal"
                    for s in sends]
    for (kind, channel), (sends, recvs) in groups.items():
        if kind == FILE_KIND:
            files.append((sends, recvs))  # all at once: reads pair across identities by path
            continue
        if kind == UNSEEN_KIND:
            continue  # markers, not messages
        if channel in marked and kind not in LIFECYCLE_KINDS:
            u = unseen[(kind, channel)] = Unseen(marked[channel])
            own, ambiguous = match_unseen(m, sends, recvs, u)
            _count(m, kind, sends, recvs, _Result(matched=own, ambiguous=ambiguous))
            continue
        if kind == "zmq" and any(_peer(events[s]) for s in sends):
            routed.append((kind, channel, sends, recvs))  # after the peers are known
            continue
        if broadcasts and kind == "udp" and port_of(channel) in broadcasts:
            on_port[port_of(channel)].append((sends, recvs))
            continue
        if kind in STREAM_KINDS and channel in mixed:
            deferred[channel].append((kind, sends, recvs))  # all its kinds at once
            continue
        if kind == "exit" and "#" in channel:  # os.system returned: a spawn's token
            _count(m, kind, sends, recvs, _system_returned(m, groups, channel, recvs, processes))
            continue
        if kind == "exit" and not sends and signal_sends:  # killed before it could say so
            killed = link_killed(events, proc_of, channel, recvs, signal_sends)
            m.uncertain.extend(killed)
            _count(m, kind, sends, recvs, _Result(ambiguous=len(killed)))
            continue
        _count(m, kind, sends, recvs,
               _match_group(m, kind, sends, recvs, started, unknown, processes))
    for port, sent in broadcasts.items():
        _match_broadcasts(m, sent, on_port[port])
    for channel, kinds in deferred.items():
        _match_mixed(m, kinds, mixed[channel])
    m.notes.extend(mixed_notes(mixed))
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
    if files:
        paired = match_files(m, files)
        if paired.recvs:
            _count(m, FILE_KIND, paired.sends, paired.recvs,
                   _Result(paired.matched, paired.ambiguous))
    if "ray" in m.by_kind:
        link_ray_dependencies(m)
    for counts in m.by_kind.values():
        m.matched += counts.matched
        m.ambiguous += counts.ambiguous
        m.external += counts.external
        m.unmatched_sends += counts.unmatched_sends
        m.relayed += counts.relayed
    m.notes.extend(unseen_notes(unseen))
    for kind in sorted(unknown):
        m.notes.append(f"channel kind {kind!r} is unknown to this analyzer; "
                       "paired as a message channel (FIFO per sender)")
    if "torch" in m.by_kind:
        m.notes.extend(torch_unseen_notes(m, processes))
    return m


def _match_group(m: Matching, kind: str, sends: list[int], recvs: list[int],
                 started: Mapping[str, int], unknown: set[str],
                 processes: Mapping[str, ProcessInfo] | None) -> _Result:
    result = _Result()
    if kind == "mp" and _match_queue(m, sends, recvs, result, processes):
        pass  # a shared queue, in the pipe's own order (match_queues.py)
    elif kind == "zmq" and _match_zmq(m, sends, recvs, result, processes):
        pass  # fan-in or fan-out (match_zmq.py)
    elif kind in STREAM_KINDS:
        _match_stream(m, sends, recvs, result)
    elif kind == match_pipes.KIND:
        piped = match_pipes.match_pipe(m, sends, recvs, processes)
        result.matched, result.ambiguous = piped.matched, piped.ambiguous
        result.unmatched_sends = piped.unmatched_sends
    elif kind == "proc":
        _match_proc(m, sends, recvs, result)
    elif kind == "exit":
        _match_exit(m, sends, recvs, result, started)
    elif kind == "torch" and _is_collective(m.events, sends, recvs):
        _match_collective(m, sends, recvs, result)
    elif kind == "grpc":
        match_grpc(m, sends, recvs, result, _classes)
    elif kind == "ray":
        match_ray(m, sends, recvs, result)
    elif kind in TIMED_KINDS:
        timed = match_timed(m.events, m.proc_of, kind, sends, recvs)
        m.edges.extend(timed.edges)
        m.explained.update(timed.without_edge)
        result.matched, result.unmatched_sends = timed.matched, timed.unmatched_sends
    elif kind == "shm":
        pass  # attaches, no pairs: sharers are ordered at query time (analyzer.shared)
    else:
        if kind not in MESSAGE_KINDS and kind != "torch":
            unknown.add(kind)
        _match_messages(m, kind, sends, recvs, result)
    return result


def _match_broadcasts(m: Matching, broadcast: list[int], groups: list[Group]) -> None:
    """One UDP port: its broadcasts offered to each receive group on it (match_broadcast.py)."""
    result = _Result()
    unread = pair_port(m.edges, m.uncertain, broadcast, groups,
                       lambda sends, recvs: _match_messages(m, "udp", sends, recvs, result))
    result.unmatched_sends = unread
    _count(m, "udp", broadcast + [s for sends, _ in groups for s in sends],
           [r for _, recvs in groups for r in recvs], result)


def _relays(m: Matching, groups: dict[tuple[str, str], tuple[list[int], list[int]]],
            processes: Mapping[str, ProcessInfo] | None, no_relay: Collection[str]) -> None:
    """Take the streams to relays out of ``groups`` and order them by the relay rule."""
    out = relay_rule.RelayEdges()
    for address, (kind, sends, recvs, keys) in relay_rule.find_relays(groups, m.events,
                                                                        m.proc_of).items():
        info = relay_rule.relay_edges(address, kind, sends, recvs, m.events, m.proc_of,
                                      m.process_keys, processes, out)
        m.relays.append(info)
        if address in no_relay:
            info.disabled = True
            continue  # left to stream matching: external, as if it were not a relay
        for key in keys:
            del groups[key]
        m.explained.update(recvs)
        counts = m.by_kind.get(kind)
        if counts is None:
            counts = m.by_kind[kind] = KindCounts()
        counts.sends += len(sends)
        counts.recvs += len(recvs)
        counts.matched += info.exact
        counts.relayed += len(recvs) - info.exact
    disabled = {r.address for r in m.relays if r.disabled}
    m.edges.extend((s, r) for s, r in out.edges if out.relay_of[r] not in disabled)
    m.uncertain.extend(u for u in out.uncertain if out.relay_of[u[0]] not in disabled)
    m.relay_of.update((r, a) for r, a in out.relay_of.items() if a not in disabled)
    m.notes.extend(relay_rule.disabled_notes(m.relays))


def _children(m: Matching, groups: dict[tuple[str, str], tuple[list[int], list[int]]],
              untraced: Sequence[UntracedChild],
              processes: Mapping[str, ProcessInfo] | None) -> None:
    """Take non-Python children's output pipes and exits out of ``groups`` and order them."""
    found = child_rule.order_children(m, groups, untraced, processes)
    m.edges.extend(found.edges)
    m.uncertain.extend(found.uncertain)
    m.children = found.traffic
    m.explained.update(found.receives)
    for kind, sends, recvs, relayed in found.counts:
        counts = m.by_kind.get(kind)
        if counts is None:
            counts = m.by_kind[kind] = KindCounts()
        counts.sends += sends
        counts.recvs += recvs
        counts.matched += recvs - relayed
        counts.relayed += relayed


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


def _match_mixed(m: Matching, groups: list[tuple[str, list[int], list[int]]],
                 mixed: MixedChannel) -> None:
    """One channel recorded at two levels (:mod:`distea.analyzer.match_tls`): each kind
    paired by its offsets, what finds no carrier there ordered over the other end."""
    edges_from, uncertain_from = len(m.edges), len(m.uncertain)
    results: list[_Result] = []
    unpaired: list[list[int]] = []
    for _, sends, recvs in groups:
        result = _Result()
        mine_from, mine_uncertain_from = len(m.edges), len(m.uncertain)
        _match_stream(m, sends, recvs, result)
        paired = {r for _, r in m.edges[mine_from:]}
        paired.update(r for r, _ in m.uncertain[mine_uncertain_from:])
        unpaired.append([r for r in recvs if r not in paired])
        results.append(result)
    every_send = [s for _, sends, _ in groups for s in sends]
    for result, recvs in zip(results, unpaired, strict=True):
        ambiguous, own = order_unpaired(m, recvs, every_send, mixed)
        result.ambiguous += ambiguous
        result.matched += own
    used = {s for s, _ in m.edges[edges_from:]}
    used.update(s for _, chains in m.uncertain[uncertain_from:] for c in chains for s in c)
    for (kind, sends, recvs), result in zip(groups, results, strict=True):
        result.unmatched_sends = sum(1 for s in sends if s not in used)
        _count(m, kind, sends, recvs, result)


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


def _system_returned(m: Matching, groups: Mapping[tuple[str, str], Group], token: str,
                     recvs: list[int], processes: Mapping[str, ProcessInfo] | None
                     ) -> _Result:
    """``os.system`` returned (its receive is named by the spawn's token): after the
    exits of the processes that spawn started (the Python programs its shell ran),
    all of them; with none (the shell ran no Python), after the spawn itself, which
    the receiver's own clock orders."""
    exits = [s for info in (processes or {}).values() if info.parent_token == token
             for s in groups.get(("exit", f"{info.host}:{info.pid}"), ([], []))[0]]
    if exits:
        m.hubs.append((tuple(exits), tuple(recvs)))
    else:
        m.explained.update(recvs)
    return _Result(matched=len(recvs))


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


def _match_zmq(m: Matching, sends: list[int], recvs: list[int], out: _Result,
               processes: Mapping[str, ProcessInfo] | None) -> bool:
    """A ZeroMQ fan-in or fan-out, by per-socket FIFO, time and fingerprints."""
    found = pair_zmq(m, sends, recvs, processes)
    if found is None:
        return False
    m.edges.extend(found.edges)
    m.uncertain.extend(found.uncertain)
    out.matched += len(found.edges)
    out.ambiguous += len(found.uncertain)
    out.unmatched_sends += found.unmatched_sends
    return True


def _match_queue(m: Matching, sends: list[int], recvs: list[int], out: _Result,
                 processes: Mapping[str, ProcessInfo] | None) -> bool:
    """A multiprocessing pipe paired k-th read to k-th write, where that is exact."""
    pairs = pairs_by_brackets(m.events, m.proc_of, m.process_keys, sends, recvs, processes)
    if pairs is None:
        return False
    m.edges.extend(pairs)
    out.matched += len(pairs)
    out.unmatched_sends += len(sends) - len(pairs)
    return True


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
