"""Pair pipe reads with pipe writes by byte offsets (kind ``pipe``, DESIGN.md §4).

A pipe is one byte stream per inode (channel ``HOST:pipe:INODE``), and each
process counts the bytes it wrote to and read from it
(:mod:`distea.tracer.channels.pipes`). A receive of bytes ``[a, b)`` happens
after the send that carried byte ``b - 1``, as on TCP; one write read as
header + body, or two writes read at once, pair all the same.

Per-process counts are one stream only when the processes took turns: a
forked child that took over an end goes on counting where its parent
stopped, so the writers' ranges (and the readers') are disjoint. Where they
overlap, several processes used one end at once (a parent and its forked
children all printing to one stdout pipe, two children started on one
pipe) and nobody knows how their bytes interleaved: every receive of that
pipe is then uncertain, ordered after the latest send of every other
writer that is not causally after it (safe). The same holds when a reader
got bytes that no recorded write carried, or that its own process wrote
only later: a writer distea did not see (a non-Python child, a C extension,
a C signal handler writing a wakeup byte) shares the pipe and shifts every
offset, so no offset is trusted and a note names the pipe. A pipe with reads but no
recorded write at all is external (its writer was not traced).

Runs recorded before pipes were streams (the message index in
``start``/``end``, the byte range in ``meta["bytes"]``) are read through that
byte range.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distea.analyzer.matching import Matching
    from distea.model import MessageEvent

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


def match_pipe(m: Matching, sends: list[int], recvs: list[int]) -> PipeResult:
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
            _overlapping(recv_spans, [proc_of[r] for r in recvs]):
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
        m.notes.append(f"pipe {channel}: {unseen} reads got bytes that no recorded write "
                       "carried before them (a writer distea did not see: a non-Python "
                       "child, a C extension, a signal handler?); its receives are ordered "
                       "safely, not by offsets")
        _all_uncertain(m, sends, recvs, out)
        return out
    m.edges.extend(pairs)
    out.matched = len(pairs)
    read_to = max(b for _, b in recv_spans)
    out.unmatched_sends = sum(1 for a, b in send_spans if b > a and a >= read_to)
    return out


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
