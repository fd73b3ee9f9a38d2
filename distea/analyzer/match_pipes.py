"""Pair pipe reads with pipe writes by byte offsets (kind ``pipe``, DESIGN.md §4).

A pipe is one byte stream per inode (channel ``HOST:pipe:INODE``), and each
process counts the bytes it wrote to and read from it
(:mod:`distea.tracer.channels.pipes`). A receive of bytes ``[a, b)`` happens
after the send that carried byte ``b - 1``, as on TCP; one write read as
header + body, or two writes read at once, pair all the same.

Per-process counts are one stream only when the processes took turns: a
forked child that took over an end goes on counting where its parent
stopped, so the writers' ranges (and the readers') are disjoint. Where they
overlap, or where two threads of one process used one end at once (its count
follows the order their calls returned), several callers used one end at once (every spawned child
writing to multiprocessing's one resource-tracker pipe, a parent and its
forked children all printing to one stdout pipe): their own counts cannot
say how their bytes interleaved, but the pipe's order can. Every read and
write carries a ``CLOCK_MONOTONIC`` bracket (``meta["t"]``), and on one host
brackets place each operation's bytes in the pipe
(:func:`distea.analyzer.brackets.place`): exactly where no other bracket of
that end overlaps it, within a known range where some do. A read is then
ordered after the latest write of each other process that began before the
read returned (``t0 <= t1``) and may start before the read's last byte
(:func:`_pair_by_time`): every write whose bytes the read got is among
those, or behind one of them in its writer's own order, or behind an
earlier read of the reader. Where the positions settle that set (no
overlapping bracket straddles the read's end, or the writes begun before the
read returned fill the pipe exactly to its end), the read is matched and its
orderings are certain edges, the write carrying its last byte among them;
otherwise it is uncertain over the same writes (safe, counted ambiguous).

That rule stays safe where a writer distea did not see (or lost records of)
put bytes in the pipe: unseen bytes only push the recorded writes' real
positions later, so a write the read got still starts before its end. It
needs every read of the pipe recorded (a lost or unseen read would let
later reads' real ends run past their recorded ones): the readers must have
ended with a final flush and dropped nothing, and everything must have run
on one host, else the rule below applies.

Without brackets (runs from before them), or where a condition above fails,
every receive of such a pipe is uncertain, ordered after the latest send of
every other writer that is not causally after it (safe). The same holds when
a reader got bytes that no recorded write carried, or that its own process
wrote only later, or that a write began only after the read returned: a
writer distea did not see (a non-Python child, a C extension, a C signal
handler writing a wakeup byte) shares the pipe and shifts every offset, so
no offset is trusted and a note names the pipe. A pipe with reads but no
recorded write at all is external (its writer was not traced).

Runs recorded before pipes were streams (the message index in
``start``/``end``, the byte range in ``meta["bytes"]``) are read through that
byte range.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from heapq import heappop, heappush
from itertools import pairwise
from typing import TYPE_CHECKING

from distea.analyzer.brackets import Placed, bracket, one_host, one_host_nothing_lost, place

if TYPE_CHECKING:
    from distea.analyzer.matching import Matching, Uncertain
    from distea.model import MessageEvent, ProcessInfo

KIND = "pipe"


@dataclass(slots=True)
class PipeResult:
    matched: int = 0
    ambiguous: int = 0
    unmatched_sends: int = 0


def span(ev: MessageEvent) -> tuple[int, int]:
    """The bytes ``[a, b)`` an event moved, as its process counted them."""
    meta = ev.meta
    if meta:
        old = meta.get("bytes")  # a run from before pipes were streams
        if isinstance(old, list | tuple) and len(old) == 2:
            return int(old[0]), int(old[1])
    return ev.start, ev.end


def match_pipe(m: Matching, sends: list[int], recvs: list[int],
               processes: Mapping[str, ProcessInfo] | None = None) -> PipeResult:
    """Pair one pipe's receives with its sends; add edges and uncertain receives to ``m``."""
    out = PipeResult()
    events, proc_of = m.events, m.proc_of
    if not recvs:
        out.unmatched_sends = len(sends)
        return out
    if not sends:
        return out  # external: the writer was not traced
    send_spans = [span(events[s]) for s in sends]
    recv_spans = [span(events[r]) for r in recvs]
    channel = events[recvs[0]].channel
    if _overlapping(send_spans, [proc_of[s] for s in sends]) or \
            _overlapping(recv_spans, [proc_of[r] for r in recvs]) or \
            _threads_at_once(m, sends) or _threads_at_once(m, recvs):
        if not _pair_by_time(m, sends, recvs, processes, out):
            _all_uncertain(m, sends, recvs, out)
        return out
    order = sorted((a, s) for s, (a, b) in zip(sends, send_spans, strict=True) if b > a)
    starts = [a for a, _ in order]
    carriers = [s for _, s in order]
    pairs: list[tuple[int, int]] = []
    unseen = 0
    for r, (a, b) in zip(recvs, recv_spans, strict=True):
        if b <= a:
            continue
        byte = b - 1
        k = bisect_right(starts, byte) - 1
        s = carriers[k] if k >= 0 else -1
        if s >= 0 and span(events[s])[1] > byte and not (
                proc_of[s] == proc_of[r] and events[s].clock > events[r].clock):
            pairs.append((s, r))
        else:  # no recorded write carried it, or its own later write did: offsets shifted
            unseen += 1
    if unseen:
        _note_unseen(m, channel, unseen)
        _all_uncertain(m, sends, recvs, out)
        return out
    m.edges.extend(pairs)
    out.matched = len(pairs)
    read_to = max(b for _, b in recv_spans)
    out.unmatched_sends = sum(1 for a, b in send_spans if b > a and a >= read_to)
    return out


