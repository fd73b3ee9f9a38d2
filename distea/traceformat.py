"""The on-disk trace format: run directories and per-process event logs.

A run directory holds ``run.json`` (run metadata) and ``procs/``, one
append-only msgpack stream per traced process. Tracers send the same records
to the collector in batches; the collector appends each batch's payload to
the process's file unchanged, so a file is valid up to the last whole record
even when a writer died mid-batch.

FORMAT_VERSION history:
  1: first format (records below).

Records are msgpack arrays whose first item is a :class:`Tag`:

  HEADER   [0, {format, key, pid, ppid, host, argv, executable, python, cwd,
                start_method, parent_token, role, rank, world_size, mode,
                started_ns}]
  METHOD   [1, mid, module, qualname, file, firstline, lastline]
  FIRST    [2, mid, clock]
  LAST     [3, mid, clock]               (latest value wins)
  CALL     [4, mid, clock, thread]       (full mode: entry or resume)
  RETURN   [5, mid, clock, thread]       (full mode: return, yield or unwind)
  SEND     [6, clock, kind, channel, start, end, mid, thread, meta]
  RECV     [7, clock, kind, channel, start, end, mid, thread, meta]
  STATS    [8, {dropped_events, tracer_errors, ...}]   (cumulative; latest wins)
  END      [9, clock, reason]
  UNTRACED [10, pid, argv, reason]
  LINK     [11, kind, end_a, end_b]     (two channel ends of one pipe/socketpair)

``mid`` is a per-process method number introduced by a METHOD record; -1
means "no traced method on the stack".

Channel conventions (what SEND/RECV carry, per ``kind``):

- Streams (``tcp``, ``unix``, ``ssl``): ``channel`` is ``"SRC>DST"`` with the
  sender's and receiver's addresses, identical at both ends for one
  direction; ``start``/``end`` are byte offsets in that direction. A receive
  of [a, b) happens after the send that carried byte b-1. Offsets restarting
  at 0 on the same channel mean a new connection (generation).
- Process lifecycle: ``proc`` (parent SEND at spawn/fork, child RECV as its
  first event; channel = spawn token, start 0, end 1) and ``exit`` (child SEND
  as its last event, parent RECV when wait/join returns; channel =
  ``"HOST:PID"``).
- Messages (``mp``, ``zmq``, ``udp``, ``unixgram``, ``pipe``, ``torch``):
  ``start`` is the message's index on that channel as counted by that end,
  ``end = start + 1``; ``meta["fp"]`` a payload fingerprint where both ends can
  compute it; ``meta["fanout"] = True`` on a send that many receivers get
  (PUB/SUB, broadcast). LINK records tie two channel ends together. torch
  collectives use ``channel = "GROUP:SEQ"`` with ``meta["op"]`` and
  ``meta["role"]`` (``"all"``, ``"root"``, ``"leaf"``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from enum import IntEnum
from pathlib import Path
from typing import Any

import msgpack

from distea.model import (
    ChannelLink,
    CallEvent,
    Execution,
    MessageEvent,
    Method,
    ProcessInfo,
    RunData,
    UntracedChild,
)

FORMAT_VERSION = 1
RUN_META = "run.json"
PROCS_DIR = "procs"
PROC_SUFFIX = ".msgpack"
UNTRACED_DIR = "untraced"
DEFAULT_RUNS_DIR = Path(".distea") / "runs"
WIRE_MAGIC = b"distea-batch"
"""First frame of every tracer → collector message."""


class Tag(IntEnum):
    HEADER = 0
    METHOD = 1
    FIRST = 2
    LAST = 3
    CALL = 4
    RETURN = 5
    SEND = 6
    RECV = 7
    STATS = 8
    END = 9
    UNTRACED = 10
    LINK = 11


class TraceFormatError(Exception):
    """A run directory or trace that distea cannot read; the message says why."""


def new_run_id() -> str:
    """A sortable, unique-enough id: time first so ``ls`` lists runs in order."""
    return time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid() % 100000:05d}"


def process_file_name(key: str) -> str:
    """File name for a process key (keys hold ``:``, which some tools dislike)."""
    return key.replace(":", "_").replace("/", "_") + PROC_SUFFIX


def create_run_dir(path: Path) -> Path:
    """Make a fresh run directory, private to this user (it holds the ipc socket)."""
    path.mkdir(parents=True, exist_ok=False, mode=0o700)
    os.chmod(path, 0o700)
    (path / PROCS_DIR).mkdir(mode=0o700)
    return path


def write_run_meta(path: Path, meta: dict[str, Any]) -> None:
    """Write run.json atomically so a reader never sees half of it."""
    tmp = path / (RUN_META + ".tmp")
    tmp.write_text(json.dumps({"format": FORMAT_VERSION, **meta}, indent=2, sort_keys=True))
    tmp.replace(path / RUN_META)


def read_run_meta(path: Path) -> dict[str, Any]:
    meta_file = path / RUN_META
    if not path.is_dir():
        raise TraceFormatError(f"no run directory at {path}")
    if not meta_file.is_file():
        raise TraceFormatError(f"{path} is not a distea run directory (no {RUN_META})")
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, ValueError) as exc:
        raise TraceFormatError(f"{meta_file} is unreadable: {exc}") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("format"), int):
        raise TraceFormatError(f"{meta_file} is not distea run metadata")
    check_version(meta["format"], str(meta_file))
    return meta


def check_version(version: object, where: str) -> None:
    if not isinstance(version, int) or version < 1:
        raise TraceFormatError(f"{where}: not a distea trace (format {version!r})")
    if version > FORMAT_VERSION:
        raise TraceFormatError(
            f"{where} was written in trace format {version}, newer than this distea reads "
            f"(format {FORMAT_VERSION}); upgrade distea to read it"
        )


def latest_run(base: Path = DEFAULT_RUNS_DIR) -> Path:
    """The most recent run under ``base`` (run ids sort by time)."""
    runs = sorted(p for p in base.glob("*") if (p / RUN_META).is_file()) if base.is_dir() else []
    if not runs:
        raise TraceFormatError(
            f"no runs under {base}; record one with: distea run -- python app.py"
        )
    return runs[-1]


def iter_records(path: Path, problems: list[str]) -> Iterator[list[Any]]:
    """Yield the whole records of one process log; note damage in ``problems``.

    A torn last record (writer killed mid-write) or garbage in the middle
    stops reading that file: everything before it is kept and the loss is
    reported, never raised.
    """
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=1 << 30)
    count = 0
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            unpacker.feed(chunk)
            try:
                for record in unpacker:
                    if not isinstance(record, list) or not record or not isinstance(record[0], int):
                        problems.append(
                            f"{path.name}: unexpected data after {count} records; rest ignored"
                        )
                        return
                    count += 1
                    yield record
            except (ValueError, msgpack.UnpackException) as exc:
                problems.append(f"{path.name}: corrupt after {count} records ({exc}); rest ignored")
                return
    if unpacker.tell() < path.stat().st_size:
        problems.append(f"{path.name}: last record truncated after {count} whole records")


def load_run(path: Path | str) -> RunData:
    """Read a whole run directory into :class:`RunData`."""
    path = Path(path)
    meta = read_run_meta(path)
    data = RunData(path=str(path), meta=meta)
    procs = path / PROCS_DIR
    for log in sorted(procs.glob("*" + PROC_SUFFIX)) if procs.is_dir() else []:
        _load_process(log, data)
    for note_file in sorted((path / UNTRACED_DIR).glob("*.json")):
        _load_untraced_note(note_file, data)
    for note in meta.get("collector", {}).get("problems", []):
        data.problems.append(str(note))
    for info in data.processes.values():
        if not info.complete:
            data.problems.append(
                f"process {info.pid} ({info.role}) ended without a final flush "
                "(killed?): events after its last flush are lost"
            )
        if info.dropped_events:
            data.problems.append(
                f"process {info.pid} ({info.role}) dropped {info.dropped_events} events "
                "(collector slow or unreachable)"
            )
    return data


def _load_untraced_note(note_file: Path, data: RunData) -> None:
    """A child that could not load the tracer left this note instead of a log."""
    try:
        note = json.loads(note_file.read_text())
        data.untraced.append(UntracedChild(
            str(note.get("parent_token") or ""), int(note["pid"]),
            tuple(note.get("argv", ())), str(note["reason"])))
    except (OSError, ValueError, KeyError, TypeError):
        data.problems.append(f"untraced/{note_file.name}: unreadable note; skipped")


def _load_process(log: Path, data: RunData) -> None:
    problems = data.problems
    records = iter_records(log, problems)
    first = next(records, None)
    if first is None:
        problems.append(f"{log.name}: empty process log")
        return
    if first[0] != Tag.HEADER or len(first) < 2 or not isinstance(first[1], dict):
        problems.append(f"{log.name}: does not start with a process header; skipped")
        return
    header = first[1]
    check_version(header.get("format"), str(log))
    key = str(header["key"])
    names: dict[int, str] = {}
    firsts: dict[str, int] = {}
    lasts: dict[str, int] = {}
    messages: list[MessageEvent] = []
    calls: list[CallEvent] = []
    stats: dict[str, Any] = {}
    end_reason: str | None = None
    for rec in records:
        try:
            tag = rec[0]
            if tag == Tag.LAST:
                name = names[rec[1]]
                if rec[2] > lasts.get(name, -1):
                    lasts[name] = rec[2]
            elif tag == Tag.SEND or tag == Tag.RECV:
                _, clock, kind, channel, start, end, mid, thread, meta = rec
                messages.append(
                    MessageEvent(
                        key, clock, "send" if tag == Tag.SEND else "recv", kind, channel,
                        start, end, names.get(mid), thread, meta,
                    )
                )
            elif tag == Tag.CALL or tag == Tag.RETURN:
                _, mid, clock, thread = rec
                calls.append(CallEvent(key, names[mid], clock, thread, tag == Tag.CALL))
                if clock > lasts.get(names[mid], -1):
                    lasts[names[mid]] = clock
            elif tag == Tag.FIRST:
                name = names[rec[1]]
                firsts.setdefault(name, rec[2])
                if rec[2] > lasts.get(name, -1):
                    lasts[name] = rec[2]
            elif tag == Tag.METHOD:
                _, mid, module, qualname, file, firstline, lastline = rec
                name = f"{module}.{qualname}"
                names[mid] = name
                data.methods.setdefault(name, Method(name, module, qualname, file, firstline,
                                                     lastline))
            elif tag == Tag.STATS:
                stats = rec[1]
                if "role" in stats:
                    header = {**header, **{k: stats[k] for k in ("role", "rank", "world_size")}}
            elif tag == Tag.END:
                end_reason = str(rec[2])
            elif tag == Tag.LINK:
                data.links.append(ChannelLink(key, str(rec[1]), str(rec[2]), str(rec[3])))
            elif tag == Tag.UNTRACED:
                data.untraced.append(UntracedChild(key, rec[1], tuple(rec[2]), str(rec[3])))
        except (KeyError, ValueError, TypeError, IndexError):
            problems.append(f"{log.name}: malformed record {rec!r:.80}; skipped")
    data.processes[key] = ProcessInfo(
        key=key,
        pid=int(header.get("pid", 0)),
        ppid=int(header.get("ppid", 0)),
        host=str(header.get("host", "")),
        argv=tuple(header.get("argv", ())),
        executable=str(header.get("executable", "")),
        python=str(header.get("python", "")),
        cwd=str(header.get("cwd", "")),
        start_method=str(header.get("start_method", "main")),
        parent_token=header.get("parent_token"),
        role=str(header.get("role", "")),
        rank=header.get("rank"),
        world_size=header.get("world_size"),
        mode=str(header.get("mode", "compact")),
        started_ns=int(header.get("started_ns", 0)),
        end_reason=end_reason,
        dropped_events=int(stats.get("dropped_events", 0)),
        tracer_errors=int(stats.get("tracer_errors", 0)),
    )
    data.executions[key] = {
        name: Execution(key, name, first, max(first, lasts.get(name, first)))
        for name, first in firsts.items()
    }
    messages.sort(key=lambda m: m.clock)
    data.messages[key] = messages
    if calls:
        data.calls[key] = calls
