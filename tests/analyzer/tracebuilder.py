"""Write run directories by hand, record by record, for analyzer tests.

A compact way to describe what tracers would have written::

    b = TraceBuilder(tmp_path / "run")
    a = b.process("A")                       # key "h:1:0", role "A"
    a.run("app.f", first=1, last=3)          # FIRST + LAST records
    a.send(2, "tcp", "a>b", 0, 10)           # SEND [clock 2, bytes 0..10)
    c = b.process("B")
    c.recv(5, "tcp", "a>b", 0, 10)
    c.run("app.g", first=6, last=7)
    path = b.write()

Records are written in the order they are described, in the msgpack layout
of :mod:`distea.traceformat`, so a test can also write damaged logs
(``raw``, ``truncate``). Method names ``pkg.mod.func`` split at the last dot
into module and qualname; write ``pkg.mod:Class.meth`` to split elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgpack

from distea.rundir import PROCS_DIR, RUN_META
from distea.wire import FORMAT_VERSION, Tag, process_file_name

MESSAGE_INDEXED = {"mp", "zmq", "udp", "unixgram", "pipe", "torch", "proc", "exit"}


def split_name(name: str) -> tuple[str, str]:
    if ":" in name:
        module, qualname = name.split(":", 1)
    else:
        module, _, qualname = name.rpartition(".")
    return module, qualname


class ProcBuilder:
    """The records of one process log, in the order they are added."""

    def __init__(self, key: str, header: dict[str, Any]) -> None:
        self.key = key
        self.header = header
        self.records: list[list[Any]] = [[Tag.HEADER, header]]
        self._mids: dict[str, int] = {}
        self._index: dict[tuple[str, str, str], int] = {}
        self._channels: dict[tuple[str, str], int] = {}
        self.truncate_bytes = 0

    @property
    def pid(self) -> int:
        return int(self.header["pid"])

    def method(
        self, name: str, file: str | None = None, firstline: int = 1, lastline: int | None = None
    ) -> int:
        """Declare a method (METHOD record) once; return its mid."""
        if name in self._mids:
            return self._mids[name]
        module, qualname = split_name(name)
        mid = len(self._mids)
        self._mids[name] = mid
        file = file if file is not None else module.replace(".", "/") + ".py"
        lastline = lastline if lastline is not None else firstline + 5
        self.records.append([Tag.METHOD, mid, module, qualname, file, firstline, lastline])
        return mid

    def first(self, name: str, clock: int) -> ProcBuilder:
        self.records.append([Tag.FIRST, self.method(name), clock])
        return self

    def last(self, name: str, clock: int) -> ProcBuilder:
        self.records.append([Tag.LAST, self.method(name), clock])
        return self

    def run(self, name: str, first: int, last: int | None = None) -> ProcBuilder:
        """The method first started at ``first`` and last executed at ``last``."""
        self.first(name, first)
        if last is not None and last != first:
            self.last(name, last)
        return self

    def _message(
        self,
        tag: int,
        clock: int,
        kind: str,
        channel: str,
        start: int | None,
        end: int | None,
        method: str | None,
        thread: int,
        meta: dict[str, Any] | None,
    ) -> ProcBuilder:
        direction = "s" if tag == Tag.SEND else "r"
        if start is None:
            index_key = (direction, kind, channel)
            start = self._index.get(index_key, 0)
            self._index[index_key] = start + 1
        if end is None:
            end = start + 1
        mid = self.method(method) if method is not None else -1
        cid = self._channels.get((kind, channel))
        if cid is None:  # declared before its first use, as the tracer does
            cid = self._channels[(kind, channel)] = len(self._channels)
            self.records.append([Tag.CHANNEL, cid, kind, channel])
        self.records.append([tag, clock, cid, start, end, mid, thread, meta])
        return self

    def send(
        self,
        clock: int,
        kind: str,
        channel: str,
        start: int | None = None,
        end: int | None = None,
        *,
        method: str | None = None,
        thread: int = 1,
        **meta: Any,
    ) -> ProcBuilder:
        """A SEND; message kinds number themselves when ``start`` is left out."""
        return self._message(Tag.SEND, clock, kind, channel, start, end, method, thread,
                             meta or None)

    def recv(
        self,
        clock: int,
        kind: str,
        channel: str,
        start: int | None = None,
        end: int | None = None,
        *,
        method: str | None = None,
        thread: int = 1,
        **meta: Any,
    ) -> ProcBuilder:
        return self._message(Tag.RECV, clock, kind, channel, start, end, method, thread,
                             meta or None)

    def link(self, kind: str, end_a: str, end_b: str) -> ProcBuilder:
        self.records.append([Tag.LINK, kind, end_a, end_b])
        return self

    def untraced(self, pid: int | None, argv: list[str], reason: str,
                 **extra: Any) -> ProcBuilder:
        """An UNTRACED record; ``extra`` (``token``, ``pipes``) as a non-Python child's."""
        self.records.append([Tag.UNTRACED, pid, argv, reason] + ([extra] if extra else []))
        return self

    def stats(self, **stats: Any) -> ProcBuilder:
        self.records.append([Tag.STATS, stats])
        return self

    def end(self, clock: int, reason: str = "exit") -> ProcBuilder:
        self.records.append([Tag.END, clock, reason])
        return self

    def raw(self, record: Any) -> ProcBuilder:
        self.records.append(record)
        return self

    def encode(self) -> bytes:
        data = b"".join(msgpack.packb(rec) for rec in self.records)
        return data[: len(data) - self.truncate_bytes] if self.truncate_bytes else data


