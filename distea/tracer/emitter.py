"""Batches records and pushes them to the collector without ever blocking.

Invariants:
- the traced program never waits on the collector: sends are non-blocking
  and a full queue drops the batch, counting every record lost;
- memory is bounded: at most ``MAX_PENDING`` records wait here, plus the
  transport's queue of batches in flight (a byte bound, or ZeroMQ's
  high-water mark); while that queue is full, records wait here and leave
  in bigger batches; past the bound, when the collector is slow or gone,
  they are dropped and counted (``dropped``);
- exit is bounded: closing waits at most the linger time for queued batches
  to leave, and much less once the collector has been seen stalling; when
  the wait runs out, ``undelivered`` says so, so that the session can leave
  a note beside the run (``lost/``) that the user will see;
- ``fork`` is safe: a transport with threads (pyzmq's) is closed just
  before it, so the program's fork sees no extra threads, and opened again
  after; the thread-free one (ZMTP over a Unix socket) stays open in the
  parent and is abandoned, untouched, in the child; the child forgets the
  parent's pending records, which the parent sends itself;
- only one thread talks to the transport at a time (neither is
  thread-safe); a thread that finds it busy leaves its records queued.
"""

from __future__ import annotations

import time
from _collections import deque
from _thread import allocate_lock

from distea.tracer import minipack
from distea.tracer.zmtp import ZmtpPush
from distea.wire import FORMAT_VERSION, WIRE_MAGIC, Tag

CHANNEL = int(Tag.CHANNEL)

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any

    from distea.tracer.seams import Record, Transport

BATCH_SIZE = 2048
FLUSH_INTERVAL_S = 0.1
IDLE_FLUSH_INTERVAL_S = 0.01
"""Before the program may block (a receive), flush records this much older than the last flush."""
HIGH_WATER_MARK = 128
FORK_LINGER_MS = 500
STALLED_LINGER_MS = 200
"""Linger at exit once a send has found the queue full: the collector is likely gone."""
MAX_PENDING = 4 * BATCH_SIZE
"""Records kept in this process while the transport's queue is full, before they are dropped."""
PLAIN_BATCHES = 4
PLAIN_BATCH_RECORDS = 64
"""A process's first ``PLAIN_BATCHES`` batches, when they hold at most this many
records, are packed by :mod:`distea.tracer.minipack`, so that a process that
sends only those never imports ``msgpack``; every later batch by msgpack's C packer."""
MAX_QUEUED_BYTES = 8 << 20
"""The local transport's queue bound: about what ZeroMQ's high-water mark of
``HIGH_WATER_MARK`` full batches holds."""


def open_transport(endpoint: str, curve: tuple[str, str, str] | None,
                   linger_ms: int) -> Transport:
    """The plain-Python transport for a local ``ipc://`` collector, else pyzmq's."""
    if curve is None and endpoint.startswith("ipc://"):
        return ZmtpPush(endpoint[len("ipc://"):], MAX_QUEUED_BYTES)
    from distea.tracer.zmqpush import PyzmqPush  # pyzmq is imported only for these runs

    return PyzmqPush(endpoint, curve, HIGH_WATER_MARK, linger_ms)


_msgpack: Any = None


def load_msgpack() -> Any:
    """The ``msgpack`` module, imported at its first use (kept here: the bootstrap
    hook may drop it from ``sys.modules``, see its ``_import_tracer``)."""
    global _msgpack
    if _msgpack is None:
        import msgpack

        _msgpack = msgpack
    return _msgpack


def array_header_size(length: int) -> int:
    """Bytes of the msgpack header of an array of ``length`` items."""
    return 1 if length < 16 else 3 if length < 1 << 16 else 5


