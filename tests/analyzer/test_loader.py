"""The fast process-log loader against a straightforward reading of the same log.

``distea.traceformat._load_process`` reads logs with its own inlined loop.
The oracle here is the loader as it was written before that (kept verbatim
below): one record at a time from :func:`distea.traceformat.iter_records`.
Both must keep, skip and report exactly the same things on any log, damaged
or not: random records (well-formed, malformed, unknown, mistyped), torn at a
random byte or with garbage spliced in.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import distea.traceformat as tf
from distea.model import (
    CallEvent,
    ChannelLink,
    Execution,
    MessageEvent,
    Method,
    ProcessInfo,
    RunData,
    UntracedChild,
)
from distea.wire import FORMAT_VERSION, Tag, process_file_name


def reference_load_process(log: Path, data: RunData) -> None:
    """The loader as it was before the fast loop: iter_records, record by record."""
    problems = data.problems
    records = tf.iter_records(log, problems)
    first = next(records, None)
    if first is None:
        problems.append(f"{log.name}: empty process log")
        return
    if first[0] != Tag.HEADER or len(first) < 2 or not isinstance(first[1], dict):
        problems.append(f"{log.name}: does not start with a process header; skipped")
        return
    header = first[1]
    version = header.get("format")
    if isinstance(version, int) and version > FORMAT_VERSION:
        tf.check_version(version, str(log))  # raises: a newer tracer wrote this run
    if not (type(version) is int and 1 <= version <= FORMAT_VERSION) \
            or not isinstance(header.get("key"), str):
        problems.append(f"{log.name}: not a distea process log (format {version!r}); skipped")
        return
    interned = version >= 2  # format 2: messages name their channel by a declared number
    key = header["key"]
    if key in data.processes:
        problems.append(f"{log.name}: a second log for process {key}; skipped")
        return
    names: dict[int, str] = {}
    channels: dict[int, tuple[str, str]] = {}
    firsts: dict[str, int] = {}
    lasts: dict[str, int] = {}
    messages: list[MessageEvent] = []
    calls: list[CallEvent] = []
    stats: dict[str, Any] = {}
    end_reason: str | None = None
    # Plain ints (not the IntEnum) and inline type checks: this loop runs once per
    # record, millions of times for a --mode full run; damage raises and is skipped.
    t_last, t_send, t_recv, t_call, t_return = (int(Tag.LAST), int(Tag.SEND), int(Tag.RECV),
                                                int(Tag.CALL), int(Tag.RETURN))
    t_first, t_method, t_stats, t_end = (int(Tag.FIRST), int(Tag.METHOD), int(Tag.STATS),
                                         int(Tag.END))
    t_link, t_untraced, t_channel = int(Tag.LINK), int(Tag.UNTRACED), int(Tag.CHANNEL)
    malformed, first_malformed = 0, ""
    for rec in records:
        try:
            tag = rec[0]
            if tag in (t_call, t_return):
                _, mid, clock, thread = rec
                name = names[mid]
                if type(clock) is not int:
                    raise TypeError("clock")
                calls.append(CallEvent(key, name, clock, thread, tag == t_call))
                if clock > lasts.get(name, -1):
                    lasts[name] = clock
            elif tag in (t_send, t_recv):
                if interned:
                    _, clock, cid, start, end, mid, thread, meta = rec
                    kind, channel = channels[cid]
                else:
                    _, clock, kind, channel, start, end, mid, thread, meta = rec
                if (type(clock) is not int or type(start) is not int or type(end) is not int
                        or type(kind) is not str or type(channel) is not str):
                    raise TypeError("message fields")
                messages.append(
                    MessageEvent(
                        key, clock, "send" if tag == t_send else "recv", kind, channel,
                        start, end, names.get(mid), thread, meta,
                    )
                )
            elif tag in (t_last, t_first):
                _, mid, clock = rec
                name = names[mid]
                if type(clock) is not int:
                    raise TypeError("clock")
                if tag == t_first:
                    firsts.setdefault(name, clock)
                if clock > lasts.get(name, -1):
                    lasts[name] = clock
            elif tag == t_method:
                _, mid, module, qualname, file, firstline, lastline = rec
                if type(mid) is not int or type(module) is not str or type(qualname) is not str:
                    raise TypeError("method fields")
                name = f"{module}.{qualname}"
                names[mid] = name
                if name not in data.methods:  # most processes declare the same methods
                    data.methods[name] = Method(name, module, qualname, file, firstline,
                                                lastline)
            elif tag == t_channel:
                _, cid, kind, channel = rec
                if type(cid) is not int or type(kind) is not str or type(channel) is not str:
                    raise TypeError("channel fields")
                channels[cid] = (kind, channel)
            elif tag == t_stats:
                if not isinstance(rec[1], dict):
                    raise TypeError("STATS is not a map")
                stats = rec[1]
                if "role" in stats:
                    header = {**header, **{k: stats[k] for k in ("role", "rank", "world_size")}}
            elif tag == t_end:
                end_reason = str(rec[2])
            elif tag == t_link:
                data.links.append(ChannelLink(key, str(rec[1]), str(rec[2]), str(rec[3])))
            elif tag == t_untraced:
                data.untraced.append(UntracedChild(key, rec[1], tuple(rec[2]), str(rec[3])))
        except (KeyError, ValueError, TypeError, IndexError):
            if not malformed:
                first_malformed = f"{rec!r:.80}"
            malformed += 1
    if malformed:
        problems.append(f"{log.name}: {malformed} malformed records skipped "
                        f"(the first: {first_malformed})")
    if not isinstance(stats, dict):
        problems.append(f"{log.name}: malformed STATS record; counts ignored")
        stats = {}
    argv = header.get("argv", ())
    rank, world_size = header.get("rank"), header.get("world_size")
    token = header.get("parent_token")
    data.processes[key] = ProcessInfo(
        key=key,
        pid=tf._int(header.get("pid")),
        ppid=tf._int(header.get("ppid")),
        host=str(header.get("host", "")),
        argv=tuple(str(a) for a in argv) if isinstance(argv, list | tuple) else (),
        executable=str(header.get("executable", "")),
        python=str(header.get("python", "")),
        cwd=str(header.get("cwd", "")),
        start_method=str(header.get("start_method", "main")),
        parent_token=token if isinstance(token, str) else None,
        role=str(header.get("role", "")),
        rank=rank if isinstance(rank, int) else None,
        world_size=world_size if isinstance(world_size, int) else None,
        mode=str(header.get("mode", "compact")),
        started_ns=tf._int(header.get("started_ns")),
        end_reason=end_reason,
        dropped_events=tf._int(stats.get("dropped_events")),
        tracer_errors=tf._int(stats.get("tracer_errors")),
    )
    data.executions[key] = {
        name: Execution(key, name, first, max(first, lasts.get(name, first)))
        for name, first in firsts.items()
    }
    messages.sort(key=lambda m: m.clock)
    data.messages[key] = messages
    if calls:
        data.calls[key] = calls


# -- comparing the two loaders -----------------------------------------------------


def snapshot(data: RunData) -> dict[str, Any]:
    """Everything a load produces, meta included (MessageEvent equality skips it)."""
    return {
        "processes": data.processes,
        "methods": data.methods,
        "executions": data.executions,
        "messages": {k: [(e, e.meta) for e in evs] for k, evs in data.messages.items()},
        "message_order": {k: [e.clock for e in evs] for k, evs in data.messages.items()},
        "calls": data.calls,
        "untraced": data.untraced,
        "links": data.links,
        "problems": data.problems,
    }


def load_both(logs: list[Path]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What each loader makes of the logs (or the error it raised: a newer format)."""
    out = []
    for loader in (tf._load_process, reference_load_process):
        data = RunData(path="x", meta={})
        try:
            for log in logs:
                loader(log, data)
        except tf.TraceFormatError as exc:
            out.append({"error": str(exc)})
        else:
            out.append(snapshot(data))
    return out[0], out[1]


