"""Channels that something distea cannot see writes to: paired without their offsets.

A tracer marks such a channel with a SEND of kind ``untrusted`` (the signal
wakeup descriptor: :mod:`distea.tracer.channels.wakeup`), naming it as its
sends name it. Unseen bytes shift the reader's offsets ahead of the
writers', so a receive of ``[a, b)`` no longer tells which recorded send
carried its bytes; it may even have read only unseen bytes. No receive of a
marked channel is therefore paired by offsets: where other processes sent
on it, it is uncertain with all their sends as candidates (the order sweep
keeps, per sender, the latest one that is not causally after the receive:
safe whichever carried the bytes); where only its own process did (asyncio's
self-pipe), that process's clock already orders it exactly; with no recorded
send it is external. One problem line per marked channel says so and why.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distea.analyzer.matching import Matching

UNSEEN_KIND = "untrusted"


@dataclass(slots=True)
class Unseen:
    """Why a channel (as its receiving end names it) cannot be paired by offsets, and
    what became of its receives."""

    why: str
    recvs: int = 0
    ambiguous: int = 0
    own: int = 0


def unseen_why(meta: object) -> str:
    why = meta.get("why") if isinstance(meta, dict) else None
    return str(why or "written by something distea cannot see")


def match_unseen(m: Matching, sends: list[int], recvs: list[int], unseen: Unseen
                 ) -> tuple[int, int]:
    """Pair the receives of a marked channel (module docstring); return how many are
    (matched, ambiguous). A receive whose every recorded writer is its own process
    is ordered exactly by that process's clock, whichever write it read: matched,
    with no edge. The others are uncertain over the other processes' sends, or
    external where there is no recorded send."""
    by_proc: dict[int, list[int]] = {}
    for s in sends:
        by_proc.setdefault(m.proc_of[s], []).append(s)
    ambiguous = own = 0
    for r in recvs:
        rp = m.proc_of[r]
        chains = tuple(tuple(ids) for p, ids in by_proc.items() if p != rp)
        if chains:
            m.uncertain.append((r, chains))
            ambiguous += 1
        elif rp in by_proc:
            own += 1
    unseen.recvs += len(recvs)
    unseen.ambiguous += ambiguous
    unseen.own += own
    return own, ambiguous


def unseen_notes(unseen: dict[tuple[str, str], Unseen]) -> list[str]:
    """One problem line per marked channel that carried receives; channels of one kind
    and reason whose every receive is ordered exactly share one (each asyncio event
    loop has its own self-pipe: CPython's ``test_asyncio.test_subprocess`` made 54)."""
    lines = []
    exact: dict[tuple[str, str], list[str]] = defaultdict(list)
    for (kind, channel), u in sorted(unseen.items()):
        if u.recvs and u.own == u.recvs:
            exact[(kind, u.why)].append(channel)
    for (kind, channel), u in sorted(unseen.items()):
        if not u.recvs or (len(exact.get((kind, u.why), ())) > 1 and u.own == u.recvs):
            continue
        lines.append(
            f"{kind} channel {channel!r}: {u.why}, unseen by distea; its {u.recvs} "
            f"receive(s) are not paired by byte offsets: {u.own} have only their own "
            f"process's sends as writers (ordered exactly by its clock), {u.ambiguous} are "
            "ordered after every other process's send on it that is not after them (safe, "
            f"less precise), {u.recvs - u.own - u.ambiguous} have no recorded send")
    for (kind, why), channels in sorted(exact.items()):
        if len(channels) > 1:
            recvs = sum(unseen[(kind, c)].recvs for c in channels)
            lines.append(
                f"{len(channels)} {kind} channels ({channels[0]!r}, ...): {why}, unseen by "
                f"distea; their {recvs} receives are not paired by byte offsets: each has "
                "only its own process's sends as writers (ordered exactly by its clock)")
    return lines
