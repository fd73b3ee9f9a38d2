"""Send/receive pairing as it was before its loops were made lean.

Kept verbatim as the oracle that tests/analyzer/test_matching_fast.py
compares :func:`distea.analyzer.matching.match` with. It builds the real
:class:`~distea.analyzer.matching.Matching` and ``KindCounts``. The relay rule
came later and is shared (``matching._relays``): its own oracle is the
hand-derived expectations of tests/analyzer/test_relays.py.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from distea.analyzer.matching import (
    LIFECYCLE_KINDS,
    LOSSY_KINDS,
    MESSAGE_KINDS,
    SELF_READ_KINDS,
    STREAM_KINDS,
    KindCounts,
    Matching,
    _relays,
)
from distea.model import ChannelLink, MessageEvent, ProcessInfo

Hub = tuple[tuple[int, ...], tuple[int, ...]]
Uncertain = tuple[int, tuple[tuple[int, ...], ...]]


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

    # Group by (kind, channel as the receiving end names it).
    groups: dict[tuple[str, str], tuple[list[int], list[int]]] = {}
    for i, ev in enumerate(events):
        channel = ev.channel
        if ev.direction == "send":
            if link_map and ev.kind not in LIFECYCLE_KINDS:
                channel = link_map.get(channel, channel)
            side = 0
        else:
            side = 1
        group = groups.get((ev.kind, channel))
        if group is None:
            group = groups[(ev.kind, channel)] = ([], [])
        group[side].append(i)

    _relays(m, groups, processes, ())
    unknown: set[str] = set()
    routed: list[tuple[str, str, list[int], list[int]]] = []
    for (kind, channel), (sends, recvs) in groups.items():
        if kind == "zmq" and any(_peer(events[s]) for s in sends):
            routed.append((kind, channel, sends, recvs))  # after the peers are known
            continue
        _count(m, kind, sends, recvs, _match_group(m, kind, sends, recvs, started, unknown))
    peers = _learn_peers(m)
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
        m.relayed += counts.relayed
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
    """Split one side of a stream into (process, ids) generations: offsets restart at 0."""
    by_proc: dict[int, list[int]] = defaultdict(list)
    for i in ids:
        by_proc[m.proc_of[i]].append(i)
    gens: list[tuple[int, list[int]]] = []
    events = m.events
    for p, pids in by_proc.items():
        current: list[int] = []
        prev_end = -1
        for i in pids:  # clock order within a process
            ev = events[i]
            start, end = ev.start, ev.end
            if current and (start < prev_end or (start == 0 and prev_end > 0)):
                gens.append((p, current))
                current = []
                prev_end = -1
            current.append(i)
            if end > prev_end:
                prev_end = end
        if current:
            gens.append((p, current))
    return gens


def _match_stream(m: Matching, sends: list[int], recvs: list[int], out: _Result) -> None:
    send_gens = _generations(m, sends)
    recv_gens = _generations(m, recvs)
    events = m.events
    received: set[int] = set()  # send gen indexes that some receive reads from
    candidate_sends: set[int] = set()
    one_to_one = len({p for p, _ in send_gens}) <= 1 and len({p for p, _ in recv_gens}) <= 1
    starts = [[events[s].start for s in sids] for _, sids in send_gens]
    for g, (rp, rids) in enumerate(recv_gens):
        if one_to_one:
            candidates = [g] if g < len(send_gens) else []
        else:
            candidates = [j for j, (sp, _) in enumerate(send_gens) if sp != rp] or \
                [j for j in range(len(send_gens))]
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
            if not carriers and one_to_one and len(send_gens) > 1:
                # generations out of step (a connection one side never used?): any
                # generation that holds the byte is a candidate
                certain = False
                for j in range(len(send_gens)):
                    s = _carrier(events, send_gens[j][1], starts[j], byte)
                    if s is not None:
                        carriers.append(s)
                        received.add(j)
            if len(carriers) == 1 and certain:
                m.edges.append((carriers[0], r))
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
        out.unmatched_sends += sum(1 for s in sids if events[s].start >= read_to
                                   and events[s].end > events[s].start)


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
    proc_of = m.proc_of
    # fingerprint class -> sender process -> send ids (clock order)
    send_classes: dict[object, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for s in sends:
        send_classes[_fp(events[s])][proc_of[s]].append(s)
    recv_classes: dict[object, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for r in recvs:
        recv_classes[_fp(events[r])][proc_of[r]].append(r)

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
                fanout = any((events[s].meta or {}).get("fanout") for s in sids)
                lossy = kind in LOSSY_KINDS and len(sids) != len(rids)
                if (fanout or sharing[sp] == 1) and not lossy:
                    n = min(len(sids), len(rids))
                    for k in range(n):  # FIFO: k-th receive reads the k-th send
                        m.edges.append((sids[k], rids[k]))
                        used.add(sids[k])
                    out.matched += n
                    continue
            chains = tuple(tuple(senders[sp]) for sp in cs)
            for r in rids:
                m.uncertain.append((r, chains))
            for chain in chains:
                candidate.update(chain)
            out.ambiguous += len(rids)
    out.unmatched_sends += sum(1 for s in sends if s not in used and s not in candidate)
