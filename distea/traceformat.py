"""The on-disk trace format: run directories and per-process event logs.

A run directory holds ``run.json`` (run metadata) and ``procs/``, one
append-only msgpack stream per traced process. Tracers send the same records
to the collector in batches; the collector appends each batch's payload to
the process's file unchanged, so a file is valid up to the last whole record
even when a writer died mid-batch.

FORMAT_VERSION history:
  1: first format; SEND and RECV carry ``kind`` and ``channel`` inline:
     SEND [6, clock, kind, channel, start, end, mid, thread, meta].
  2: SEND and RECV name their channel by a per-process number that a
     CHANNEL record declares before its first use (a message record is about
     half the size: the channel's name is written once per process, not once
     per message). Format 1 logs are still read.

Records are msgpack arrays whose first item is a :class:`Tag`:

  HEADER   [0, {format, key, pid, ppid, host, argv, executable, python, cwd,
                start_method, parent_token, role, rank, world_size, mode,
                started_ns}]
  METHOD   [1, mid, module, qualname, file, firstline, lastline]
  FIRST    [2, mid, clock]
  LAST     [3, mid, clock]               (latest value wins)
  CALL     [4, mid, clock, thread]       (full mode: entry or resume)
  RETURN   [5, mid, clock, thread]       (full mode: return, yield or unwind)
  SEND     [6, clock, cid, start, end, mid, thread, meta]
  RECV     [7, clock, cid, start, end, mid, thread, meta]
  STATS    [8, {dropped_events, tracer_errors, ...}]   (cumulative; latest wins)
  END      [9, clock, reason]
  UNTRACED [10, pid, argv, reason(, {token, pipes})]   (extra: a non-Python child's
                                        spawn token and stdin/stdout/stderr/exec-error
                                        pipe names)
  LINK     [11, kind, end_a, end_b]     (two channel ends of one pipe/socketpair)
  CHANNEL  [12, cid, kind, channel]     (declares channel number cid of this log)

``mid`` is a per-process method number introduced by a METHOD record; -1
means "no traced method on the stack". ``cid`` is a per-process channel
number introduced by a CHANNEL record: the message's ``kind`` and
``channel`` (below).

Channel conventions (what SEND/RECV carry, per ``kind``):

- Streams (``tcp``, ``unix``, ``ssl``): ``channel`` is ``"SRC>DST"`` with the
  sender's and receiver's addresses, identical at both ends for one
  direction; ``start``/``end`` are byte offsets in that direction. A receive
  of [a, b) happens after the send that carried byte b-1. Offsets restarting
  at 0 on the same channel mean a new connection (generation). The end that
  spoke first (a client) adds ``meta["t"]``, CLOCK_MONOTONIC ns (before a
  send, after a receive), for servers nobody traced (relays); a Redis client
  adds ``cmds``/``w``/``fps`` to sends and ``fps``/``r`` to receives
  (docs/channels.md).
- Pipes (``pipe``): ``channel`` is ``"HOST:pipe:INODE"``, the same at both
  ends; ``start``/``end`` are byte offsets in the pipe's direction as counted
  by the recording process (a forked child goes on from its parent's count).
  Older runs carried a message index there and the byte range in
  ``meta["bytes"]``, which the analyzer reads instead.
- Process lifecycle: ``proc`` (parent SEND at spawn/fork, child RECV as its
  first event; channel = spawn token, start 0, end 1) and ``exit`` (child SEND
  as its last event, parent RECV when wait/join returns; channel =
  ``"HOST:PID"``).
- Messages (``mp``, ``zmq``, ``udp``, ``unixgram``, ``torch``):
  ``start`` is the message's index on that channel as counted by that end,
  ``end = start + 1``; ``meta["fp"]`` a payload fingerprint where both ends can
  compute it; ``meta["fanout"] = True`` on a send that many receivers get
  (PUB/SUB, broadcast; a UDP broadcast or multicast is sent on ``*:PORT``);
  ``meta["t"]`` a ``CLOCK_MONOTONIC`` reading in ns (``zmq``: before a send,
  after a receive) or bracket ``[t0, t1]`` (``mp`` on pipes and socket
  pairs); ``meta["sock"]``/``meta["multi"]`` (``zmq``) a process's second
  socket of one name, a socket with several endpoints. LINK records tie two
  channel ends together. torch
  collectives use ``channel = "GROUP:SEQ"`` with ``meta["op"]`` and
  ``meta["role"]`` (``"all"``, ``"root"``, ``"leaf"``); operations a process
  group issued that nobody recorded are a collective on ``"GROUP:unseen"``
  with ``meta["op"] = "unseen"``, ``meta["unseen"]`` (how many) and
  ``meta["what"]`` (the problem line's text); torch RPC payloads are
  messages on channel ``"rpc"`` with ``meta["fp"]``.
- Markers (``untrusted``): a SEND that is not a message. ``channel`` names a
  channel end, as its own sends name it, that something distea cannot see
  writes to (``meta["why"]``; ``meta["of"]``: the channel's kind), such as
  the signal wakeup fd; ``start = end = 0``. The analyzer pairs no receive
  of that channel by offsets.
- Unseen traffic (``unseen``): not a message but a SEND written by the
  detector when the kernel moved more bytes on a TCP connection than the
  channels recorded; ``channel`` is the connection's outgoing ``"SRC>DST"``,
  ``start``/``end`` 0/1, ``meta`` the window and counts (``lo``, ``sent``,
  ``received``, ``kernel_sent``, ``kernel_received``, ``recorded_sent``,
  ``recorded_received``, ``at``, ``reason``; ``via``: the torch process
  group that claimed the connection when it was created). The analyzer
  takes these out before matching (``distea/analyzer/unseen.py``).
- Timed kinds, paired by same-host CLOCK_MONOTONIC (``meta["t"]``, ns):
  ``sem`` (a multiprocessing semaphore: release SEND, acquire RECV;
  channel ``HOST:sem:NAME``), ``signal`` (``os.kill`` and friends SEND with
  the target ``pid``/``pgid``/``all``, the Python handler RECV with its
  ``pid`` and ``pgid``; channel ``HOST:signal:NUMBER``) and ``shm`` (a
  SEND per attach to a shared segment, nothing pairs with it; channel
  ``HOST:shm:DEV:INODE``, ``meta["path"]`` and ``meta["w"]``, writable).
  ``start``/``end`` are 0/1.
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Iterator
from operator import attrgetter
from pathlib import Path
from typing import Any, TypeGuard

import msgpack

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
from distea.rundir import (
    DEFAULT_RUNS_DIR,
    PROCS_DIR,
    RUN_META,
)
from distea.wire import (
    FORMAT_VERSION,
    LOST_DIR,
    PROC_SUFFIX,
    UNTRACED_DIR,
    Tag,
)


class TraceFormatError(Exception):
    """A run directory or trace that distea cannot read; the message says why."""


def read_run_meta(path: Path) -> dict[str, Any]:
    meta_file = path / RUN_META
    try:
        if not path.is_dir():
            raise TraceFormatError(f"no run directory at {path}")
        if not meta_file.is_file():
            raise TraceFormatError(f"{path} is not a distea run directory (no {RUN_META})")
        meta = json.loads(meta_file.read_text())
    except PermissionError:
        raise TraceFormatError(f"{meta_file}: permission denied") from None
    except (OSError, ValueError) as exc:
        raise TraceFormatError(f"{meta_file} is unreadable: {_reason(exc)}") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("format"), int):
        raise TraceFormatError(f"{meta_file} is not distea run metadata")
    check_version(meta["format"], str(meta_file))
    return meta


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def check_version(version: object, where: str) -> None:
    if not isinstance(version, int) or version < 1:
        raise TraceFormatError(f"{where}: not a distea trace (format {version!r})")
    if version > FORMAT_VERSION:
        raise TraceFormatError(
            f"{where} was written in trace format {version}, newer than this distea reads "
            f"(format {FORMAT_VERSION}); upgrade distea to read it"
        )


CHANNEL_NUMBERS_SINCE = 2
"""The first format whose SEND and RECV records name their channel by number."""


def is_readable_version(version: object) -> TypeGuard[int]:
    """Whether a process log of this format is one this distea reads."""
    return type(version) is int and 1 <= version <= FORMAT_VERSION


def find_runs_dir(start: Path | None = None) -> Path | None:
    """The nearest ``.distea/runs`` in ``start`` (default: the current directory) or above.

    Runs are looked up like git looks up its repository, so a query works
    from any subdirectory of the directory where ``distea run`` was started.
    """
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / DEFAULT_RUNS_DIR
        if candidate.is_dir():
            return candidate
    return None


def _started_at(run: Path) -> float:
    """When a run started, from its run.json (its modification time if that is unreadable)."""
    meta_file = run / RUN_META
    try:
        started = json.loads(meta_file.read_text()).get("started_at")
    except (OSError, ValueError, AttributeError):
        started = None
    if isinstance(started, int | float):
        return float(started)
    try:
        return meta_file.stat().st_mtime
    except OSError:
        return 0.0


def latest_run(base: Path | None = None) -> Path:
    """The run that started last under ``base`` (default: the nearest ``.distea/runs``).

    "Last" is the start time recorded in run.json, never the directory name:
    ``distea demo`` and ``-o`` name runs freely. Failed and interrupted runs
    count too (queries say what happened to them).
    """
    folder = base if base is not None else find_runs_dir()
    where = folder if folder is not None else DEFAULT_RUNS_DIR
    runs = [p for p in folder.iterdir() if (p / RUN_META).is_file()] \
        if folder is not None and folder.is_dir() else []
    if not runs:
        raise TraceFormatError(
            f"no runs under {where} (nor in any directory above); "
            "record one with: distea run -- python app.py"
        )
    return max(runs, key=lambda run: (_started_at(run), run.name))


def iter_records(path: Path, problems: list[str]) -> Iterator[list[Any]]:
    """Yield the whole records of one process log; note damage in ``problems``.

    A torn last record (writer killed mid-write) or garbage in the middle
    stops reading that file: everything before it is kept and the loss is
    reported, never raised.
    """
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=1 << 30)
    count = 0
    try:
        stream = path.open("rb")
    except OSError as exc:
        problems.append(f"{path.name}: cannot be read ({_reason(exc)}); skipped")
        return
    with stream:
        try:
            while chunk := stream.read(1 << 20):
                unpacker.feed(chunk)
                for record in unpacker:
                    if not isinstance(record, list) or not record or not isinstance(record[0], int):
                        problems.append(
                            f"{path.name}: unexpected data after {count} records; rest ignored"
                        )
                        return
                    count += 1
                    yield record
        except OSError as exc:
            problems.append(f"{path.name}: read failed after {count} records "
                            f"({_reason(exc)}); rest ignored")
            return
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            # TypeError: garbage that decodes to a map with a list or map as a key
            problems.append(f"{path.name}: corrupt after {count} records ({exc}); rest ignored")
            return
        size = os.fstat(stream.fileno()).st_size
    if unpacker.tell() < size:
        problems.append(f"{path.name}: last record truncated after {count} whole records")


def load_run(path: Path | str) -> RunData:
    """Read a whole run directory into :class:`RunData`.

    Raises :class:`TraceFormatError` only when the run cannot be read at all
    (no such directory, no or foreign ``run.json``, a newer format). Damage
    inside the run is kept out of the data and described, one line each, in
    ``RunData.problems``: what is missing, from which process, and why.
    """
    path = Path(path)
    meta = read_run_meta(path)
    data = RunData(path=str(path), meta=meta)
    procs = path / PROCS_DIR
    try:
        logs = sorted(procs.glob("*" + PROC_SUFFIX)) if procs.is_dir() else []
    except OSError as exc:
        data.problems.append(f"{PROCS_DIR}/ cannot be listed ({_reason(exc)})")
        logs = []
    if not procs.is_dir():
        data.problems.append(f"no {PROCS_DIR}/ directory: no process was recorded")
    # The logs become millions of small acyclic objects: the cyclic GC's repeated
    # scans of them while they are built cost a third of the load, and find nothing.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for log in logs:
            _load_process(log, data)
    finally:
        if gc_was_enabled:
            gc.enable()
    _missing_logs(meta, {log.name for log in logs}, data)
    for note_file in _notes(path / UNTRACED_DIR, data):
        _load_untraced_note(note_file, data)
    lost = {}
    for note_file in _notes(path / LOST_DIR, data):
        note = _read_lost_note(note_file, data)
        if note is not None:
            lost[str(note.get("key", note_file.stem))] = note
    _collector_problems(meta, data)
    for info in data.processes.values():
        note = lost.pop(info.key, None)
        if note is not None:
            if info.complete:  # its final batch arrived, so did every batch before it
                note = {**note, "undelivered_batches": 0, "undelivered_records": 0}
            text = _lost_text(note, f"process {info.pid} ({info.role})", info.dropped_events)
            if info.complete and not _int(note.get("dropped_records")) \
                    and not info.dropped_events:
                continue  # the exit wait ran out, yet everything arrived
            data.problems.append(text)
        elif not info.complete:
            data.problems.append(
                f"process {info.pid} ({info.role}) ended without a final flush "
                "(killed?): events after its last flush are lost"
            )
        elif info.dropped_events:
            data.problems.append(
                f"process {info.pid} ({info.role}) dropped {info.dropped_events} events "
                "(collector slow or unreachable)"
            )
    for note in lost.values():
        argv = note.get("argv")
        command = " ".join(str(a) for a in argv)[:60] if isinstance(argv, list) else "?"
        who = f"process {note.get('pid', '?')} on {note.get('host', '?')} ({command})"
        data.problems.append(_lost_text(note, who, 0) + "; nothing of it reached the run")
    return data


def _load_untraced_note(note_file: Path, data: RunData) -> None:
    """A child that could not load the tracer left this note instead of a log."""
    try:
        note = json.loads(note_file.read_text())
        data.untraced.append(UntracedChild(
            str(note.get("parent_token") or ""), int(note["pid"]),
            tuple(str(a) for a in note.get("argv", ())), str(note["reason"])))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        data.problems.append(f"{UNTRACED_DIR}/{note_file.name}: unreadable note; skipped")


def _notes(folder: Path, data: RunData) -> list[Path]:
    try:
        return sorted(folder.glob("*.json")) if folder.is_dir() else []
    except OSError as exc:
        data.problems.append(f"{folder.name}/ cannot be listed ({_reason(exc)})")
        return []


def _read_lost_note(note_file: Path, data: RunData) -> dict[str, Any] | None:
    try:
        note = json.loads(note_file.read_text())
    except (OSError, ValueError) as exc:
        data.problems.append(f"{LOST_DIR}/{note_file.name}: unreadable note ({_reason(exc)}); "
                             "a process may have lost records")
        return None
    if not isinstance(note, dict):
        data.problems.append(f"{LOST_DIR}/{note_file.name}: not a distea note; "
                             "a process may have lost records")
        return None
    return note


def _lost_text(note: dict[str, Any], who: str, dropped_in_stats: int) -> str:
    """One line for a tracer's lost note (written when records could not be delivered)."""
    dropped = max(_int(note.get("dropped_records")), dropped_in_stats)
    batches = _int(note.get("undelivered_batches"))
    records = _int(note.get("undelivered_records"))
    parts = []
    if dropped:
        parts.append(f"dropped {dropped} records while the collector was unreachable or slow")
    if batches:
        parts.append(f"its last {batches} batches (up to {records} records) were still "
                     "queued at exit and are likely lost")
    what = "; ".join(parts) or "could not confirm its last records reached the collector"
    return f"{who} {what} (ended by {note.get('end_reason', '?')})"