HEADER = {"format": FORMAT_VERSION, "key": "h:1:0", "pid": 1, "ppid": 0, "host": "h",
          "argv": ["python", "app.py"], "executable": "python", "python": "3.12", "cwd": "/",
          "start_method": "main", "parent_token": None, "role": "app", "rank": None,
          "world_size": None, "mode": "full", "started_ns": 5}

small = st.integers(-3, 12)
anything = st.one_of(st.none(), st.booleans(), small, st.floats(allow_nan=False),
                     st.text(max_size=3), st.lists(small, max_size=2),
                     st.dictionaries(st.text(max_size=2), small, max_size=2))
mids = st.one_of(st.integers(-1, 4), anything)
clocks = st.one_of(st.integers(-2, 40), st.integers(-2, 40), anything)
kinds = st.sampled_from(["tcp", "mp", "proc", 7, None])
channels = st.sampled_from(["a>b", "b>a", "mp:1", 3])
cids = st.one_of(st.integers(-1, 3), st.integers(0, 2), anything)
metas = st.one_of(st.none(), st.fixed_dictionaries({"fp": st.lists(small, max_size=2)}),
                  st.fixed_dictionaries({"fanout": st.booleans()}))

good_records = st.one_of(
    st.builds(lambda mid, mod, q: [Tag.METHOD, mid, mod, q, "/f.py", 1, 9],
              st.integers(-1, 4), st.sampled_from(["app", "pkg.mod"]),
              st.sampled_from(["f", "g", "C.m"])),
    st.builds(lambda t, mid, c: [t, mid, c], st.sampled_from([Tag.FIRST, Tag.LAST]),
              st.integers(-1, 4), st.integers(-2, 40)),
    st.builds(lambda t, mid, c, th: [t, mid, c, th], st.sampled_from([Tag.CALL, Tag.RETURN]),
              st.integers(-1, 4), st.integers(0, 40), st.integers(1, 2)),
    # messages in the layouts of format 1 (kind and channel inline) and format 2
    # (a declared channel number), so each format also meets the other's records
    st.builds(lambda t, c, k, ch, s, e, mid, meta: [t, c, k, ch, s, e, mid, 1, meta],
              st.sampled_from([Tag.SEND, Tag.RECV]), st.integers(0, 40), kinds, channels,
              st.integers(0, 9), st.integers(0, 12), mids, metas),
    st.builds(lambda t, c, cid, s, e, mid, meta: [t, c, cid, s, e, mid, 1, meta],
              st.sampled_from([Tag.SEND, Tag.RECV]), st.integers(0, 40), cids,
              st.integers(0, 9), st.integers(0, 12), mids, metas),
    st.builds(lambda cid, k, ch: [Tag.CHANNEL, cid, k, ch], cids, kinds, channels),
    st.builds(lambda d: [Tag.STATS, d], st.one_of(
        st.fixed_dictionaries({"dropped_events": small, "tracer_errors": small}),
        st.fixed_dictionaries({"role": st.text(max_size=3), "rank": small, "world_size": small}),
        st.fixed_dictionaries({"role": st.text(max_size=3)}), anything)),
    st.builds(lambda c, r: [Tag.END, c, r], small, st.sampled_from(["exit", "signal"])),
    st.builds(lambda pid, argv, r: [Tag.UNTRACED, pid, argv, r], small,
              st.one_of(st.lists(st.text(max_size=2), max_size=2), anything), anything),
    st.builds(lambda a, b: [Tag.LINK, "pipe", a, b], anything, anything),
)
bad_records = st.one_of(
    # right tag, wrong shape or types
    st.builds(lambda tag, rest: [tag, *rest], st.integers(-1, 13),
              st.lists(st.one_of(mids, clocks, kinds), max_size=9)),
    st.builds(lambda tag, rest: [tag, *rest], st.sampled_from([True, False, 2.0, "6", None]),
              st.lists(small, max_size=4)),
    # not a record at all: these stop the log
    st.one_of(st.just([]), small, st.text(max_size=2), st.just({"0": 1}), st.none()),
)
records = st.lists(st.one_of(good_records, good_records, good_records, bad_records),
                   max_size=40)