def _note_unseen(m: Matching, channel: str, reads: int) -> None:
    m.notes.append(f"pipe {channel}: {reads} reads got bytes that no recorded write "
                   "carried before them (a writer distea did not see: a non-Python "
                   "child, a C extension, a signal handler?); its receives are ordered "
                   "safely, not by offsets")


@dataclass(slots=True)
class _Stream:
    """One pipe placed by its brackets (:func:`_pair_by_time`)."""

    writes: dict[int, Placed]
    reads: dict[int, Placed]
    size: dict[int, int]
    """Bytes each event moved."""
    t0: dict[int, int]
    t1: dict[int, int]
    order: list[int]
    """Write ids by position in the pipe (``lo``, then id)."""
    cluster_los: list[int]
    """``lo`` of each cluster of writes, ascending (clusters are contiguous)."""
    clusters: list[list[int]]
    """The write ids of each cluster, as :attr:`cluster_los`."""
    edges: list[tuple[int, int]] = field(default_factory=list)
    uncertain: list[Uncertain] = field(default_factory=list)
    matched: int = 0
    ambiguous: int = 0
    unseen: int = 0
    """Reads whose bytes no recorded write can have carried (see :func:`_pair_by_time`)."""


def _pair_by_time(m: Matching, sends: list[int], recvs: list[int],
                  processes: Mapping[str, ProcessInfo] | None, out: PipeResult) -> bool:
    """Order one pipe's reads by its brackets (module docstring); False where they cannot.

    False leaves ``m`` untouched (no bracket, several hosts, a reader whose
    records were lost) or with a note only (a read got bytes that no
    recorded write can have carried: a writer distea did not see); the
    caller then applies the safe rule to the whole pipe.
    """
    events, proc_of, keys = m.events, m.proc_of, m.process_keys
    if processes is None:
        return False
    t0: dict[int, int] = {}
    t1: dict[int, int] = {}
    size: dict[int, int] = {}
    for i in (*sends, *recvs):
        t = bracket(events[i])
        if t is None:
            return False
        a, b = span(events[i])
        t0[i], t1[i], size[i] = t[0], t[1], b - a
    readers = {keys[proc_of[r]] for r in recvs}
    if not one_host(readers | {keys[proc_of[s]] for s in sends}, processes) or \
            not one_host_nothing_lost(readers, processes):
        return False
    writes = place((t0[s], t1[s], size[s], s) for s in sends if size[s] > 0)
    reads = place((t0[r], t1[r], size[r], r) for r in recvs if size[r] > 0)
    order = sorted(writes, key=lambda s: (writes[s].lo, s))
    by_lo: dict[int, list[int]] = defaultdict(list)
    for s in order:
        by_lo[writes[s].lo].append(s)
    stream = _Stream(writes, reads, size, t0, t1, order, list(by_lo), list(by_lo.values()))
    by_reader: dict[int, list[int]] = defaultdict(list)
    for r in sorted(reads):  # ids ascend: clock order within a process
        by_reader[proc_of[r]].append(r)
    for q, rids in by_reader.items():
        _order_reads(stream, proc_of, q, rids)
    written = sum(size[s] for s in writes)
    read = sum(size[r] for r in reads)
    if read > written:
        stream.unseen = max(stream.unseen, 1)
    if stream.unseen:
        _note_unseen(m, events[recvs[0]].channel, stream.unseen)
        return False
    m.edges.extend(stream.edges)
    m.uncertain.extend(stream.uncertain)
    out.matched += stream.matched
    out.ambiguous += stream.ambiguous
    out.unmatched_sends += sum(1 for s in writes if writes[s].lo >= read)
    return True