def _missing_logs(meta: dict[str, Any], present: set[str], data: RunData) -> None:
    """Logs the collector wrote that are gone now (deleted, moved): a problem each.

    Without this, a deleted log silently shrinks every answer: its process's
    methods and messages vanish and its peers' receives look external.
    """
    collector = meta.get("collector")
    written = collector.get("logs") if isinstance(collector, dict) else None
    if not isinstance(written, list):
        return  # runs recorded before the collector listed its logs
    for name in sorted(str(n) for n in written if str(n) not in present):
        data.problems.append(
            f"{PROCS_DIR}/{name} is missing: the collector wrote it, but it has been deleted "
            "or moved; that process's methods and messages are not in any answer")


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _collector_problems(meta: dict[str, Any], data: RunData) -> None:
    """What the collector noticed (gaps, refused writers) and whether the run ended."""
    collector = meta.get("collector")
    if collector is None:
        if "finished_at" not in meta:
            data.problems.append(
                "the run never finished: its collector was killed or is still running; "
                "processes may be missing their last events")
        return
    if not isinstance(collector, dict):
        data.problems.append(f"{RUN_META}: unreadable collector summary")
        return
    for note in collector.get("problems", []) or []:
        data.problems.append(str(note))
    rejected = _int(collector.get("rejected"))
    if rejected:
        data.problems.append(f"the collector rejected {rejected} malformed or foreign messages")
    refused = collector.get("refused") or []
    if isinstance(refused, list) and refused:
        where = sorted({str(r.get("address") or "unknown address") for r in refused
                        if isinstance(r, dict)})
        data.problems.append(
            f"the collector refused {len(refused)} connection attempts without the run's key "
            f"(from {', '.join(where)[:120]})")


