"""Stream connections recorded at two levels: TLS plaintext at one end, raw bytes at the other.

Both ends of a TLS connection record its plaintext, kind ``ssl``
(``ssl.SSLSocket``, asyncio's TLS, uvloop's boundary), so byte offsets
agree. An end whose TLS distea does not tie to its connection (a library
running ``ssl.SSLObject`` over its own socket, a trace from an older
distea) records the ciphertext its socket moves
instead, kind ``tcp`` (or ``unix``), on the same channel name. Offsets of
the two levels mean different bytes, so where a channel carries sends or
receives of ``ssl`` and of another stream kind, a receive that finds no
carrier in its own kind is not paired by offsets: it is uncertain over every send on
the channel from the other processes (the order sweep keeps, per sender,
the latest one not causally after it: safe whichever carried its bytes);
where the other end is the receiver's own process (a test suite's client
and server threads), that process's clock already orders them.
Receives that do find their carrier in their own kind stay exact (the
plaintext before a STARTTLS upgrade, recorded alike at both ends). One
problem line per such channel says so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distea.analyzer.matching import Matching

TLS_KIND = "ssl"


@dataclass(slots=True)
class MixedChannel:
    """One channel name with stream events of several kinds, and what became of it."""

    kinds: set[str] = field(default_factory=set)
    unpaired: int = 0
    """Receives with no carrier in their own kind, ordered over the other end's sends."""
    own: int = 0
    """Of those, receives whose other end is their own process: its clock orders them."""
    external: int = 0
    """Of those, receives with no send on the channel at all."""


def mixed_channels(groups: Iterable[tuple[str, str]], stream_kinds: frozenset[str]
                   ) -> dict[str, MixedChannel]:
    """Channel names that carry TLS plaintext (``ssl``) and another stream kind."""
    kinds: dict[str, set[str]] = defaultdict(set)
    for kind, channel in groups:
        if kind in stream_kinds:
            kinds[channel].add(kind)
    return {channel: MixedChannel(ks) for channel, ks in kinds.items()
            if len(ks) > 1 and TLS_KIND in ks}


def order_unpaired(m: Matching, recvs: list[int], sends: list[int], mixed: MixedChannel
                   ) -> tuple[int, int]:
    """Make each receive uncertain over the sends of other processes (all kinds of the
    channel); return how many became uncertain and how many need no edge: the other
    end is their own process (both ends in one process, as in a test suite), whose
    clock orders its sends before them (``Matching.explained``). The rest have no
    send on the channel at all."""
    by_proc: dict[int, list[int]] = defaultdict(list)
    for s in sorted(sends):  # ids are clock order within a process
        by_proc[m.proc_of[s]].append(s)
    ambiguous = own = 0
    for r in recvs:
        rp = m.proc_of[r]
        chains = tuple(tuple(ids) for p, ids in by_proc.items() if p != rp)
        mixed.unpaired += 1
        if chains:
            m.uncertain.append((r, chains))
            ambiguous += 1
        elif rp in by_proc:
            m.explained.add(r)
            mixed.own += 1
            own += 1
        else:
            mixed.external += 1
    return ambiguous, own


def mixed_notes(mixed: dict[str, MixedChannel]) -> list[str]:
    """One problem line per channel whose receives could not all be paired by offsets."""
    return [f"stream channel {channel!r} was recorded as {' and '.join(sorted(mc.kinds))}: "
            "TLS plaintext at one end, the bytes on the wire at the other (a TLS library "
            "distea does not tie to its connection, or a trace from an older distea); "
            f"{mc.unpaired} receive(s) are not paired by byte offsets: "
            f"{mc.unpaired - mc.own - mc.external} are ordered after every send of the "
            "other end that is not after them (safe, less precise), "
            + (f"{mc.own} have the other end in their own process (ordered by its clock), "
               if mc.own else "")
            + f"{mc.external} have no recorded send"
            for channel, mc in sorted(mixed.items()) if mc.unpaired]
