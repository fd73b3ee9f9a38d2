"""Same-host ``CLOCK_MONOTONIC`` brackets: what they say about the order in a pipe.

Tracers record ``meta["t"] = [t0, t1]`` around an operation on a pipe (a
multiprocessing message, a pipe ``read``/``write``): ``t0`` read just before
the system call touched the descriptor, ``t1`` just after it returned. On one
host ``CLOCK_MONOTONIC`` is one clock for every process and its readings
never go back, so when operation A's bracket ends before B's begins
(``A.t1 < B.t0``, strictly: equal readings say nothing), all of A happened
before any of B. The kernel moves a pipe's bytes in one order, so A's bytes
are ahead of B's in the pipe. Operations whose brackets overlap ran at the
same time: their order is unknown.

:func:`place` turns that into byte positions: the operations sorted by ``t0``
fall into clusters (a cluster goes on while the next ``t0`` is not after
every ``t1`` seen so far), the clusters are in the pipe's order, and each
operation's bytes lie somewhere in its cluster's byte range. A cluster of
one operation is placed exactly. Used by :mod:`distea.analyzer.match_queues`
(messages) and :mod:`distea.analyzer.match_pipes` (bytes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from distea.model import MessageEvent, ProcessInfo


@dataclass(frozen=True, slots=True)
class Placed:
    """Where an operation's bytes lie in the pipe: somewhere in ``[lo, hi)``."""

    lo: int
    hi: int
    alone: bool
    """No other operation's bracket overlaps its cluster: its bytes are exactly
    ``[lo, hi)``."""


def bracket(ev: MessageEvent) -> tuple[int, int] | None:
    """``(t0, t1)`` of an event, or None where it carries none (or a broken one)."""
    t = ev.meta.get("t") if ev.meta else None
    if not isinstance(t, list | tuple) or len(t) != 2 or t[1] < t[0]:
        return None
    return int(t[0]), int(t[1])


def place(ops: Iterable[tuple[int, int, int, int]]) -> dict[int, Placed]:
    """Byte ranges of ``(t0, t1, length, id)`` operations of one direction of a pipe.

    Every operation of earlier clusters ended before any operation of this
    one began, so all their bytes come first: an operation's bytes start at
    or after the total length of the earlier clusters (``lo``) and end at or
    before that plus its own cluster's total (``hi``). Operations that were
    not recorded (an untraced writer) only push real positions later.
    """
    placed: dict[int, Placed] = {}
    cluster: list[tuple[int, int]] = []  # (id, length) of the open cluster
    lo = size = 0
    reach = None  # the latest t1 of the open cluster

    def close() -> None:
        for i, _ in cluster:
            placed[i] = Placed(lo, lo + size, len(cluster) == 1)

    for t0, t1, length, i in sorted(ops):
        if reach is not None and t0 > reach:
            close()
            lo, size, cluster = lo + size, 0, []
        cluster.append((i, length))
        size += length
        reach = t1 if reach is None else max(reach, t1)
    close()
    return placed


def one_host_nothing_lost(keys: Iterable[str], processes: Mapping[str, ProcessInfo]) -> bool:
    """Whether the processes ``keys`` all ran on one host and all their records arrived."""
    hosts: set[str] = set()
    for key in keys:
        info = processes.get(key)
        if info is None or not info.complete or info.dropped_events:
            return False
        hosts.add(info.host)
    return len(hosts) == 1


def one_host(keys: Iterable[str], processes: Mapping[str, ProcessInfo]) -> bool:
    """Whether the processes ``keys`` are all known and all ran on one host."""
    hosts: set[str] = set()
    for key in keys:
        info = processes.get(key)
        if info is None:
            return False
        hosts.add(info.host)
    return len(hosts) == 1