_NO_RECORD = object()
# _load_process tests tag ranges: each pair below must stay adjacent
assert Tag.LAST == Tag.FIRST + 1 and Tag.RETURN == Tag.CALL + 1 and Tag.RECV == Tag.SEND + 1


def _load_process(log: Path, data: RunData) -> None:
    """Read one process log into ``data``.

    This is the loop that every load spends most of its time in (once per
    record, millions of times for a large run), so it reads the log itself
    instead of going through :func:`iter_records`, dispatches on the tag as a
    plain int held in a local, and constructs events with positional
    arguments. What it keeps and what it reports is exactly what a
    record-by-record reading of ``iter_records`` gives (tests/analyzer
    compares the two on damaged logs): a record that breaks the framing stops
    the log, a malformed record is skipped and counted.
    """
    problems = data.problems
    file_name = log.name
    try:
        stream = log.open("rb")
    except OSError as exc:
        problems.append(f"{file_name}: cannot be read ({_reason(exc)}); skipped")
        problems.append(f"{file_name}: empty process log")
        return
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=1 << 30)
    count = 0  # whole records read, as iter_records counts them
    damage: str | None = None  # why reading stopped before the end of the file
    header: dict[Any, Any] = {}
    started = False  # the header was read
    key = ""
    names: dict[int, str] = {}
    channels: dict[int, tuple[str, str]] = {}  # format 2: cid -> (kind, channel)
    interned = True
    firsts: dict[str, int] = {}
    lasts: dict[str, int] = {}
    messages: list[MessageEvent] = []
    calls: list[CallEvent] = []
    stats: dict[str, Any] = {}
    end_reason: str | None = None
    methods = data.methods
    malformed, first_malformed = 0, ""
    in_order, prev_clock = True, 0  # message records usually come in clock order
    add_message = messages.append
    add_call = calls.append
    lasts_get = lasts.get
    names_get = names.get
    t_method, t_first, t_last, t_call, t_return = (int(Tag.METHOD), int(Tag.FIRST),
                                                   int(Tag.LAST), int(Tag.CALL),
                                                   int(Tag.RETURN))
    t_send, t_recv, t_stats, t_end, t_untraced, t_link = (int(Tag.SEND), int(Tag.RECV),
                                                          int(Tag.STATS), int(Tag.END),
                                                          int(Tag.UNTRACED), int(Tag.LINK))
    t_channel = int(Tag.CHANNEL)
    with stream:
        try:
            while chunk := stream.read(1 << 20):
                unpacker.feed(chunk)
                if not started:
                    first = next(unpacker, _NO_RECORD)
                    if first is _NO_RECORD:
                        continue  # not one whole record yet
                    if not isinstance(first, list) or not first \
                            or not isinstance(first[0], int):
                        damage = f"{file_name}: unexpected data after 0 records; rest ignored"
                        break
                    count = 1
                    if first[0] != Tag.HEADER or len(first) < 2 \
                            or not isinstance(first[1], dict):
                        problems.append(
                            f"{file_name}: does not start with a process header; skipped")
                        return
                    header = first[1]
                    started = True
                    version = header.get("format")
                    if isinstance(version, int) and version > FORMAT_VERSION:
                        check_version(version, str(log))  # raises: a newer tracer wrote this run
                    if not is_readable_version(version) or not isinstance(header.get("key"), str):
                        problems.append(f"{file_name}: not a distea process log "
                                        f"(format {version!r}); skipped")
                        return
                    interned = version >= CHANNEL_NUMBERS_SINCE
                    key = header["key"]
                    if key in data.processes:
                        problems.append(f"{file_name}: a second log for process {key}; skipped")
                        return
                for rec in unpacker:
                    if type(rec) is not list or not rec:  # msgpack gives plain lists
                        damage = (f"{file_name}: unexpected data after {count} records; "
                                  "rest ignored")
                        break
                    tag = rec[0]
                    if type(tag) is not int:
                        if not isinstance(tag, int):
                            damage = (f"{file_name}: unexpected data after {count} records; "
                                      "rest ignored")
                            break
                        tag = int(tag)  # a bool: True reads as 1, like the enum compares
                    count += 1
                    try:
                        if t_send <= tag <= t_recv:
                            if interned:
                                _, clock, cid, start, end, mid, thread, meta = rec
                                kind, channel = channels[cid]
                            else:
                                _, clock, kind, channel, start, end, mid, thread, meta = rec
                            if (type(clock) is not int or type(start) is not int
                                    or type(end) is not int or type(kind) is not str
                                    or type(channel) is not str):
                                raise TypeError("message fields")
                            method = names_get(mid)
                            if clock < prev_clock:
                                in_order = False
                            prev_clock = clock
                            add_message(MessageEvent(
                                key, clock, "send" if tag == t_send else "recv", kind, channel,
                                start, end, method, thread, meta))
                        elif t_first <= tag <= t_last:
                            _, mid, clock = rec
                            name = names[mid]
                            if type(clock) is not int:
                                raise TypeError("clock")
                            if tag == t_first and name not in firsts:
                                firsts[name] = clock
                            if clock > lasts_get(name, -1):
                                lasts[name] = clock
                        elif t_call <= tag <= t_return:
                            _, mid, clock, thread = rec
                            name = names[mid]
                            if type(clock) is not int:
                                raise TypeError("clock")
                            add_call(CallEvent(key, name, clock, thread, tag == t_call))
                            if clock > lasts_get(name, -1):
                                lasts[name] = clock
                        elif tag == t_method:
                            _, mid, module, qualname, file, firstline, lastline = rec
                            if (type(mid) is not int or type(module) is not str
                                    or type(qualname) is not str):
                                raise TypeError("method fields")
                            name = f"{module}.{qualname}"
                            names[mid] = name
                            if name not in methods:  # most processes declare the same methods
                                methods[name] = Method(name, module, qualname, file, firstline,
                                                       lastline)
                        elif tag == t_channel:
                            _, cid, kind, channel = rec
                            if type(cid) is not int or type(kind) is not str \
                                    or type(channel) is not str:
                                raise TypeError("channel fields")
                            channels[cid] = (kind, channel)
                        elif tag == t_stats:
                            if not isinstance(rec[1], dict):
                                raise TypeError("STATS is not a map")
                            stats = rec[1]
                            if "role" in stats:
                                header = {**header,
                                          **{k: stats[k] for k in ("role", "rank", "world_size")}}
                        elif tag == t_end:
                            end_reason = str(rec[2])
                        elif tag == t_link:
                            data.links.append(ChannelLink(key, str(rec[1]), str(rec[2]),
                                                          str(rec[3])))
                        elif tag == t_untraced:
                            extra = rec[4] if len(rec) > 4 and isinstance(rec[4], dict) else {}
                            pipes = extra.get("pipes")
                            data.untraced.append(UntracedChild(
                                key, rec[1], tuple(rec[2]), str(rec[3]), extra.get("token"),
                                tuple(pipes) if isinstance(pipes, list) else ()))
                    except (KeyError, ValueError, TypeError, IndexError):
                        if not malformed:
                            first_malformed = f"{rec!r:.80}"
                        malformed += 1
                if damage is not None:
                    break
        except OSError as exc:
            damage = (f"{file_name}: read failed after {count} records ({_reason(exc)}); "
                      "rest ignored")
        except (ValueError, TypeError, msgpack.UnpackException) as exc:  # as in iter_records
            damage = f"{file_name}: corrupt after {count} records ({exc}); rest ignored"
        if damage is None and unpacker.tell() < os.fstat(stream.fileno()).st_size:
            damage = f"{file_name}: last record truncated after {count} whole records"
    if damage is not None:
        problems.append(damage)
    if not started:
        problems.append(f"{file_name}: empty process log")
        return
    if malformed:
        problems.append(f"{file_name}: {malformed} malformed records skipped "
                        f"(the first: {first_malformed})")
    if not isinstance(stats, dict):
        problems.append(f"{log.name}: malformed STATS record; counts ignored")
        stats = {}
    argv = header.get("argv", ())
    rank, world_size = header.get("rank"), header.get("world_size")
    token = header.get("parent_token")
    data.processes[key] = ProcessInfo(
        key=key,
        pid=_int(header.get("pid")),
        ppid=_int(header.get("ppid")),
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
        started_ns=_int(header.get("started_ns")),
        end_reason=end_reason,
        dropped_events=_int(stats.get("dropped_events")),
        tracer_errors=_int(stats.get("tracer_errors")),
    )
    unseen = stats.get("unseen")
    if isinstance(unseen, list):  # what a channel knew it could not observe there
        info = data.processes[key]
        problems.extend(f"{info.role} (pid {info.pid}): {text}" for text in unseen)
    data.executions[key] = {
        name: Execution(key, name, first, max(first, lasts.get(name, first)))
        for name, first in firsts.items()
    }
    if not in_order:
        messages.sort(key=attrgetter("clock"))  # stable, like the tracer's own order
    data.messages[key] = messages
    if calls:
        data.calls[key] = calls