def _order_reads(stream: _Stream, proc_of: list[int], q: int, rids: list[int]) -> None:
    """Order process ``q``'s reads of the pipe (ids in clock order) after their writes.

    A write is a candidate of read R when it began before R returned
    (``t0 <= R.t1``) and may start before R's last byte (its ``lo`` is below
    R's ``hi``). R is ordered after the latest candidate of each other
    process, unless an earlier read of ``q`` already is (so a reader of
    thousands of lines gets about one ordering per write, not one per
    write and line). Where ``q``'s reads come in stream order (one thread:
    ``hi`` and ``t1`` never go down) the candidates only grow, and one sweep
    over the writes finds them; otherwise each read looks at every write.
    """
    writes, reads, size, t0, t1 = stream.writes, stream.reads, stream.size, stream.t0, stream.t1
    order = stream.order
    in_turn = all(reads[a].hi <= reads[b].hi and t1[a] <= t1[b]
                  for a, b in pairwise(rids))
    latest: dict[int, int] = {}  # writer process -> its latest candidate so far (in_turn)
    covered: dict[int, int] = {}  # writer process -> its latest write ordered before
    swept = 0
    held: list[tuple[int, int]] = []  # (t0, id): passed by position, begun after a read
    for r in rids:
        placed, ends = reads[r], t1[r]
        least_end = placed.lo + size[r]  # the read's last byte is at or after this
        if in_turn:
            new: list[int] = []
            while swept < len(order) and writes[order[swept]].lo < placed.hi:
                s = order[swept]
                swept += 1
                if t0[s] <= ends:
                    new.append(s)
                else:
                    heappush(held, (t0[s], s))
                    if writes[s].hi - size[s] < least_end:
                        stream.unseen += 1  # surely before the read's end, yet begun after
            while held and held[0][0] <= ends:
                new.append(heappop(held)[1])
            touched: set[int] = set()
            for s in new:
                p = proc_of[s]
                if s > latest.get(p, -1):
                    latest[p] = s
                    touched.add(p)
            now = {p: latest[p] for p in touched}
            anything = bool(latest)
        else:
            now = {}
            for s in order:
                if writes[s].lo >= placed.hi:
                    break
                if t0[s] <= ends:
                    now[proc_of[s]] = max(now.get(proc_of[s], -1), s)
                elif writes[s].hi - size[s] < least_end:
                    stream.unseen += 1
            anything = bool(now)
        if not anything:
            stream.unseen += 1  # no write at all can have carried its bytes
            continue
        needed = {p: s for p, s in now.items() if p != q and s > covered.get(p, -1)}
        covered.update(needed)
        unsure = _unsure_writers(stream, proc_of, q, r)
        if unsure:
            chains = tuple((covered[p],) for p in sorted(needed.keys() | unsure))
            stream.uncertain.append((r, chains))
            stream.ambiguous += 1
            continue
        stream.edges.extend((s, r) for s in needed.values())
        carrier = _carrier(stream, r) if placed.alone else None
        if carrier is not None and proc_of[carrier] != q and t0[carrier] <= ends and \
                carrier not in needed.values():
            stream.edges.append((carrier, r))  # the write its last byte came with
        stream.matched += 1


