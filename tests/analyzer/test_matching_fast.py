"""The matcher against the version it replaced, on random message events.

Random processes, channel kinds (streams, lifecycle, message kinds, torch
collectives, an unknown kind), channels shared in both directions, byte
ranges that restart (generations) or overlap, fingerprints, fan-out sends,
ZeroMQ routing ids and LINKed channel ends: :func:`distea.analyzer.matching.match`
must give exactly what the reference (tests/analyzer/reference_matching.py)
gives — the same edges, hubs and uncertain receives in the same order, the
same counts per kind and the same notes.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distea.analyzer.matching import Matching, match
from distea.model import ChannelLink, MessageEvent, ProcessInfo
from tests.analyzer import reference_matching

KINDS = ["tcp", "unix", "mp", "mp", "zmq", "zmq", "udp", "unixgram", "proc", "exit", "torch",
         "weird"]
"""Pipes are paired by their own module (tests/analyzer/test_match_pipes.py), not here."""
CHANNELS = ["a>b", "b>a", "q", "tcp://h:1 bind>connect", "tcp://h:1 connect>bind", "h:1"]

metas = st.one_of(
    st.none(), st.none(),
    st.fixed_dictionaries({"fp": st.one_of(st.integers(0, 2), st.lists(st.integers(0, 2),
                                                                        max_size=2))}),
    st.fixed_dictionaries({"fp": st.integers(0, 2), "fanout": st.booleans()}),
    st.fixed_dictionaries({"fp": st.integers(0, 1), "peer": st.sampled_from(["x", "y"])}),
    st.fixed_dictionaries({"peer": st.sampled_from(["x", "y"])}),
    st.fixed_dictionaries({"role": st.sampled_from(["all", "root", "leaf", ""]),
                           "op": st.just("all_reduce")}),
)


@st.composite
def runs(draw: st.DrawFn) -> tuple[dict[str, list[MessageEvent]], list[ChannelLink],
                                   dict[str, ProcessInfo] | None]:
    n = draw(st.integers(1, 4))
    keys = [f"h:{p}:0" for p in range(n)]
    # a few kinds and channels per run, so that groups have several events
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=2))
    channels = draw(st.lists(st.sampled_from(CHANNELS), min_size=1, max_size=2))
    messages: dict[str, list[MessageEvent]] = {}
    for key in keys:
        evs = []
        clock = 0
        offsets: dict[tuple[str, str, str], int] = {}
        for _ in range(draw(st.integers(0, 12))):
            clock += draw(st.integers(0, 2))
            direction = draw(st.sampled_from(["send", "recv"]))
            kind = draw(st.sampled_from(kinds))
            channel = draw(st.sampled_from(channels))
            if draw(st.integers(0, 5)):  # mostly contiguous per channel end, as recorded
                start = offsets.get((direction, kind, channel), 0)
            else:
                start = draw(st.integers(0, 12))
            size = draw(st.sampled_from([1, 1, 3, 0])) if kind in ("tcp", "unix") else 1
            offsets[(direction, kind, channel)] = start + size
            evs.append(MessageEvent(key, clock, direction, kind, channel, start, start + size,
                                    None, 1, draw(metas)))
        messages[key] = evs
    links = [ChannelLink(keys[0], "pipe", a, b)
             for a, b in draw(st.lists(st.tuples(st.sampled_from(CHANNELS),
                                                 st.sampled_from(CHANNELS)), max_size=2))]
    processes = None
    if draw(st.booleans()):
        processes = {k: ProcessInfo(k, p, 0, "h", (), "", "", "", "main", None, "", None, None,
                                    "compact", draw(st.integers(0, 3)))
                     for p, k in enumerate(keys)}
    return messages, links, processes


def fields(m: Matching) -> dict[str, Any]:
    return {
        "process_keys": m.process_keys, "events": m.events, "offsets": m.offsets,
        "proc_of": m.proc_of, "edges": m.edges, "hubs": m.hubs, "uncertain": m.uncertain,
        "counts": (m.matched, m.ambiguous, m.external, m.unmatched_sends),
        "by_kind": list(m.by_kind.items()), "notes": m.notes,
    }


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=runs())
def test_matcher_matches_the_reference(run: Any) -> None:
    messages, links, processes = run
    assert fields(match(messages, links, processes)) == \
        fields(reference_matching.match(messages, links, processes))
