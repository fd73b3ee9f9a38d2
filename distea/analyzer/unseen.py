"""Connections that carried bytes the tracer did not see: ordered safely (DESIGN.md §4).

The tracer's detector (``distea/tracer/channels/unseen.py``) writes a SEND of
kind ``unseen`` when the kernel moved more bytes on a TCP connection than
the channels recorded: its channel is the connection's outgoing name
``L>P`` in the reporting process, its clock the moment of the check, and
``meta["lo"]`` the clock of the previous check, when nothing was unseen
yet. The bytes moved somewhere in that window ``(lo, clock]``.

Such a report is no message: it is taken out before matching and turned
into **possible edges**, one per direction with unseen bytes, between the
reporter and every process that recorded the other end of the connection
(events on ``L>P`` or ``P>L``, or a report of its own on ``P>L``). A
direction ``S → R`` has *send points* in ``S`` (the windows of ``S``'s
unseen sends, and its recorded sends on the channel) and *receive points*
in ``R`` (the windows of ``R``'s unseen receives, and its recorded receives
on the channel), each an interval ``(lo, hi]`` of clocks.

**Covered by a library's own records.** A report whose connection was
claimed by torch.distributed (``meta["via"]``: the process group whose
backend opened it while being created; see
:mod:`distea.tracer.channels.torch_distributed`) is the transport of that
group's collectives, whose order the torch channel records. It is taken
out (no possible edge, no problem line; a note says so) only when all of
this holds, else it stays a problem like any other:

- the other end's process is traced and reported unseen bytes on the same
  connection (reversed name), claimed for the same group: both ends are
  ranks that opened it while creating that group;
- no process of the run reported operations of that group that its hooks
  did not see (a ``"GROUP:unseen"`` torch record): every operation that can
  have moved bytes on it is recorded, in order.

Safe rule: impact that has reached ``S`` at clock ``s`` can leave by the
first send point ``x >= s``; the bytes sent then cannot be received before
``x`` in happens-before order, so the earliest receive point ``y`` in ``R``
that is not before ``(S, x)`` — ``y > V(S, x)[R]`` — is where impact may
arrive. Every real unseen transfer (sent at some ``x' >= x``, received at
some ``y'`` not before ``x'``) arrives at or after ``y``: nothing is
missed. Backward (``deps``), a point ``(R, y)`` may depend on ``S`` up to
its latest send point that is not after ``(R, y)``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from distea.analyzer.order import Order
from distea.model import MessageEvent

KIND = "unseen"
STREAM_KINDS = frozenset({"tcp", "unix", "ssl"})
Interval = tuple[int, int]
"""``(lo, hi]``: clocks after ``lo`` and at most ``hi``."""


@dataclass(frozen=True, slots=True)
class UnseenReport:
    """One check that found bytes the tracer had not recorded."""

    process: str
    clock: int
    lo: int
    channel: str
    """The connection's outgoing name in the reporting process, ``LOCAL>PEER``."""
    sent: int
    received: int
    at: str
    """``close``, ``periodic`` or ``exit``: when the check ran."""
    reason: str
    via: str = ""
    """The torch process group that claimed the connection at its creation, if any."""


@dataclass(frozen=True, slots=True)
class PossibleEdge:
    """Bytes may have gone from ``sender`` to ``receiver`` unseen on ``channel``."""

    sender: int
    receiver: int
    channel: str
    send_points: tuple[Interval, ...]
    recv_points: tuple[Interval, ...]

    def describe(self, keys: Sequence[str]) -> str:
        return f"{keys[self.sender]} → {keys[self.receiver]} on tcp {self.channel}"


@dataclass(slots=True)
class Unseen:
    """The unseen-traffic reports of a run and the possible edges they make."""

    reports: list[UnseenReport]
    edges: list[PossibleEdge]
    notes: list[str]
    covered: list[UnseenReport] = field(default_factory=list)
    """Reports of a torch group's own transport, whose operations were all recorded."""


def split_reports(messages: Mapping[str, Sequence[MessageEvent]]
                  ) -> tuple[dict[str, Sequence[MessageEvent]], list[UnseenReport]]:
    """Message events without the detector's reports, and the reports."""
    kept: dict[str, Sequence[MessageEvent]] = {}
    reports: list[UnseenReport] = []
    for key, events in messages.items():
        if not any(ev.kind == KIND for ev in events):
            kept[key] = events
            continue
        kept[key] = [ev for ev in events if ev.kind != KIND]
        for ev in events:
            if ev.kind == KIND:
                meta: dict[str, Any] = dict(ev.meta or {})
                reports.append(UnseenReport(
                    key, ev.clock, int(meta.get("lo", 0)), ev.channel,
                    int(meta.get("sent", 0)), int(meta.get("received", 0)),
                    str(meta.get("at", "")), str(meta.get("reason", "")),
                    str(meta.get("via") or "")))
    return kept, reports


