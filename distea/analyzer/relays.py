"""Untraced servers in the middle: relays (DESIGN.md §4, docs/semantics.md "Relays").

Redis, a message broker, a database: traced processes talk to it, it is not
traced, and what one process sends to it may reach whoever receives from it
later. Stream matching alone sees only sends nobody read and receives nobody
sent, and orders nothing through it: impact through a broker would be missed.

**Which endpoints are relays.** The remote address of a stream channel
(``SRC>DST``: ``DST`` for a send, ``SRC`` for a receive) that is no traced
process's own address, talked to by two or more traced processes.

**The safe rule.** A send to a relay happens before every later receive from
it, by any other process. "Later" is decided by CLOCK_MONOTONIC, which is one
clock for every process of a host: the client end of a stream (the end that
spoke first — relays are servers) records ``meta["t"]``, taken before a send
leaves and after a receive returns, so a send stamped after a receive's stamp
cannot have reached it. Where either end has no time (another host: clocks
are not comparable; a stream whose server spoke first; an older trace) the
receive is ordered after every send of the other process that is not
causally after it. Each receive is an uncertain receive of the matching
(:attr:`~distea.analyzer.matching.Matching.uncertain`) with one candidate chain
per other process — the sends of that process, cut at the receive's time —
so the sweep orders it after the latest send of each chain that is not
causally after it. A chain is a view (:class:`Prefix`) of one shared list per
process: a relay costs ``receives * processes`` entries, never
``receives * sends``.

**Exact where the content shows the path** (Redis, :mod:`distea.tracer.channels.resp`):
the tracer reads the commands and replies of a Redis connection. A message
carried by value (LPUSH, RPUSH, XADD, PUBLISH) reaches exactly the receives
that carry the same payload fingerprint (``meta["fps"]``): they are ordered
after the latest such send of each producer, and the push takes no part in
the safe rule. Other writes reach only the receives whose replies read a key
they wrote (``meta["w"]`` on a send, ``meta["r"]`` on a receive; ``-1``: any
key — a script, an unknown command, a reply the tracer could not place).
Where a send or receive could not be parsed it has no ``w``/``r`` and the
safe rule holds for it in full. Precision cost of the shortcut, and its
limit: what a client can observe of a message command without receiving
the message (the list's length, the number of subscribers) is not followed.
AMQP 0-9-1 (:mod:`distea.tracer.channels.amqp`) is read the same way: a
published body reaches the delivery that carries it; exchange and queue
methods write (and their replies read) any key.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from distea.model import MessageEvent, ProcessInfo

STREAM_KINDS = frozenset({"tcp", "unix", "ssl"})

ANY = -1
"""A key fingerprint that stands for every key (as the tracer writes it)."""


@dataclass(slots=True)
class RelayInfo:
    """One untraced endpoint that several traced processes talk to."""

    address: str
    kind: str
    """``tcp``, ``unix`` or ``ssl`` (the first seen)."""
    protocol: str | None
    """``redis`` or ``amqp`` where its clients' bytes were read, else None."""
    processes: list[str]
    """Keys of the traced processes that talk to it."""
    sends: int = 0
    recvs: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    relayed: int = 0
    """Receives ordered after other processes' sends by the safe rule."""
    exact: int = 0
    """Receives paired with their producer's send by payload, nothing else."""
    unordered: int = 0
    """Receives that nothing another process sent before can have reached (a reply that
    reads no key another process wrote before it)."""
    untimed: int = 0
    """Receives ordered without a usable time (another host, no ``meta["t"]``)."""
    disabled: bool = False
    """Turned off by the user (``--no-relay``): its receives order nothing."""

    @property
    def label(self) -> str:
        return f"{self.protocol or 'an untraced server'} at {self.address}"


class Prefix(Sequence[int]):
    """The first ``size`` items of a shared list, without copying them."""

    __slots__ = ("items", "size")

    def __init__(self, items: list[int], size: int) -> None:
        self.items = items
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, k: int) -> int:  # type: ignore[override]
        if k < 0:
            k += self.size
        if not 0 <= k < self.size:
            raise IndexError(k)
        return self.items[k]

    def __iter__(self) -> Iterator[int]:
        items = self.items
        return (items[k] for k in range(self.size))


