"""Why a receive has no recorded send: the reasons the recorded run can tell.

An external receive orders nothing, so every query's problem lines say how
many there are; this module says *why* each one is external, from what the
run holds — whether anything was recorded sending on its channel at all,
whether the sender wrote in another layer (TLS), whether the bytes were
beyond what was recorded, whether a process never said it exited. Receives
that :mod:`distea.analyzer.children` explains (a non-Python child's output
and exit) are not external at all and never reach this module.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from distea.analyzer.match_unseen import UNSEEN_KIND
from distea.analyzer.matching import STREAM_KINDS, Matching
from distea.analyzer.order import Order
from distea.model import ChannelLink

LAYERS = {"tcp": ("ssl",), "unix": ("ssl",), "ssl": ("tcp", "unix")}
"""A TLS connection is recorded as plaintext (``ssl``) where ``ssl.SSLSocket`` moves the
bytes and as ciphertext where asyncio's memory BIO does: the two do not pair."""
UNCOUNTED_KINDS = frozenset({"shm", "file"})
"""Receives never counted external: shared-memory attaches (ordered at query time) and
file reads (a file no other process wrote is no message)."""
REASONS_SHOWN = 6
"""Reasons named in the problem line; the rest are counted."""


def external_reasons(m: Matching, order: Order, links: Sequence[ChannelLink] = ()
                     ) -> Counter[str]:
    """``"KIND: why"`` → number of external receives, for every external receive."""
    paired = {r for _, r in m.edges} | {r for _, recvs in m.hubs for r in recvs} | {
        r for r, _ in m.uncertain}
    paired -= {r for r in order.demoted_receives if not order.sources.get(r)}
    link_of: dict[str, str] = {}
    for link in links:
        link_of[link.end_a], link_of[link.end_b] = link.end_b, link.end_a
    sent_on: set[tuple[str, str]] = set()
    unseen: set[str] = set()
    for ev in m.events:
        if ev.direction == "send":
            name = link_of.get(ev.channel, ev.channel)
            if ev.kind == UNSEEN_KIND:
                unseen.add(name)
            else:
                sent_on.add((ev.kind, name))
    explained = m.explained
    reasons: Counter[str] = Counter()
    for r, ev in enumerate(m.events):
        if ev.direction != "recv" or r in paired or r in explained:
            continue
        if ev.kind in UNCOUNTED_KINDS:
            continue
        why = _why(r, ev.kind, ev.channel, order, sent_on, unseen)
        if why:
            reasons[f"{ev.kind}: {why}"] += 1
    return reasons


def _why(r: int, kind: str, channel: str, order: Order, sent_on: set[tuple[str, str]],
         unseen: set[str]) -> str | None:
    """The reason of one unpaired receive; None if it is ordered all the same."""
    if channel in unseen:
        if (kind, channel) in sent_on:
            return None  # its own process's sends order it: matched, with no edge
        return "only unseen writes (signal wakeup fd)"
    if kind == "exit":
        return "the process left no exit record (killed, or its last records lost)"
    if r in order.demoted_receives:
        return "pairing demoted (closed a cycle), no earlier send"
    if kind == "signal":  # one channel per host and number: the sends name their targets
        return "no traced process sent it to this one (the kernel, a terminal, or untraced)"
    if (kind, channel) in sent_on and kind in STREAM_KINDS | {"pipe"}:
        return "bytes beyond the recorded sends (unseen write or lost records)"
    if (kind, channel) in sent_on:
        return ("more receives than recorded sends (a sender in C, such as a ZeroMQ proxy "
                "or socket monitor, or lost records)")
    if any((layer, channel) in sent_on for layer in LAYERS.get(kind, ())):
        return "the sender recorded this connection in another layer (TLS)"
    if kind in STREAM_KINDS and ">" in channel:
        return f"untraced peer {channel.split('>', 1)[0]}"
    if kind == "pipe":
        return ("no traced writer (an untraced process, C code, or a pipe from outside "
                "the run)")
    return "no traced sender (peer untraced or outside the run)"


def problem_line(count: int, reasons: Counter[str]) -> str:
    """The problem line of ``count`` external receives, with their reasons."""
    ranked = sorted(reasons.items(), key=lambda item: (-item[1], item[0]))
    named = "; ".join(f"{n} {why}" for why, n in ranked[:REASONS_SHOWN])
    more = len(ranked) - REASONS_SHOWN
    return (f"{count} receives have no recorded send; they order nothing"
            + (f" — {named}" if named else "")
            + (f"; and {more} more reasons (distea show --json)" if more > 0 else ""))
