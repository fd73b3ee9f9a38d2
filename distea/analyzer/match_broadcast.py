"""UDP broadcast and multicast: one send, a receive at every socket bound to its port.

A datagram channel is named by its destination (``HOST:PORT``), which a
receiver names by the address it is bound to. A broadcast or multicast
datagram is sent to an address no receiver is bound to (``255.255.255.255``,
``10.0.0.255``, ``239.1.2.3``) and arrives at every socket on that port, so
the tracer writes such sends on ``*:PORT`` with ``meta["fanout"]``
(:mod:`distea.tracer.channels.datagrams`), and here they join every UDP
receive group of that port, beside the unicast sends to it. The usual
message rule then pairs them (fingerprint class, FIFO per sender, fanout
aligned with each receiver separately, uncertain where several senders could
have sent or datagrams were lost): a receive that could be a broadcast or a
unicast of the same look is uncertain, never wrongly certain.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

BROADCAST_PREFIX = "*:"
"""Written by the tracer (``datagrams.BROADCAST_PREFIX``); the analyzer never imports it."""

Group = tuple[list[int], list[int]]


def port_of(channel: str) -> str:
    return channel.rsplit(":", 1)[-1]


def split_broadcasts(groups: dict[tuple[str, str], Group]) -> dict[str, list[int]]:
    """Take the UDP broadcast groups out of ``groups``: port -> their send ids.

    Receives are never recorded on a ``*:PORT`` channel, so those groups hold sends only.
    """
    ports: dict[str, list[int]] = {}
    for key in [k for k in groups if k[0] == "udp" and k[1].startswith(BROADCAST_PREFIX)
                and not groups[k][1]]:
        ports.setdefault(port_of(key[1]), []).extend(groups.pop(key)[0])
    return ports


def pair_port(edges: list[tuple[int, int]],
              uncertain: list[tuple[int, tuple[Sequence[int], ...]]],
              broadcast: list[int], unicast: list[Group],
              pair: Callable[[list[int], list[int]], None]) -> int:
    """Pair one port's receive groups, each with its own unicast sends plus the
    broadcasts; ``pair(sends, recvs)`` is the message rule, which appends to
    ``edges`` and ``uncertain``. Returns how many of the sends no receive could
    have read, each counted once however many groups it was offered to."""
    edges_before, uncertain_before = len(edges), len(uncertain)
    all_sends = set(broadcast)
    for sends, recvs in unicast:
        all_sends.update(sends)
        pair(sorted(sends + broadcast), recvs)
    read = {s for s, _ in edges[edges_before:]}
    for _, chains in uncertain[uncertain_before:]:
        for chain in chains:
            read.update(chain)
    return len(all_sends - read)
