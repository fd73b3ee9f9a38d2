"""Shared multiprocessing queues paired exactly, by the pipe's own FIFO order.

A ``Queue``, ``SimpleQueue``, ``JoinableQueue`` or ``Pool`` task/result
queue is one pipe that several processes write and several read. Per-sender
FIFO cannot tell which reader got which message when payloads repeat (every
worker's ``None``, every task of one function), so a queue was mostly
ambiguous. But the pipe itself is one FIFO: the k-th message read from it is
the k-th message written to it. What is needed is the global order of the
writes and of the reads, and the tracer records it (``meta["t"]`` in
:mod:`distea.tracer.channels.multiprocessing`): every message moved within a
bracket ``[t0, t1]`` of ``CLOCK_MONOTONIC`` readings taken around the
``Connection`` call, inside the queue's lock.

Why the order of brackets is the pipe's order. On one host
``CLOCK_MONOTONIC`` is one clock for every process, and readings of it never
go back: if a reading returned a larger value than another, it was taken
later. So when write A's bracket ends before write B's begins
(``A.t1 < B.t0``, strictly), every byte of A entered the pipe before the
reading ``A.t1``, which came before the reading ``B.t0``, before any byte of
B: A is ahead of B in the pipe. The same holds for reads. A queue's writes
are serialized by its ``_wlock`` (the feeder threads of every process) and
its reads by ``_rlock``; the brackets are taken inside those locks, so they
never overlap. This module does not trust that: it checks it, and a channel
whose brackets overlap (writers without a lock) falls back to the safe rule.

A channel is paired this way only when all of this holds, else
:func:`pairs_by_brackets` returns None and the caller's safe rule
(fingerprint classes, FIFO per sender, uncertain where several could have
sent) applies:

- every event on it carries a bracket (a pipe or socket-pair end; older
  traces carry none);
- every process with an event on it ran on one host, and none of them lost
  records (killed before its last flush, dropped events): a lost read or
  write would shift every later pair;
- the writes' brackets are pairwise disjoint, and so are the reads';
- there are no more reads than writes, the k-th read has the k-th write's
  fingerprint, and its bracket does not end before that write's begins.

What this cannot see is the same as for every FIFO rule: a process that is
not traced writing to or reading from the queue (it is reported as
untraced), a read that failed half-way through a message (the queue is
broken then), and a process killed (SIGKILL) after it read from the queue
but before its next flush, when its log holds no event on that queue at all
(it is reported as "ended without a final flush"; had it recorded any event
on the queue, the queue falls back to the safe rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from distea.analyzer.brackets import bracket, one_host_nothing_lost
from distea.model import MessageEvent, ProcessInfo


def pairs_by_brackets(events: Sequence[MessageEvent], proc_of: Sequence[int],
                      process_keys: Sequence[str], sends: list[int], recvs: list[int],
                      processes: Mapping[str, ProcessInfo] | None,
                      ) -> list[tuple[int, int]] | None:
    """(write, read) pairs of one queue, the k-th read with the k-th write; None if
    they cannot be shown to be exact (the module docstring lists the conditions).

    Event ``i`` was recorded by process ``process_keys[proc_of[i]]``.
    """
    if not recvs or processes is None:
        return None
    sends_by_time = _by_time(events, sends)
    recvs_by_time = _by_time(events, recvs)
    if sends_by_time is None or recvs_by_time is None or len(recvs_by_time) > len(sends_by_time):
        return None
    owners = {process_keys[p] for p in {proc_of[i] for i in sends} | {proc_of[i] for i in recvs}}
    if not one_host_nothing_lost(owners, processes):
        return None
    pairs: list[tuple[int, int]] = []
    for (_r0, r1, r), (s0, _s1, s) in zip(recvs_by_time, sends_by_time, strict=False):
        if r1 <= s0 or _fp(events[r]) != _fp(events[s]):
            return None
        pairs.append((s, r))
    return pairs


def _by_time(events: Sequence[MessageEvent], ids: list[int]
             ) -> list[tuple[int, int, int]] | None:
    """``(t0, t1, id)`` in bracket order; None if one is missing or two overlap."""
    brackets: list[tuple[int, int, int]] = []
    for i in ids:
        t = bracket(events[i])
        if t is None:
            return None
        brackets.append((t[0], t[1], i))
    brackets.sort()
    previous_end = None
    for t0, t1, _ in brackets:
        if previous_end is not None and t0 <= previous_end:
            return None
        previous_end = t1
    return brackets


def _fp(ev: MessageEvent) -> object:
    fp = ev.meta.get("fp") if ev.meta else None
    return tuple(fp) if isinstance(fp, list) else fp
