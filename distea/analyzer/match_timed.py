"""Pairing by same-host time: semaphores (``sem``) and signals (``signal``).

Neither a semaphore nor a signal says who let a receive through: an acquire
returns because *some* release posted the semaphore (or the initial count
allowed it); a handler runs because *some* ``kill`` reached the process
(signals of one number merge while pending). Both ends record
``meta["t"]``, ``time.monotonic_ns()``: a send takes it before the release or
the ``kill``, a receive after the acquire returned or as the handler starts.
CLOCK_MONOTONIC is one clock for every process of a host (the channel names
carry the host), so the send that let a receive through has a smaller time.

The rule, safe: a receive at time ``t`` is ordered after, for every other
process, its send with the highest clock among those with a time below ``t``
(the earlier ones happen before that one in the sender's own order). For a
lock this is exactly the previous holder's release; for a counting semaphore
or a signal sent twice it may order a receive after a send it did not need.
The edges are certain edges of the :class:`~distea.analyzer.matching.Matching`
(a receive may have several). They never close a cycle with recorded
messages: each goes forward in real time.

A receive with no such send from another process is ``matched`` for a
semaphore (the initial count, or its own process's release, let it
through) and ``external`` for a signal (the kernel or an untraced process
sent it). Signal sends name their target (``pid``, ``pgid`` or ``all``), the
handler's receive its ``pid`` and ``pgid``.

A process that died of a signal's default action records no ``exit``; the
``wait`` that reaped it is then ordered after every signal with a fatal
default action sent to its pid (:func:`link_killed`, uncertain candidates:
the sweep keeps those that are not causally after the wait).
"""

from __future__ import annotations

import signal
from bisect import bisect_left
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from distea.model import MessageEvent

TIMED_KINDS = frozenset({"sem", "signal"})
NOT_FATAL = frozenset(int(getattr(signal, name)) for name in (
    "SIGCHLD", "SIGCONT", "SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG", "SIGWINCH")
    if hasattr(signal, name))
"""Signals whose default action does not end the process (signal(7))."""


@dataclass(slots=True)
class TimedResult:
    """What :func:`match_timed` found: edges, and how the receives are counted."""

    edges: list[tuple[int, int]] = field(default_factory=list)
    matched: int = 0
    unmatched_sends: int = 0
    without_edge: list[int] = field(default_factory=list)
    """Receives counted matched that no other process's send orders: their own
    process's send or a semaphore's initial count let them through."""


@dataclass(slots=True)
class _Senders:
    """One target's sends of one process: times increasing, and the latest send by clock."""

    times: list[int]
    best: list[int]
    """``best[k]``: the send with the highest clock among the first ``k + 1`` by time."""


def _time(ev: MessageEvent) -> int | None:
    t = ev.meta.get("t") if ev.meta else None
    return t if isinstance(t, int) else None


def _send_targets(kind: str, ev: MessageEvent) -> list[Hashable]:
    if kind != "signal":
        return [None]
    meta = ev.meta or {}
    if meta.get("all"):
        return [("all",)]
    if "pgid" in meta:
        return [("pgid", meta["pgid"])]
    return [("pid", meta.get("pid"))]


def _recv_targets(kind: str, ev: MessageEvent) -> list[Hashable]:
    if kind != "signal":
        return [None]
    meta = ev.meta or {}
    return [("pid", meta.get("pid")), ("pgid", meta.get("pgid")), ("all",)]


def _index(events: Sequence[MessageEvent], proc_of: Sequence[int], kind: str,
           sends: list[int]) -> dict[Hashable, dict[int, _Senders]]:
    """Target → sender process → its sends ordered by time (for binary search)."""
    by: dict[Hashable, dict[int, list[tuple[int, int, int]]]] = {}
    for s in sends:
        t = _time(events[s])
        if t is None:
            continue
        for target in _send_targets(kind, events[s]):
            by.setdefault(target, {}).setdefault(proc_of[s], []).append(
                (t, events[s].clock, s))
    out: dict[Hashable, dict[int, _Senders]] = {}
    for target, procs in by.items():
        for p, rows in procs.items():
            rows.sort()
            best: list[int] = []
            top_clock, top = -1, -1
            for _, clock, s in rows:
                if clock > top_clock:
                    top_clock, top = clock, s
                best.append(top)
            out.setdefault(target, {})[p] = _Senders([t for t, _, _ in rows], best)
    return out


def match_timed(events: Sequence[MessageEvent], proc_of: Sequence[int], kind: str,
                sends: list[int], recvs: list[int]) -> TimedResult:
    """Order every receive after each other process's latest send before it (module doc)."""
    result = TimedResult()
    index = _index(events, proc_of, kind, sends)
    used: set[int] = set()
    for r in recvs:
        ev = events[r]
        t, rp = _time(ev), proc_of[r]
        if t is None:
            continue  # a damaged record: ordered after nothing, counted external
        chosen: set[int] = set()
        own = False
        for target in _recv_targets(kind, ev):
            for p, senders in index.get(target, {}).items():
                k = bisect_left(senders.times, t)
                if k == 0:
                    continue
                if p == rp:
                    own = True  # its own process's order already puts that send first
                else:
                    chosen.add(senders.best[k - 1])
        result.edges.extend((s, r) for s in sorted(chosen))
        used.update(chosen)
        if chosen or own or kind == "sem":
            result.matched += 1
            if not chosen:
                result.without_edge.append(r)
    if kind == "signal":
        result.unmatched_sends = len(set(sends) - used)
    return result


def fatal(ev: MessageEvent) -> bool:
    """Whether a signal send carries a signal whose default action ends the process."""
    number = ev.channel.rsplit(":", 1)[-1]
    return number.isdigit() and int(number) not in NOT_FATAL


def link_killed(events: Sequence[MessageEvent], proc_of: Sequence[int], exit_channel: str,
                recvs: list[int], signal_sends: Sequence[int]
                ) -> list[tuple[int, tuple[tuple[int, ...], ...]]]:
    """Uncertain candidates for the ``wait``s of a process that recorded no ``exit``.

    ``exit_channel`` is ``HOST:PID``; the candidates are the fatal signal
    sends on that host aimed at that pid (or at every process), one chain per
    sender process in clock order.
    """
    host, _, pid = exit_channel.rpartition(":")
    if not pid.isdigit():
        return []
    chains: dict[int, list[int]] = {}
    for s in signal_sends:
        ev = events[s]
        meta = ev.meta or {}
        if not ev.channel.startswith(f"{host}:signal:") or not fatal(ev):
            continue
        if meta.get("pid") == int(pid) or meta.get("all"):
            chains.setdefault(proc_of[s], []).append(s)
    if not chains:
        return []
    candidates = tuple(tuple(sorted(c, key=lambda s: events[s].clock))
                       for _, c in sorted(chains.items()))
    return [(r, candidates) for r in recvs]
