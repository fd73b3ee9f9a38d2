"""Channels that something distea cannot see writes to: paired without their offsets.

A tracer marks such a channel with a SEND of kind ``unseen`` (the signal
wakeup descriptor: :mod:`distea.tracer.channels.wakeup`), naming it as its
sends name it. Unseen bytes shift the reader's offsets ahead of the
writers', so a receive of ``[a, b)`` no longer tells which recorded send
carried its bytes; it may even have read only unseen bytes. Each receive of
a marked channel is therefore uncertain, with every recorded send of the
channel as a candidate (the order sweep keeps, per sender, the latest one
that is not causally after the receive: safe whichever carried the bytes),
or external where the channel has no recorded send at all. One problem line
per marked channel says so and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distea.analyzer.matching import Matching

UNSEEN_KIND = "unseen"


@dataclass(slots=True)
class Unseen:
    """Why a channel (as its receiving end names it) cannot be paired by offsets."""

    why: str
    recvs: int = 0
    ambiguous: int = 0


def unseen_why(meta: object) -> str:
    why = meta.get("why") if isinstance(meta, dict) else None
    return str(why or "written by something distea cannot see")


def match_unseen(m: Matching, sends: list[int], recvs: list[int], unseen: Unseen) -> int:
    """Make every receive uncertain over the channel's sends (module docstring); return
    how many were (the rest are external)."""
    by_proc: dict[int, list[int]] = {}
    for s in sends:
        by_proc.setdefault(m.proc_of[s], []).append(s)
    chains_all = {p: tuple(ids) for p, ids in by_proc.items()}
    ambiguous = 0
    for r in recvs:
        rp = m.proc_of[r]
        chains = tuple(c for p, c in chains_all.items() if p != rp) or \
            tuple(c for p, c in chains_all.items() if p == rp)
        if chains:
            m.uncertain.append((r, chains))
            ambiguous += 1
    unseen.recvs += len(recvs)
    unseen.ambiguous += ambiguous
    return ambiguous


def unseen_notes(unseen: dict[tuple[str, str], Unseen]) -> list[str]:
    """One problem line per marked channel that carried receives."""
    return [f"{kind} channel {channel!r}: {u.why}, unseen by distea; "
            f"its {u.recvs} receive(s) are not paired by byte offsets: {u.ambiguous} ordered "
            f"after every send on it that is not after them (safe, less precise), "
            f"{u.recvs - u.ambiguous} with no recorded send (only unseen writes)"
            for (kind, channel), u in sorted(unseen.items()) if u.recvs]