class Emitter:
    def __init__(
        self,
        endpoint: str,
        key: str,
        curve: tuple[str, str, str] | None = None,
        linger_ms: int = 2000,
    ) -> None:
        self.endpoint = endpoint
        self.key = key
        self.curve = curve
        self.linger_ms = linger_ms
        self.pending: list[Record] = []
        """Records not yet handed to the transport. Always this one list (cleared, never
        replaced), so that callers on the hot path may keep its ``append``."""
        self.dropped = 0
        """Records given up on: batches refused by a full queue, or built with no socket."""
        self.sent_batches = 0
        self.flush_at = BATCH_SIZE
        """``add`` flushes at this many pending records (more while the queue is full)."""
        self.deferred = 0
        """Flushes that found the transport's queue full and kept their records for the next one."""
        self.stalled = False
        """Records were dropped: the collector is slow, stuck or gone."""
        self.undelivered: tuple[int, int] | None = None
        """Set by close() when the linger ran out: (batches, records) possibly never sent."""
        self._recent: deque[int] = deque(maxlen=HIGH_WATER_MARK)
        """Record counts of the latest batches handed over (what could still be queued)."""
        self._seq = 0
        self._last_flush = time.monotonic()
        self._lock = allocate_lock()
        self._packer: Any = None
        """msgpack's Packer, from the first batch that :mod:`minipack` does not pack."""
        self._suspended = False
        self._held_for_fork = False
        self._closed = False
        self._transport: Transport | None = None

    def add(self, record: Record) -> None:
        """Queue one record; send a batch when enough has gathered."""
        self.pending.append(record)
        if len(self.pending) >= self.flush_at:
            self.flush()

    def _take_pending(self) -> list[Record]:
        """Empty ``pending`` in place and return what it held.

        Only what was there when the copy was made is removed: a record
        another thread appends meanwhile stays for the next flush.
        """
        pending = self.pending
        records = pending[:]
        del pending[:len(records)]
        return records

    @property
    def last_flush(self) -> float:
        """``time.monotonic()`` of the latest flush attempt."""
        return self._last_flush

    def flush(self, final: bool = False, wait: bool = False) -> None:
        """Send pending records; ``final`` tells the collector this process is done.

        Without ``wait`` a thread that finds another one sending leaves its
        records for the next flush rather than block the program.
        """
        if self._suspended:
            return
        wait = wait or final
        if not self._lock.acquire(blocking=wait, timeout=self.linger_ms / 1000 if wait else -1):
            return
        try:
            records = self._take_pending()
            self._last_flush = time.monotonic()
            if not records and not final:
                return
            self._send(records, final)
        finally:
            self._lock.release()

    def _send(self, records: list[Any], final: bool) -> None:
        """Hand one batch to the transport; called with the lock held.

        When the transport's queue is full (the collector is behind), the
        records are kept for the next flush, which sends them in a bigger
        batch: a burst of small flushes turns into fewer, larger batches
        instead of losses. Only past ``MAX_PENDING`` records are they dropped
        (and counted). The final batch may wait for room, up to the linger time.
        """
        if self._transport is None and not self._closed:
            self._transport = open_transport(self.endpoint, self.curve, self.linger_ms)
        transport = self._transport
        if transport is None:
            self._lose(records)
            return
        if not final and not transport.has_room():
            self._back_off(records)
            return
        payload, header = self._pack(records, [FORMAT_VERSION, self.key, self._seq, final])
        timeout_ms = (STALLED_LINGER_MS if self.stalled else self.linger_ms) if final else None
        if transport.send([WIRE_MAGIC, header, payload], timeout_ms):
            self.sent_batches += 1
            self._recent.append(len(records))
            self.flush_at = BATCH_SIZE
        elif final:
            self._drop(records)
        else:
            self._back_off(records)
            return
        self._seq += 1

    def _pack(self, records: list[Any], header: list[Any]) -> tuple[memoryview, bytes]:
        """The batch's records back to back (the array's own header cut off: one C
        call packs the whole batch, the collector wants the records), and its header."""
        cut = array_header_size(len(records))
        if self._packer is None and self._seq < PLAIN_BATCHES \
                and len(records) <= PLAIN_BATCH_RECORDS:
            try:
                return memoryview(minipack.packb(records))[cut:], minipack.packb(header)
            except minipack.Unpackable:
                pass
        if self._packer is None:
            self._packer = load_msgpack().Packer()
        packer = self._packer
        return memoryview(packer.pack(records))[cut:], packer.pack(header)

    def _back_off(self, records: list[Any]) -> None:
        """The queue is full: keep ``records`` for the next flush, or drop them past the bound."""
        if len(records) + len(self.pending) <= MAX_PENDING:
            self.pending[:0] = records
            self.deferred += 1
            self.flush_at = len(self.pending) + BATCH_SIZE // 8  # not at every add
        else:
            self._drop(records)
            self._seq += 1

    def _drop(self, records: list[Any]) -> None:
        self._lose(records)
        self.stalled = True

    def _lose(self, records: list[Any]) -> None:
        """Count ``records`` as dropped, all but the CHANNEL declarations among them:
        those go back to the front of the queue, since later message records
        name their channels by the numbers they declare."""
        declarations = [record for record in records if record[0] == CHANNEL]
        self.dropped += len(records) - len(declarations)
        if declarations:
            self.pending[:0] = declarations

    def close(self, linger_ms: int | None = None) -> None:
        """Let queued batches leave (bounded by the linger time), then close for good."""
        self._closed = True
        self._disconnect(linger_ms)

    def _disconnect(self, linger_ms: int | None) -> None:
        """Close the transport, waiting at most the linger time for queued batches.

        When the wait runs out, what may still have been queued is recorded
        in ``undelivered`` (an upper bound: the latest batches handed over).
        """
        transport, self._transport = self._transport, None
        if transport is None:
            return
        linger = self.linger_ms if linger_ms is None else linger_ms
        if self.undelivered is not None:
            linger = 0  # a linger already ran out: the collector is gone
        elif self.stalled:
            linger = min(linger, STALLED_LINGER_MS)
        if not transport.close(linger) and self._recent:
            batches, records = self.undelivered or (0, 0)
            self.undelivered = (batches + len(self._recent), records + sum(self._recent))
        self._recent.clear()

    def suspend(self) -> None:
        """Before fork: send what is pending, and close a transport that has threads.

        The lock is taken here and held across the fork: no other thread may
        be inside ``_send`` (or open a new transport) while the transport
        closes and the process forks. ``resume`` (parent) releases it;
        the child makes a new lock.
        """
        held = self._lock.acquire(timeout=self.linger_ms / 1000)
        self._suspended = True
        self._held_for_fork = held
        try:
            records = self._take_pending()
            if records and held:
                self._send(records, False)
            elif records:
                self.pending[:0] = records
            if held and self._transport is not None and self._transport.closes_at_fork:
                self._disconnect(min(self.linger_ms, FORK_LINGER_MS))
        except Exception:
            self.resume()
            raise

    def resume(self) -> None:
        """After fork, in the parent: go on; the next flush reconnects.

        Not reconnecting here keeps the fork itself free of our threads:
        Python 3.13 counts threads for its fork warning after this hook.
        """
        self._suspended = False
        if self._held_for_fork:
            self._held_for_fork = False
            self._lock.release()

    def reset_after_fork(self, key: str) -> None:
        """In a forked child: new identity, new connection, none of the parent's records."""
        self._suspended = False
        self._held_for_fork = False
        self._lock = allocate_lock()
        if self._transport is not None:
            self._transport.abandon()
            self._transport = None
        self.key = key
        self.pending.clear()
        self.dropped = 0
        self.sent_batches = 0
        self.deferred = 0
        self.flush_at = BATCH_SIZE
        self.stalled = False
        self.undelivered = None
        self._recent = deque(maxlen=HIGH_WATER_MARK)
        self._seq = 0
