"""Where collected batches go: one append-only log per process in the run directory.

Shared by both collectors: :class:`distea.localcollector.LocalCollector`
(a local run's Unix socket, plain Python) and :class:`distea.collector.Collector`
(ZeroMQ, for runs across hosts). Tracers push batches ``[WIRE_MAGIC, header,
payload]`` where the header is ``[format, process_key, seq, final]`` and the
payload is whole msgpack records. Each payload is appended to its process's
log as it comes, so a crash of anything loses at most what was in flight. A
gap in a process's ``seq`` is a batch that never arrived: counted and
reported.
"""

from __future__ import annotations

import _thread
import os
import time
from _socket import gethostname  # socket's own; the socket module costs distea run ~3 ms

from distea.miniunpack import unpackb
from distea.rundir import PROCS_DIR
from distea.wire import (
    FORMAT_VERSION,
    LOST_DIR,
    UNTRACED_DIR,
    WIRE_CLIENT,
    WIRE_MAGIC,
    process_file_name,
)

TYPE_CHECKING = False  # not typing's: ``distea run`` imports this module (10 ms with it)
if TYPE_CHECKING:
    from os import PathLike
    from typing import Any, BinaryIO

MAX_REFUSALS_KEPT = 100


class ProcessStream:
    """What the collector knows of one traced process while the run goes on.

    Plain classes here, not dataclasses: ``dataclasses`` imports ``inspect``
    (with ``ast``, ``dis``, ``tokenize``), tens of milliseconds of every
    ``distea run`` that a local run's collector would spend before storing
    anything.
    """

    __slots__ = ("batches", "bytes", "file", "final", "key", "last_seen", "lost_batches",
                 "next_seq")

    def __init__(self, key: str, file: BinaryIO) -> None:
        self.key = key
        self.file = file
        self.next_seq = 0
        self.batches = 0
        self.bytes = 0
        self.lost_batches = 0
        self.final = False
        self.last_seen = time.monotonic()

    @property
    def pid(self) -> int:
        return int(self.key.split(":")[1])

    @property
    def host(self) -> str:
        return self.key.split(":")[0]

    def __repr__(self) -> str:
        return f"ProcessStream({self.key!r}, batches={self.batches}, final={self.final})"


class CollectorStats:
    """Counts and notes of a whole collection (plain class: see :class:`ProcessStream`)."""

    def __init__(self) -> None:
        self.batches = 0
        self.bytes = 0
        self.rejected = 0
        self.problems: list[str] = []
        self.refused: list[dict[str, Any]] = []
        """Writers turned away: by the ZAP handler (unknown key) or at the handshake."""
        self.refused_count = 0
        self.clients: list[dict[str, Any]] = []
        """``distea run --connect`` summaries: host, command, exit code, times."""

    def __repr__(self) -> str:
        return f"CollectorStats({vars(self)})"