def split_covered(reports: Sequence[UnseenReport],
                  messages: Mapping[str, Sequence[MessageEvent]],
                  ) -> tuple[list[UnseenReport], list[UnseenReport]]:
    """(kept, covered): the reports a torch group's records cover (module docstring)."""
    if not any(r.via for r in reports):
        return list(reports), []
    incomplete: set[str] = set()  # groups with operations the hooks did not see
    for events in messages.values():
        for ev in events:
            if ev.kind == "torch" and ev.meta and ev.meta.get("op") == "unseen":
                incomplete.add(ev.channel.rsplit(":", 1)[0])
    claimed = {(r.process, r.channel, r.via) for r in reports if r.via}
    kept: list[UnseenReport] = []
    covered: list[UnseenReport] = []
    for r in reports:
        peer_claims = {p for p, channel, via in claimed
                       if p != r.process and channel == _reverse(r.channel) and via == r.via}
        if r.via and r.via not in incomplete and peer_claims:
            covered.append(r)
        else:
            kept.append(r)
    return kept, covered


def covered_notes(covered: Sequence[UnseenReport]) -> list[str]:
    """One line per process group whose transport's bytes are covered."""
    by_group: dict[str, list[UnseenReport]] = defaultdict(list)
    for r in covered:
        by_group[r.via].append(r)
    return [f"{sum(r.sent + r.received for r in rs)} bytes on "
            f"{len({min(r.channel, _reverse(r.channel)) for r in rs})} tcp connection(s) "
            f"between ranks moved in C by torch.distributed's transport of process group "
            f"{group}, which opened them at its creation; every operation of the group was "
            "recorded, so they order nothing more (covered)"
            for group, rs in sorted(by_group.items())]


def inferred_reports(messages: Mapping[str, Sequence[MessageEvent]],
                     ends: Mapping[str, int], found: Sequence[UnseenReport] = (),
                     ) -> list[UnseenReport]:
    """Unseen sends that the receiving end proves: it read more bytes on a stream than
    any process recorded sending there, and a traced process holds the sending end.

    That is how a C transport's writes show when the detector could not check
    the connection (libuv closed it between two checks): the receiver's bytes
    are recorded, the sender's are not. The sender is any other process that
    recorded the connection's other direction; its window is its whole trace
    (when it sent is unknown), ``ends[key]`` its last clock. Bytes its own
    detector already reported (``found``) are not inferred again.
    """
    reported: dict[tuple[str, str], int] = defaultdict(int)
    for r in found:
        reported[(r.process, r.channel)] += r.sent
    sent_to: dict[str, int] = defaultdict(int)
    sent_kinds: dict[str, set[str]] = defaultdict(set)
    read_to: dict[str, dict[str, int]] = defaultdict(dict)  # channel -> receiver -> end
    read_kinds: dict[str, set[str]] = defaultdict(set)
    holders: dict[str, set[str]] = defaultdict(set)  # channel -> processes recording it
    for key, events in messages.items():
        for ev in events:
            if ev.kind not in STREAM_KINDS:
                continue
            holders[ev.channel].add(key)
            if ev.direction == "send":
                sent_to[ev.channel] = max(sent_to[ev.channel], ev.end)
                sent_kinds[ev.channel].add(ev.kind)
            else:
                mine = read_to[ev.channel]
                mine[key] = max(mine.get(key, 0), ev.end)
                read_kinds[ev.channel].add(ev.kind)
    reports = []
    for channel, readers in read_to.items():
        if len(read_kinds[channel] | sent_kinds[channel]) > 1:
            continue  # TLS plaintext at one end, ciphertext at the other: not comparable
        for reader, end in readers.items():
            missing = end - sent_to[channel]
            if missing <= 0:
                continue
            for sender in sorted(holders.get(_reverse(channel), set()) - {reader}):
                if reported[(sender, channel)] >= missing:
                    continue
                reports.append(UnseenReport(
                    sender, ends.get(sender, 0), 0, channel, missing, 0, "analysis",
                    f"its peer read {missing} bytes more than it recorded sending (a C "
                    "transport's write?)"))
    return reports


def _reverse(channel: str) -> str:
    local, _, peer = channel.partition(">")
    return f"{peer}>{local}"


