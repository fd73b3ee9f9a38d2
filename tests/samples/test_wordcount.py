"""wordcount traced by the real ``distea run``: where exact happens-before beats DistIA.

The sample (sample_systems/wordcount): the launcher starts the reducer, which
binds one TCP listener ("mailbox") per mapper (`open_mailboxes`) and announces
the ports; then it starts mapper-0, mapper-1 and mapper-2, mapper k against
mailbox k. Each mapper runs its map phase (`load_shard` -> `corpus.make_shard`,
`count_words` -> `tokenize`, `partition_counts` -> `wire.partition_of`,
`encode_partial_result` -> `wire.encode_frame`), then `send_partial_result`:
connect, ONE ``sendall`` of all 8 partition frames, close. After that it only
works locally (`shard_statistics`, `local_top_words`, `bigram_counts`,
`verify_partitions`, `write_local_summary`), sends nothing more, and exits.
The reducer, after `load_stopwords`, reads the mailboxes strictly in mapper
order (`collect_partial_result`: accept, then per frame `recv_frame` ->
`recv_exact` twice (header, payload) and `merge_partition`), then does the
reduce-side work (`verify_totals`, `drop_stopwords`, `format_report` with
`corpus_statistics`, `partition_balance`, `top_words`, `length_histogram`) and
exits. It sends nothing but its exit, to the launcher.

So a mapper's receives are just its spawn; the reducer's are its spawn and
the three messages, read in >= 16 receives each; the launcher's are its
children's exits and their stdout (pipe reads). The launcher sends nothing
after its last spawn (but to its own stdout, which no traced process reads).

DistIA (docs/semantics.md, "Baselines") makes the reducer impacted at the
first receive from an impacted mapper whose Lamport time is later than that
mapper's impact start. For a query that first runs after the mapper's send,
that compares a late read of an early message against the query's start,
and the reducer's many receives push its Lamport time past it: DistIA calls
the reducer impacted, distea (the message was sent before the query ran)
does not. Every expectation below is derived from the code, as reasoned next
to it; DistIA's set is checked through `ImpactResult.distia_starts` and
`distia_size`, the baseline the analyzer reports with every result.
"""

from __future__ import annotations

import pytest

from distea.analyzer.impact import ImpactResult
from sample_systems.wordcount.wire import PARTITIONS
from tests.samples.support import (
    LAUNCHER_BEFORE_CHILDREN_RUN,
    SampleRun,
    check_clean_channel,
    check_launcher_channels,
    check_never_impacted,
    check_processes,
    check_stdout,
    run_sample,
)

WC = "sample_systems.wordcount"
MAPPER, REDUCER, WIRE, CORPUS = f"{WC}.mapper", f"{WC}.reducer", f"{WC}.wire", f"{WC}.corpus"
MAPPERS = ("mapper-0", "mapper-1", "mapper-2")

MAP_PHASE = (f"{MAPPER}.load_shard", f"{CORPUS}.make_shard", f"{MAPPER}.count_words",
             f"{MAPPER}.partition_counts", f"{WIRE}.partition_of",
             f"{MAPPER}.encode_partial_result", f"{WIRE}.encode_frame",
             f"{MAPPER}.send_partial_result")
"""Mapper methods whose last execution ends with `send_partial_result` (not `tokenize`:
it runs again after the send, in `bigram_counts`)."""
AFTER_SEND = (f"{MAPPER}.shard_statistics", f"{MAPPER}.local_top_words",
              f"{MAPPER}.bigram_counts", f"{MAPPER}.verify_partitions",
              f"{MAPPER}.write_local_summary")
"""Mapper methods that first run after the mapper's one send."""
REDUCER_SETUP = (f"{REDUCER}.open_mailboxes", f"{REDUCER}.load_stopwords")
"""Reducer methods that return before its first accept (so before any TCP receive)."""
READ_SIDE = (f"{REDUCER}.collect_partial_result", f"{REDUCER}.merge_partition",
             f"{WIRE}.recv_frame", f"{WIRE}.recv_exact")
REDUCE_SIDE = (f"{REDUCER}.verify_totals", f"{REDUCER}.drop_stopwords",
               f"{REDUCER}.format_report", f"{REDUCER}.corpus_statistics",
               f"{REDUCER}.partition_balance", f"{REDUCER}.top_words",
               f"{REDUCER}.length_histogram")
"""Reducer methods that first run after its last receive: the work after the reads."""
REDUCER_ON_STACK = (f"{REDUCER}.reduce_mailboxes", f"{REDUCER}.main")