class RunWriter:
    """The run directory's writing side, fed whole messages by a collector's thread."""

    def __init__(self, run_dir: str | PathLike[str]) -> None:
        self.run_dir = run_dir
        self.streams: dict[str, ProcessStream] = {}
        self.stats = CollectorStats()
        self.last_message = time.monotonic()
        self._lock = _thread.allocate_lock()  # threading.Lock, without threading's imports

    def _accept(self, frames: list[bytes]) -> None:
        """Store one message; a bad one is counted, never ends collection."""
        with self._lock:
            try:
                self._store(frames)
            except OSError as exc:
                self._problem(f"cannot write a batch: {exc.strerror}: {exc.filename}")
            except Exception as exc:
                self.stats.rejected += 1
                self._problem(f"a message could not be stored: {exc!r:.100}")

    def _problem(self, text: str) -> None:
        if text not in self.stats.problems and len(self.stats.problems) < 100:
            self.stats.problems.append(text)

    def _refused(self, address: str, reason: str) -> None:
        with self._lock:
            self.stats.refused_count += 1
            if len(self.stats.refused) < MAX_REFUSALS_KEPT:
                self.stats.refused.append({"address": address, "reason": reason,
                                           "at": time.time()})

    def _store(self, frames: list[bytes]) -> None:
        self.last_message = time.monotonic()
        if len(frames) == 2 and frames[0] == WIRE_CLIENT:
            self._store_client(frames[1])
            return
        if len(frames) != 3 or frames[0] != WIRE_MAGIC:
            self.stats.rejected += 1
            return
        try:
            version, key, seq, final = unpackb(frames[1])  # not msgpack's: 2 ms of every run
        except (ValueError, TypeError):
            self.stats.rejected += 1
            return
        if (version != FORMAT_VERSION or not isinstance(key, str) or key.count(":") < 2
                or not isinstance(seq, int) or not key.split(":")[1].isdigit()):
            self.stats.rejected += 1
            return
        stream = self.streams.get(key)
        if stream is None:
            path = os.path.join(self.run_dir, PROCS_DIR, process_file_name(key))
            stream = ProcessStream(key, open(path, "ab", buffering=0))  # noqa: SIM115
            self.streams[key] = stream
        if seq > stream.next_seq:
            stream.lost_batches += seq - stream.next_seq
        stream.next_seq = max(stream.next_seq, seq + 1)
        stream.file.write(frames[2])
        stream.batches += 1
        stream.bytes += len(frames[2])
        stream.final = stream.final or bool(final)
        stream.last_seen = time.monotonic()
        self.stats.batches += 1
        self.stats.bytes += len(frames[2])

    def _store_client(self, payload: bytes) -> None:
        """A ``distea run --connect`` summary, with the notes its processes left locally."""
        import msgpack

        try:
            client = msgpack.unpackb(payload)
        except (ValueError, TypeError, msgpack.UnpackException):
            self.stats.rejected += 1
            return
        if not isinstance(client, dict):
            self.stats.rejected += 1
            return
        import json

        host = str(client.get("host", "unknown")).replace("/", "_")
        for folder in (UNTRACED_DIR, LOST_DIR):
            notes = client.pop(folder, None)
            if not isinstance(notes, dict):
                continue
            os.makedirs(os.path.join(self.run_dir, folder), mode=0o700, exist_ok=True)
            for name, note in notes.items():
                safe = f"{host}_{os.path.basename(str(name))}"
                with open(os.path.join(self.run_dir, folder, safe), "w") as out:
                    out.write(json.dumps(note))
        self.stats.clients.append(client)

    def open_processes(self) -> list[ProcessStream]:
        """Processes that have not sent their final batch yet."""
        with self._lock:
            return [s for s in self.streams.values() if not s.final]

    def idle_for(self, since: float | None = None) -> float:
        """Seconds since the last message of any kind arrived.

        Before the first one: seconds since ``since`` (a moment from which
        silence counts), or 0 when none is given.
        """
        if not self.stats.batches and not self.stats.clients and not self.stats.rejected:
            return 0.0 if since is None else time.monotonic() - since
        return time.monotonic() - self.last_message

    def summary(self, still_open: list[ProcessStream]) -> dict[str, Any]:
        """The ``collector`` entry of run.json."""
        return {
            "batches": self.stats.batches,
            "bytes": self.stats.bytes,
            "rejected": self.stats.rejected,
            "problems": self.stats.problems,
            "still_open": [s.key for s in still_open],
            "refused": self.stats.refused,
            "refused_count": self.stats.refused_count,
            "clients": self.stats.clients,
            "hosts": sorted({s.host for s in self.streams.values()}),
            "logs": sorted(process_file_name(key) for key in self.streams),
        }

    def _close_logs(self) -> None:
        with self._lock:
            for stream in self.streams.values():
                stream.file.close()
                if stream.lost_batches:
                    self._problem(
                        f"process {stream.pid} on {stream.host}: "
                        f"{stream.lost_batches} batches never arrived")


def alive(stream: ProcessStream) -> bool:
    """Whether the process behind ``stream`` still runs on this host (not a zombie)."""
    if stream.host != gethostname():
        return False
    try:
        os.kill(stream.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _is_zombie(stream.pid) is False


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False