def possible_edges(reports: Sequence[UnseenReport],
                   messages: Mapping[str, Sequence[MessageEvent]],
                   index: Mapping[str, int], keys: Sequence[str]) -> Unseen:
    """The possible edges of every direction some report found unseen bytes in."""
    if not reports:
        return Unseen([], [], [])
    names = {r.channel for r in reports} | {_reverse(r.channel) for r in reports}
    # (process, channel, direction) -> recorded clocks, for the channels reported only
    recorded: dict[tuple[int, str, str], list[int]] = defaultdict(list)
    for key, events in messages.items():
        p = index[key]
        for ev in events:
            if ev.kind in STREAM_KINDS and ev.channel in names:
                recorded[(p, ev.channel, ev.direction)].append(ev.clock)
    # (process, outgoing name) -> windows of unseen sends / receives
    sends: dict[tuple[int, str], list[Interval]] = defaultdict(list)
    recvs: dict[tuple[int, str], list[Interval]] = defaultdict(list)
    for r in reports:
        p = index[r.process]
        if r.sent:
            sends[(p, r.channel)].append((r.lo, r.clock))
        if r.received:
            recvs[(p, r.channel)].append((r.lo, r.clock))
    users: dict[str, set[int]] = defaultdict(set)  # channel name -> processes naming it
    for p, channel, _ in recorded:
        users[channel].add(p)
    for r in reports:
        users[r.channel].add(index[r.process])

    edges: list[PossibleEdge] = []
    notes: list[str] = []
    done: set[tuple[int, int, str]] = set()
    for r in reports:
        a = index[r.process]
        back = _reverse(r.channel)
        peers = sorted((users[r.channel] | users[back]) - {a})
        if not peers:
            notes.append(f"process {r.process}: {r.sent + r.received} bytes on tcp {r.channel} "
                         "moved unseen and no traced process recorded the other end: impact "
                         "cannot be followed across it")
        for b in peers:
            for s, rcv, channel in ((a, b, r.channel), (b, a, back)):
                if (s, rcv, channel) in done:
                    continue
                done.add((s, rcv, channel))
                unseen_out = sends.get((s, channel), [])
                unseen_in = recvs.get((rcv, _reverse(channel)), [])
                if not unseen_out and not unseen_in:
                    continue  # this direction was fully seen: matching pairs it
                send_points = unseen_out + [(c - 1, c) for c in recorded.get((s, channel, "send"),
                                                                            ())]
                recv_points = unseen_in + [(c - 1, c) for c in recorded.get((rcv, channel, "recv"),
                                                                           ())]
                if send_points and recv_points:
                    edges.append(PossibleEdge(s, rcv, channel, tuple(sorted(send_points)),
                                              tuple(sorted(recv_points))))
    return Unseen(list(reports), edges, notes)


def earliest(points: Sequence[Interval], clock: int) -> int | None:
    """The earliest clock at or after ``clock`` inside some interval, or None."""
    best: int | None = None
    for lo, hi in points:
        if hi >= clock:
            c = max(clock, lo + 1)
            if best is None or c < best:
                best = c
    return best


def latest(points: Sequence[Interval], clock: int) -> int | None:
    """The latest clock at or before ``clock`` inside some interval, or None."""
    best: int | None = None
    for lo, hi in points:
        if lo < clock:
            c = min(clock, hi)
            if best is None or c > best:
                best = c
    return best


def crossings(edges: Sequence[PossibleEdge], starts: Mapping[int, int], order: Order
              ) -> Iterator[tuple[int, int, PossibleEdge]]:
    """(receiver, earliest clock the impact may arrive at, edge) for every possible edge
    whose sender the impact has reached by one of its send points."""
    for e in edges:
        s = starts.get(e.sender)
        if s is None:
            continue
        x = earliest(e.send_points, s)
        if x is None:
            continue
        y = earliest(e.recv_points, order.vector_at(e.sender, x)[e.receiver] + 1)
        if y is not None:
            yield e.receiver, y, e


def backward(edges: Sequence[PossibleEdge], ends: Sequence[int], order: Order
             ) -> Iterator[tuple[int, int]]:
    """(sender, latest clock) that a dependency point ``ends[receiver]`` may have read from
    unseen: the latest send point not after it (before the sender's first receive that
    happens after that point)."""
    for e in edges:
        bound = latest(e.recv_points, ends[e.receiver])
        if bound is None:
            continue
        after = order.earliest_after(e.sender, e.receiver, bound)
        limit = after - 1 if after is not None else max(hi for _, hi in e.send_points)
        x = latest(e.send_points, limit)
        if x is not None and x > ends[e.sender]:
            yield e.sender, x