@pytest.fixture(scope="module")
def sr(tmp_path_factory: pytest.TempPathFactory) -> SampleRun:
    return run_sample("wordcount", tmp_path_factory.mktemp("wordcount"))


def the_send(sr: SampleRun, mapper: str) -> int:
    """Clock of the mapper's one TCP send (its whole partial result)."""
    (send,) = sr.events(mapper, "send", "tcp")
    return send.clock


def reads_of(sr: SampleRun, mapper: str) -> list[int]:
    """Clocks of the reducer's receives of `mapper`'s message (its channel), in order."""
    channels = sr.send_channels(mapper, "tcp")
    return [ev.clock for ev in sr.events("reducer", "recv", "tcp") if ev.channel in channels]


def first_exit_from(sr: SampleRun, names: tuple[str, ...]) -> int:
    """Clock of the launcher's first reap of one of `names`."""
    wanted = {f"{sr.info(n).host}:{sr.info(n).pid}" for n in names}
    return min(ev.clock for ev in sr.events("launcher", "recv", "exit") if ev.channel in wanted)


def first_read_after(sr: SampleRun, names: tuple[str, ...], query: str) -> int | None:
    """Clock of the launcher's first stdout read that comes after one of `names` ran `query`.

    From recorded offsets: a role's stdout writes after its first `query` hold
    the bytes from the first of them on (offsets grow with its clock), and a
    read of bytes [a, b) comes after the write that carried byte b - 1.
    """
    clocks = []
    for name in names:
        first = sr.first(name, query)
        later: dict[str, int] = {}
        for ev in sr.events(name, "send", "pipe"):
            if ev.clock > first and ev.channel not in later:
                later[ev.channel] = ev.start
        clocks.extend(ev.clock for ev in sr.events("launcher", "recv", "pipe")
                      if ev.channel in later and ev.end - 1 >= later[ev.channel])
    return min(clocks, default=None)


def distia_set(sr: SampleRun, res: ImpactResult) -> dict[str, set[str]]:
    """DistIA's impact set from the starts the analyzer reports: last >= start.

    (The same rule as distea's, from DistIA's starts; checked against the
    reported `distia_size` wherever it is used.)
    """
    out: dict[str, set[str]] = {}
    for key, start in res.distia_starts.items():
        name = next(n for n, k in sr.keys.items() if k == key)
        methods = {m for m, ex in sr.run.executions.get(key, {}).items() if ex.last >= start}
        if methods:
            out[name] = methods
    assert sum(len(v) for v in out.values()) == res.distia_size
    return out


def test_processes_and_output(sr: SampleRun) -> None:
    check_processes(sr, {
        "launcher": WC,
        "reducer": REDUCER,
        "mapper-0": MAPPER,
        "mapper-1": MAPPER,
        "mapper-2": MAPPER,
    })
    check_stdout(sr)
    assert "[reducer] reduced 3 partial results in mapper order" in sr.traced.stdout


def test_channels(sr: SampleRun) -> None:
    check_launcher_channels(sr)
    # One sendall per mapper, read by the reducer with at least a header and a
    # payload receive per partition frame (more if TCP splits a frame).
    tcp = check_clean_channel(sr, "tcp")
    assert tcp["sends"] == 3 and tcp["recvs"] >= 3 * 2 * PARTITIONS, tcp
    assert set(sr.show["messages"]["by_kind"]) == {"proc", "exit", "pipe", "tcp"}
    for name in MAPPERS:
        # A mapper receives only its spawn, and sends only its message and its exit
        # (besides its stdout lines, pipe writes that only the launcher reads).
        assert [ev.kind for ev in sr.events(name, "recv")] == ["proc"]
        assert [ev.kind for ev in sr.events(name, "send") if ev.kind != "pipe"] == ["tcp", "exit"]
        assert len(reads_of(sr, name)) >= 2 * PARTITIONS
    # The reducer reads the mailboxes strictly in mapper order, and sends only its exit.
    r0, r1, r2 = (reads_of(sr, name) for name in MAPPERS)
    assert max(r0) < min(r1) and max(r1) < min(r2)
    assert len(r0) + len(r1) + len(r2) == tcp["recvs"]
    assert [ev.kind for ev in sr.events("reducer", "send") if ev.kind != "pipe"] == ["exit"]


