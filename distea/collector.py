"""ZeroMQ PULL → run directory.

Tracers push batches ``[WIRE_MAGIC, header, payload]`` where the header is
``[format, process_key, seq, final]`` and the payload is whole msgpack
records. The collector appends each payload to that process's log as it
comes, so a crash of anything loses at most what was in flight. A gap in a
process's ``seq`` is a batch that never arrived: counted and reported.

The collector runs as a thread of ``distea run`` (or of ``distea collect``
for multi-host runs); it is never inside a traced process.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import msgpack
import zmq

from distea.traceformat import FORMAT_VERSION, PROCS_DIR, WIRE_MAGIC, process_file_name

POLL_MS = 50


@dataclass
class ProcessStream:
    """What the collector knows of one traced process while the run goes on."""

    key: str
    file: BinaryIO
    next_seq: int = 0
    batches: int = 0
    bytes: int = 0
    lost_batches: int = 0
    final: bool = False
    last_seen: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return int(self.key.split(":")[1])

    @property
    def host(self) -> str:
        return self.key.split(":")[0]


@dataclass
class CollectorStats:
    batches: int = 0
    bytes: int = 0
    rejected: int = 0
    problems: list[str] = field(default_factory=list)


class Collector:
    """Receives every tracer's batches for one run directory."""

    def __init__(
        self,
        run_dir: Path,
        endpoint: str,
        curve_secret_key: bytes | None = None,
        curve_public_key: bytes | None = None,
        authorize: Callable[[zmq.Socket[Any]], None] | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.endpoint = endpoint
        self.streams: dict[str, ProcessStream] = {}
        self.stats = CollectorStats()
        self._context: zmq.Context[Any] = zmq.Context()
        self._socket = self._context.socket(zmq.PULL)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt(zmq.RCVHWM, 0)
        if curve_secret_key is not None and curve_public_key is not None:
            self._socket.curve_server = True
            self._socket.curve_secretkey = curve_secret_key
            self._socket.curve_publickey = curve_public_key
        if authorize is not None:
            authorize(self._socket)
        self._socket.bind(endpoint)
        if endpoint.startswith("tcp://") and endpoint.endswith(":0"):
            self.endpoint = self._socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="distea-collector", daemon=True)
        self._lock = threading.Lock()

    def start(self) -> Collector:
        self._thread.start()
        return self

    def _loop(self) -> None:
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        while not self._stop.is_set():
            if not poller.poll(POLL_MS):
                continue
            while True:
                try:
                    frames = self._socket.recv_multipart(zmq.NOBLOCK, copy=True)
                except zmq.Again:
                    break
                with self._lock:
                    self._store(frames)

    def _store(self, frames: list[bytes]) -> None:
        if len(frames) != 3 or frames[0] != WIRE_MAGIC:
            self.stats.rejected += 1
            return
        try:
            version, key, seq, final = msgpack.unpackb(frames[1])
        except (ValueError, TypeError, msgpack.UnpackException):
            self.stats.rejected += 1
            return
        if version != FORMAT_VERSION or not isinstance(key, str) or key.count(":") < 2:
            self.stats.rejected += 1
            return
        stream = self.streams.get(key)
        if stream is None:
            path = self.run_dir / PROCS_DIR / process_file_name(key)
            stream = ProcessStream(key, path.open("ab", buffering=0))
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

    def open_processes(self) -> list[ProcessStream]:
        """Processes that have not sent their final batch yet."""
        with self._lock:
            return [s for s in self.streams.values() if not s.final]

    def drain(self, timeout: float, quiet: float = 0.3) -> list[ProcessStream]:
        """Wait for open processes on this host to finish or die; return the still-open ones.

        A process that is gone without a final batch was killed: waiting
        longer gains nothing once its last batches had time to arrive.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            now = time.monotonic()
            waiting = [s for s in self.open_processes()
                       if _alive(s) or now - s.last_seen < quiet]
            if not waiting:
                break
            time.sleep(0.05)
        return self.open_processes()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        with self._lock:
            for stream in self.streams.values():
                stream.file.close()
                if stream.lost_batches:
                    self.stats.problems.append(
                        f"process {stream.pid}: {stream.lost_batches} batches never arrived")
        self._socket.close(linger=0)
        self._context.term()


def _alive(stream: ProcessStream) -> bool:
    if stream.host != socket.gethostname():
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