class TraceBuilder:
    """A run directory under construction; ``write()`` puts it on disk."""

    def __init__(self, path: Path, *, host: str = "h", meta: dict[str, Any] | None = None) -> None:
        """``meta`` goes into run.json (a finished run by default: ``finished_at`` is set)."""
        self.path = Path(path)
        self.host = host
        self.meta = meta or {}
        self.procs: list[ProcBuilder] = []
        self._next_pid = 1

    def process(
        self,
        role: str,
        *,
        pid: int | None = None,
        ppid: int = 0,
        parent_token: str | None = None,
        complete: bool = True,
        **header: Any,
    ) -> ProcBuilder:
        """Add a process; its key is ``host:pid:0``. ``complete`` adds an END record at write."""
        if pid is None:
            pid = self._next_pid
        self._next_pid = max(self._next_pid, pid + 1)
        key = f"{self.host}:{pid}:0"
        full = {
            "format": FORMAT_VERSION, "key": key, "pid": pid, "ppid": ppid, "host": self.host,
            "argv": ["python", f"{role}.py"], "executable": "python", "python": "3.12.0",
            "cwd": "/", "start_method": "main" if parent_token is None else "spawn",
            "parent_token": parent_token, "role": role, "rank": None, "world_size": None,
            "mode": "compact", "started_ns": pid,
        }
        full.update(header)
        proc = ProcBuilder(key, full)
        proc.complete = complete  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    def write(self) -> Path:
        procs_dir = self.path / PROCS_DIR
        procs_dir.mkdir(parents=True, exist_ok=True)
        (self.path / RUN_META).write_text(
            json.dumps({"format": FORMAT_VERSION, "id": self.path.name, "finished_at": 1.0,
                        **self.meta})
        )
        for proc in self.procs:
            if getattr(proc, "complete", True) and not any(r[0] == Tag.END for r in proc.records):
                last_clock = max((r[2] if r[0] in (Tag.FIRST, Tag.LAST) else r[1]
                                  for r in proc.records
                                  if r[0] in (Tag.FIRST, Tag.LAST, Tag.SEND, Tag.RECV)),
                                 default=0)
                proc.end(last_clock + 1)
            (procs_dir / process_file_name(proc.key)).write_bytes(proc.encode())
        return self.path