def test_never_impacted(sr: SampleRun) -> None:
    # Interesting queries: shard_statistics, write_local_summary (mappers, after
    # the send: never reach the reducer at all), count_words (mappers, before the
    # send: reaches the reducer at its first TCP receive, after open_mailboxes
    # and load_stopwords returned; in each mapper it starts after load_shard and
    # make_shard returned, and a mapper receives nothing after its spawn) and
    # merge_partition (reducer: after its setup; never reaches a mapper).
    check_never_impacted(sr)


def test_count_words_before_the_send(sr: SampleRun) -> None:
    res = sr.impact(f"{MAPPER}.count_words")
    for name in MAPPERS:
        # Each mapper from its own count_words (it receives nothing after its
        # spawn); load_shard (and make_shard in it) returned before.
        assert sr.start(res, name) == sr.first(name, f"{MAPPER}.count_words")
        sr.expect(res, name,
                  impacted=[f"{MAPPER}.count_words", f"{MAPPER}.send_partial_result",
                            *AFTER_SEND, f"{MAPPER}.run_mapper", f"{MAPPER}.main"],
                  not_impacted=[f"{MAPPER}.load_shard", f"{CORPUS}.make_shard"])
    # Reducer: mapper-0 sent its message after its count_words, and the reducer
    # reads mapper-0's mailbox first, so its very first TCP receive is the start.
    assert sr.start(res, "reducer") == reads_of(sr, "mapper-0")[0]
    sr.expect(res, "reducer", impacted=[*READ_SIDE, *REDUCE_SIDE, *REDUCER_ON_STACK],
              not_impacted=REDUCER_SETUP)
    sr.expect(res, "launcher", impacted=["sample_systems._launch.RoleGroup.finish"],
              not_impacted=LAUNCHER_BEFORE_CHILDREN_RUN)
    # DistIA agrees here: that first receive's Lamport time is one more than at
    # least the send's, which is later than mapper-0's count_words; the
    # reducer's earlier receive (its spawn) comes from the launcher, which
    # DistIA impacts only at its exit receives, after every spawn; mappers
    # receive nothing but spawns; and the launcher's first exit receive is
    # after some count_words in both analyses (every role's exit is).
    assert res.distia_starts == res.starts
    assert res.distia_size == res.size


@pytest.mark.parametrize("query", [f"{MAPPER}.shard_statistics",
                                   f"{MAPPER}.write_local_summary"])
def test_after_the_send_distea_is_strictly_smaller(sr: SampleRun, query: str) -> None:
    res = sr.impact(query)
    for name in MAPPERS:
        # Each mapper from its own first execution of the query, after its send:
        # the whole map phase is over by then.
        assert the_send(sr, name) < sr.first(name, query)
        assert sr.start(res, name) == sr.first(name, query)
        sr.expect(res, name, impacted=[query, f"{MAPPER}.write_local_summary",
                                       f"{MAPPER}.run_mapper", f"{MAPPER}.main"],
                  not_impacted=MAP_PHASE)
    # distea: the reducer is NOT impacted. Its receives are its spawn (sent by
    # the launcher before any mapper existed) and the three messages, each sent
    # before its mapper's first `query`; nothing a mapper does later reaches it
    # (a mapper's only later message is its exit, to the launcher, which sends
    # nothing after its last spawn).
    assert sr.start(res, "reducer") is None
    assert sr.impacted(res, "reducer") == set()
    # Launcher: through the first stdout line a mapper printed after its query
    # (write_local_summary prints it) that the launcher reads, or the first mapper
    # exit it reaps, whichever comes first (the reducer's exit and its output are
    # not after any query start).
    read = first_read_after(sr, MAPPERS, query)
    exit_ = first_exit_from(sr, MAPPERS)
    assert read is not None
    assert sr.start(res, "launcher") == min(read, exit_)
    sr.expect(res, "launcher", impacted=["sample_systems._launch.RoleGroup.finish"],
              not_impacted=LAUNCHER_BEFORE_CHILDREN_RUN)

    # DistIA: the reducer IS impacted, at one of the TCP receives (the launcher
    # is impacted only at exit receives, after the spawns, so the reducer's
    # spawn receive cannot be it). Bound from above: mapper-0 receives nothing
    # after its spawn, so its Lamport time at its first `query` is its Lamport
    # time at the send plus c, the clock distance between them; every receive is
    # one more than the larger of its predecessor and its send, so the reducer's
    # j-th receive of mapper-0's message is at least the send's Lamport time
    # plus j, and its (c+1)-th is later than mapper-0's impact start. (The
    # later mailboxes are read later still: any receive of mapper-1's or
    # mapper-2's message qualifies for the same reason, plus the >= 16 reads
    # of each earlier message.)
    dstart = res.distia_starts.get(sr.keys["reducer"])
    assert dstart is not None, "DistIA should call the reducer impacted"
    reads = reads_of(sr, "mapper-0")
    c = sr.first("mapper-0", query) - the_send(sr, "mapper-0")
    assert c + 1 <= len(reads), (c, len(reads))
    tcp_reads = [ev.clock for ev in sr.events("reducer", "recv", "tcp")]
    assert dstart in tcp_reads and dstart <= reads[c]
    distia = distia_set(sr, res)
    # So DistIA's reducer set holds everything from the reads on: the reading
    # methods (still executing at the last receive), the reduce-side work (after
    # it) and what is on the stack; the setup returned before any receive.
    assert set(READ_SIDE) | set(REDUCE_SIDE) | set(REDUCER_ON_STACK) <= distia["reducer"]
    assert not set(REDUCER_SETUP) & distia["reducer"]
    # distea's set is contained in DistIA's; in the mappers they are equal (the
    # same starts: a mapper receives only its spawn); in the launcher DistIA may
    # start earlier (at the reducer's exit, if it is reaped first: timing).
    ours = {name: sr.impacted(res, name) for name in sr.keys}
    for name in MAPPERS:
        assert distia[name] == ours[name]
    assert ours["launcher"] <= distia["launcher"]
    assert res.distia_starts[sr.keys["launcher"]] <= first_exit_from(sr, MAPPERS)
    # The difference: at least the reducer's whole post-read work and reads.
    assert res.size < res.distia_size
    assert res.distia_size - res.size >= len(distia["reducer"]) >= len(
        READ_SIDE + REDUCE_SIDE + REDUCER_ON_STACK)