@dataclass(slots=True)
class _Chain:
    """One process's sends to a relay, in clock order, searchable by time."""

    ids: list[int] = field(default_factory=list)
    latest_at: list[int] = field(default_factory=list)
    """``latest_at[k]``: the earliest time among sends ``k..``; an untimed send counts
    as -1 (it may be before anything). Non-decreasing, so a receive at time ``t``
    may follow sends ``[0, bisect_right(latest_at, t))``."""

    def build(self, events: list[MessageEvent]) -> None:
        low = 1 << 62
        out = [0] * len(self.ids)
        for k in range(len(self.ids) - 1, -1, -1):
            t = _time(events[self.ids[k]])
            low = min(low, -1 if t is None else t)
            out[k] = low
        self.latest_at = out

    def before(self, t: int | None) -> Sequence[int]:
        if t is None:
            return self.ids
        return Prefix(self.ids, bisect_right(self.latest_at, t))


def _time(ev: MessageEvent) -> int | None:
    t = ev.meta.get("t") if ev.meta else None
    return t if isinstance(t, int) else None


def _remote(channel: str, direction: str) -> tuple[str, str] | None:
    """(local, remote) address of a stream channel ``SRC>DST``; None for a socket pair."""
    src, sep, dst = channel.partition(">")
    if not sep:
        return None
    return (src, dst) if direction == "send" else (dst, src)


Group = tuple[str, list[int], list[int], list[tuple[str, str]]]
"""A relay's traffic: (kind, send ids, receive ids, the matching's group keys)."""


def find_relays(
    groups: Mapping[tuple[str, str], tuple[list[int], list[int]]],
    events: list[MessageEvent],
    proc_of: list[int],
) -> dict[str, Group]:
    """The relays among the stream groups of a matching, by address.

    A group with sends and receives is a connection between traced processes
    (both its ends are theirs). The ids of each side are in increasing order (a
    process's events are one range of ids, in clock order).
    """
    local: set[str] = set()
    remote_of: dict[tuple[str, str], str] = {}
    for key, (sends, recvs) in groups.items():
        if key[0] not in STREAM_KINDS:
            continue
        for direction, ids in (("send", sends), ("recv", recvs)):
            if ids:  # the channel as recorded (a group is named by its receiving end)
                ends = _remote(events[ids[0]].channel, direction)
                if ends is not None:
                    local.add(ends[0])
                    if not (sends and recvs):
                        remote_of[key] = ends[1]
    by_address: dict[str, tuple[str, list[int], list[int], set[int]]] = {}
    keys_of: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for key, address in remote_of.items():
        if address in local:
            continue
        sends, recvs = groups[key]
        entry = by_address.get(address)
        if entry is None:
            entry = by_address[address] = (key[0], [], [], set())
        entry[1].extend(sends)
        entry[2].extend(recvs)
        entry[3].update(proc_of[i] for i in sends)
        entry[3].update(proc_of[i] for i in recvs)
        keys_of[address].append(key)
    out: dict[str, Group] = {}
    for address, (kind, sends, recvs, procs) in by_address.items():
        if len(procs) < 2 or not sends or not recvs:
            continue  # one process: its own clock orders its traffic already
        sends.sort()
        recvs.sort()
        out[address] = (kind, sends, recvs, keys_of[address])
    return out


def _keys(ev: MessageEvent, name: str) -> set[object] | None:
    """The keys a send wrote (``w``) or a receive read (``r``); None: unknown, any key."""
    keys = ev.meta.get(name) if ev.meta else None
    if not isinstance(keys, list) or ANY in keys:
        return None
    return set(keys)


def _fps(ev: MessageEvent) -> list[object] | None:
    fps = ev.meta.get("fps") if ev.meta else None
    return fps if isinstance(fps, list) else None


@dataclass(slots=True)
class RelayEdges:
    """What :func:`relay_edges` adds to a matching."""

    edges: list[tuple[int, int]] = field(default_factory=list)
    uncertain: list[tuple[int, tuple[Sequence[int], ...]]] = field(default_factory=list)
    relay_of: dict[int, str] = field(default_factory=dict)
    """Receive id → address of the relay it came through (for explanations)."""