def _unsure_writers(stream: _Stream, proc_of: list[int], q: int, r: int) -> set[int]:
    """Processes (other than ``q``) with a write that may or may not start before the
    last byte of read ``r``: a candidate whose latest possible start is not before
    the read's earliest possible end."""
    placed, size = stream.reads[r], stream.size
    least_end = placed.lo + size[r]
    found: set[int] = set()
    los = stream.cluster_los
    k = max(bisect_right(los, least_end) - 1, 0)
    stop = bisect_left(los, placed.hi)
    for cluster in stream.clusters[k:stop]:
        if placed.alone and _filled_by_then(stream, cluster, r):
            continue
        for s in cluster:
            if proc_of[s] != q and stream.t0[s] <= stream.t1[r] and \
                    stream.writes[s].hi - size[s] >= least_end:
                found.add(proc_of[s])
    return found


def _filled_by_then(stream: _Stream, cluster: list[int], r: int) -> bool:
    """Whether the writes of ``cluster`` begun before read ``r`` returned fill the
    pipe exactly from the cluster's start to the read's end (``r`` placed exactly).

    A write begun after the read returned puts its bytes behind those the read
    already took, so the bytes from the cluster's start to the read's end are
    all from writes begun before: where those add up to exactly that many, every
    one of them lies wholly before the read's end, however their brackets
    overlap. The usual case of a reader blocked on a pipe that several
    processes write at once (multiprocessing's resource tracker): each write
    wakes the read, brackets overlap under load, and this places them.
    """
    t0, t1, size = stream.t0, stream.t1, stream.size
    begun = sum(size[s] for s in cluster if t0[s] <= t1[r])
    return stream.writes[cluster[0]].lo + begun == stream.reads[r].hi


def _carrier(stream: _Stream, r: int) -> int | None:
    """The write that carried read ``r``'s last byte, where it is placed exactly."""
    last = stream.reads[r].hi - 1
    k = bisect_right(stream.cluster_los, last) - 1
    if k < 0 or len(stream.clusters[k]) != 1:
        return None
    s = stream.clusters[k][0]
    return s if stream.writes[s].hi > last else None


def _threads_at_once(m: Matching, ids: list[int]) -> bool:
    """Whether two calls of one process on one end ran at the same time (threads):
    its count then follows the order the calls returned, not the pipe's."""
    last_end: dict[int, int] = {}
    for t0, t1, p in sorted((*t, m.proc_of[i]) for i in ids if (t := bracket(m.events[i]))):
        if p in last_end and t0 <= last_end[p]:
            return True
        last_end[p] = max(t1, last_end.get(p, t1))
    return False


def _overlapping(spans: list[tuple[int, int]], procs: list[int]) -> bool:
    """Whether two processes' byte ranges overlap (they used one end at once)."""
    if len(set(procs)) < 2:
        return False
    reach, owner = 0, -1  # the furthest byte reached so far, and by whom
    for a, b, p in sorted((a, b, p) for (a, b), p in zip(spans, procs, strict=True) if b > a):
        if a < reach and p != owner:
            return True
        if b > reach:
            reach, owner = b, p
    return False


def _all_uncertain(m: Matching, sends: list[int], recvs: list[int], out: PipeResult) -> None:
    """Every receive after the latest not-later send of each writer (safe, counted)."""
    by_writer: dict[int, list[int]] = defaultdict(list)
    for s in sends:  # ids ascend: clock order within a process
        by_writer[m.proc_of[s]].append(s)
    chains_for: dict[int, tuple[tuple[int, ...], ...]] = {}
    for r in recvs:
        rp = m.proc_of[r]
        chains = chains_for.get(rp)
        if chains is None:
            others = [tuple(ids) for p, ids in by_writer.items() if p != rp]
            # a process that alone writes what it reads: its own clock orders them
            chains = chains_for[rp] = tuple(others) or (tuple(by_writer[rp]),)
        m.uncertain.append((r, chains))
    out.ambiguous += len(recvs)