headers = st.one_of(
    st.just([Tag.HEADER, HEADER]), st.just([Tag.HEADER, HEADER]), st.just([Tag.HEADER, HEADER]),
    st.just([Tag.HEADER, {**HEADER, "format": 1}]), st.just([Tag.HEADER, {**HEADER, "format": 1}]),
    st.just([Tag.HEADER, {**HEADER, "format": 0}]), st.just([Tag.HEADER, {**HEADER, "key": 7}]),
    st.just([Tag.METHOD, 0, "app", "f", "/f.py", 1, 2]), st.just([Tag.HEADER]),
    st.just([Tag.HEADER, "not a map"]), st.just(7), st.just([]), st.just([False, HEADER]),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(header=headers, recs=records, cut=st.one_of(st.none(), st.integers(0, 2000)),
       garbage=st.one_of(st.none(), st.tuples(st.integers(0, 2000), st.binary(min_size=1,
                                                                               max_size=4))),
       twice=st.booleans())
def test_fast_loader_matches_record_by_record_reading(
    header: Any, recs: list[Any], cut: int | None, garbage: tuple[int, bytes] | None,
    twice: bool,
) -> None:
    blob = b"".join(msgpack.packb(r) for r in [header, *recs])
    if garbage is not None:
        at = garbage[0] % (len(blob) + 1)
        blob = blob[:at] + garbage[1] + blob[at:]
    if cut is not None:
        blob = blob[:cut % (len(blob) + 1)]
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / process_file_name("h:1:0")
        log.write_bytes(blob)
        fast, slow = load_both([log, log] if twice else [log])
    assert fast == slow


def message_record(version: int, tag: int, clock: int, start: int, end: int, mid: int,
                   meta: dict[str, Any] | None) -> list[Any]:
    """A message on ("tcp", "a>b"), channel number 0 in format 2 (declared by CHANNEL_0)."""
    channel = [0] if version >= 2 else ["tcp", "a>b"]
    return [tag, clock, *channel, start, end, mid, 1, meta]


CHANNEL_0 = [Tag.CHANNEL, 0, "tcp", "a>b"]


@pytest.mark.parametrize("version", [1, FORMAT_VERSION])
def test_fast_loader_on_big_chunks(tmp_path: Path, version: int) -> None:
    """Records that straddle the reader's 1 MiB chunks, out-of-order clocks, a torn end."""
    recs: list[Any] = [[Tag.HEADER, {**HEADER, "format": version}],
                       [Tag.METHOD, 0, "app", "f", "/f.py", 1, 2], CHANNEL_0]
    for i in range(60_000):
        clock = i if i % 997 else i - 500  # now and then one arrives late
        recs.append(message_record(version, Tag.SEND if i % 2 else Tag.RECV, clock, i * 10,
                                   i * 10 + 10, 0, {"fp": [i % 7]} if i % 3 else None))
        if i % 1000 == 0:
            recs.append([Tag.LAST, 0, clock])
            if i == 50_000:
                recs.append(["garbage tag", 1])
    blob = b"".join(msgpack.packb(r) for r in recs)
    log = tmp_path / process_file_name("h:1:0")
    log.write_bytes(blob[:-3])
    fast, slow = load_both([log])
    assert fast == slow
    assert len(fast["messages"]["h:1:0"]) > 49_000
    assert fast["message_order"]["h:1:0"] == sorted(fast["message_order"]["h:1:0"])


def test_format_1_and_format_2_logs_read_alike(tmp_path: Path) -> None:
    """A run an earlier distea wrote (channels inline) loads as the same messages."""
    loaded = []
    for version in (1, 2):
        recs: list[Any] = [[Tag.HEADER, {**HEADER, "format": version}],
                           [Tag.METHOD, 0, "app", "f", "/f.py", 1, 2], CHANNEL_0]
        recs += [message_record(version, Tag.SEND, 3, 0, 10, 0, None),
                 message_record(version, Tag.RECV, 4, 10, 25, -1, {"fp": 9})]
        log = tmp_path / f"v{version}" / process_file_name("h:1:0")
        log.parent.mkdir()
        log.write_bytes(b"".join(msgpack.packb(r) for r in recs))
        data = RunData(path="x", meta={})
        tf._load_process(log, data)
        assert data.problems == []
        loaded.append([(e.direction, e.kind, e.channel, e.start, e.end, e.method, e.meta)
                       for e in data.messages["h:1:0"]])
    assert loaded[0] == loaded[1] == [("send", "tcp", "a>b", 0, 10, "app.f", None),
                                      ("recv", "tcp", "a>b", 10, 25, None, {"fp": 9})]


@pytest.mark.parametrize("blob", [b"", b"\x92\x00", b"\xc1", msgpack.packb([Tag.HEADER, HEADER])])
def test_fast_loader_on_empty_and_torn_logs(tmp_path: Path, blob: bytes) -> None:
    log = tmp_path / process_file_name("h:1:0")
    log.write_bytes(blob)
    fast, slow = load_both([log])
    assert fast == slow


def test_fast_loader_on_unreadable_log(tmp_path: Path) -> None:
    log = tmp_path / "missing.msgpack"
    fast, slow = load_both([log])
    assert fast == slow
    assert "cannot be read" in fast["problems"][0]


def test_fast_loader_refuses_newer_format(tmp_path: Path) -> None:
    log = tmp_path / process_file_name("h:1:0")
    log.write_bytes(msgpack.packb([Tag.HEADER, {**HEADER, "format": FORMAT_VERSION + 1}]))
    with pytest.raises(tf.TraceFormatError, match="newer"):
        tf._load_process(log, RunData(path="x", meta={}))