def relay_edges(
    address: str,
    kind: str,
    sends: list[int],
    recvs: list[int],
    events: list[MessageEvent],
    proc_of: list[int],
    keys: Sequence[str],
    processes: Mapping[str, ProcessInfo] | None,
    out: RelayEdges,
) -> RelayInfo:
    """Order every receive from one relay after the sends that may have reached it."""
    hosts = [processes[k].host if processes and k in processes else None for k in keys]
    protocol = next((str(ev.meta["p"]) for ev in (events[s] for s in sends)
                     if ev.meta and "p" in ev.meta), None)
    if protocol is None and any(ev.meta and "cmds" in ev.meta for ev in (events[s] for s in sends)):
        protocol = "redis"
    every: dict[int, _Chain] = defaultdict(_Chain)  # every send, per process
    writers: dict[int, _Chain] = defaultdict(_Chain)  # sends that write some key (or may)
    any_key: dict[int, _Chain] = defaultdict(_Chain)  # sends that may write any key
    by_key: dict[object, dict[int, _Chain]] = defaultdict(lambda: defaultdict(_Chain))
    by_fp: dict[object, dict[int, _Chain]] = defaultdict(lambda: defaultdict(_Chain))
    info = RelayInfo(address, kind, protocol,
                     sorted({keys[proc_of[i]] for i in (*sends, *recvs)}),
                     sends=len(sends), recvs=len(recvs))
    for s in sends:
        ev = events[s]
        p = proc_of[s]
        info.bytes_sent += ev.end - ev.start
        every[p].ids.append(s)
        written = _keys(ev, "w")
        if written is None:
            writers[p].ids.append(s)
            any_key[p].ids.append(s)
        elif written:
            writers[p].ids.append(s)
            for key in written:
                by_key[key][p].ids.append(s)
        for fp in _fps(ev) or ():
            by_fp[fp][p].ids.append(s)
    for chains in (every, writers, any_key, *by_key.values(), *by_fp.values()):
        for chain in chains.values():
            chain.build(events)
    for r in recvs:
        ev = events[r]
        p = proc_of[r]
        info.bytes_received += ev.end - ev.start
        t = _time(ev)
        fps = _fps(ev)
        read = _keys(ev, "r")
        # which sends of each process may have changed what this receive carries
        rules: list[dict[int, _Chain]]
        if fps is None or not (ev.meta and isinstance(ev.meta.get("r"), list)):
            rules = [every]  # bytes not understood: every send may be in them
        elif read is None:
            rules = [writers]
        else:
            rules = [any_key, *(by_key[k] for k in read if k in by_key)]
        cands: list[Sequence[int]] = []
        timed = True
        for rule in rules:
            for x, chain in rule.items():
                if x == p:
                    continue
                same_clock = t is not None and hosts[x] is not None and hosts[x] == hosts[p]
                chosen = chain.before(t if same_clock else None)
                timed = timed and same_clock
                if len(chosen):
                    cands.append(chosen)
        exact: list[Sequence[int]] = []
        for fp in dict.fromkeys(fps or ()):
            for x, chain in by_fp.get(fp, {}).items():
                if x == p:
                    continue
                same_clock = t is not None and hosts[x] is not None and hosts[x] == hosts[p]
                chosen = chain.before(t if same_clock else None)
                timed = timed and same_clock
                if len(chosen):
                    exact.append(chosen)
        if not cands and not exact:
            info.unordered += 1  # nothing another process sent before could be in it
            continue
        out.relay_of[r] = address
        if not cands and len(exact) == 1 and timed:
            # sent before the receive returned, by the only producer of that payload: a
            # certain edge (untimed, the send might be causally after: left to the sweep)
            out.edges.append((exact[0][len(exact[0]) - 1], r))
            info.exact += 1
            continue
        out.uncertain.append((r, (*cands, *exact)))
        info.relayed += 1
        if not timed:
            info.untimed += 1
    return info


def disabled_notes(relays: Collection[RelayInfo]) -> list[str]:
    """Problem lines for relays the user turned off."""
    return [f"relay {info.label} turned off (--no-relay): its {info.recvs} receives order "
            "nothing, so impact does not pass through it" for info in relays if info.disabled]


def carried(
    relay_of: Mapping[int, str],
    sources: Mapping[int, Sequence[int]],
    extra: Sequence[tuple[int, int]],
    events: list[MessageEvent],
    proc_of: list[int],
    starts: Mapping[int, int],
) -> list[str]:
    """Addresses of the relays that an impact passed through (sorted).

    A relay carried the impact when one of its receives, at or after the impact
    start of its process, is ordered after a send made at or after the impact
    start of the sender's process.
    """
    more: dict[int, list[int]] = defaultdict(list)
    for s, r in extra:
        if r in relay_of:
            more[r].append(s)
    found: set[str] = set()
    for r, address in relay_of.items():
        if address in found:
            continue
        start = starts.get(proc_of[r])
        if start is None or events[r].clock < start:
            continue
        for s in (*sources.get(r, ()), *more.get(r, ())):
            sent_from = starts.get(proc_of[s])
            if sent_from is not None and events[s].clock >= sent_from:
                found.add(address)
                break
    return sorted(found)