def test_merge_partition_reaches_no_mapper(sr: SampleRun) -> None:
    res = sr.impact(f"{REDUCER}.merge_partition")
    # Nothing flows from the reducer to a mapper.
    for name in MAPPERS:
        assert sr.start(res, name) is None
    assert sr.start(res, "reducer") == sr.first("reducer", f"{REDUCER}.merge_partition")
    sr.expect(res, "reducer", impacted=[*READ_SIDE, *REDUCE_SIDE, *REDUCER_ON_STACK],
              not_impacted=REDUCER_SETUP)
    # Launcher: only through the reducer: its report lines (printed after the
    # merge) or its exit, whichever the launcher receives first (the mappers'
    # exits and output are not after anything the reducer did).
    read = first_read_after(sr, ("reducer",), f"{REDUCER}.merge_partition")
    exit_ = first_exit_from(sr, ("reducer",))
    assert sr.start(res, "launcher") == min(exit_, read if read is not None else exit_)
    # DistIA agrees: the reducer's only message is its exit, and no mapper
    # receives anything from an impacted process.
    assert res.distia_starts == res.starts
    assert res.distia_size == res.size


def test_only_queries_after_the_send_separate_distea_from_distia(sr: SampleRun) -> None:
    # Every executed method as a query (the precision benchmark's protocol):
    # distea is never larger than DistIA, and strictly smaller exactly for the
    # methods that first run, in every mapper, after that mapper's send. For a
    # method that first runs before the send somewhere, that mapper's message
    # is after it and both analyses start the reducer at that message's first
    # receive; for launcher and reducer methods, the messages both analyses
    # follow are the same (spawns, exits, all sent after the query started where
    # it started). Expected set from recorded facts only (firsts, send clocks).
    # Launcher and reducer methods are only checked for "never larger": the
    # launcher reads the reducer's READY line byte by byte (read_line), which
    # pushes its Lamport time past the reducer's, so DistIA impacts the launcher
    # there, and through its later spawns every mapper, for queries that ran in
    # the reducer after it announced itself (the same weakness as for the
    # reducer's many TCP reads, on the stdout pipe).
    expected = set()
    for method in sr.run.executed:
        runs_in = {name for name in sr.keys if sr.executed(name, method)}
        if runs_in and runs_in <= set(MAPPERS) and all(
                sr.first(name, method) > the_send(sr, name) for name in runs_in):
            expected.add(method)
    assert set(AFTER_SEND) <= expected
    smaller = set()
    for method in sr.run.executed:
        res = sr.impact(method)
        assert res.size <= res.distia_size <= res.mcov_size, method
        runs_in = {name for name in sr.keys if sr.executed(name, method)}
        if runs_in <= set(MAPPERS) and res.size < res.distia_size:
            smaller.add(method)
    assert smaller == expected
