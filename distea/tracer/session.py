"""The tracer of one process: clock, monitor, emitter and channels together.

Channels (``distea.tracer.channels.*``) call :meth:`TracerSession.send` and
:meth:`TracerSession.recv` after the program's own operation succeeded; the
session numbers the event, remembers which method was on the stack and, for
a receive, opens a new epoch. Every entry point that the program can reach
is wrapped so that a tracer error is counted, never raised (DESIGN rule 1).
"""

from __future__ import annotations

import _signal
import atexit
import itertools
import os
import sys
import time
from _thread import _local as thread_local
from _thread import get_ident
from time import monotonic

from distea.tracer.clock import LogicalClock
from distea.tracer.config import PARENT_TOKEN_ENV, START_METHOD_ENV, TracerConfig
from distea.tracer.emitter import BATCH_SIZE, FLUSH_INTERVAL_S, IDLE_FLUSH_INTERVAL_S, Emitter
from distea.tracer.idleflush import IdleFlusher
from distea.tracer.monitor import Monitor
from distea.tracer.scope import Scope
from distea.wire import FORMAT_VERSION, LOST_DIR, Tag, process_file_name

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from distea.tracer.seams import Channel, RecvRecorder, SendRecorder
    from distea.tracer.sigwatch import SignalWatch

SEND, RECV, CHANNEL = int(Tag.SEND), int(Tag.RECV), int(Tag.CHANNEL)
"""Plain ints: packing an IntEnum member costs more than packing its value."""

FLUSHED_SIGNALS = (_signal.SIGTERM, _signal.SIGHUP)
"""Signals whose default action ends the process without atexit: flushed first.
(``_signal``'s functions and plain numbers: ``signal`` imports ``enum``, ~3 ms.)"""
WRAPPED_HANDLER = "_distea_handler"
"""Attribute of the signal channel's wrapper of a handler: the handler it calls."""

PERIODIC_S = 0.5
"""At most this long between sends of last clocks and stats while messages flow."""
READY_CHECK_INTERVAL_S = 0.001
"""After a receive was found ready, skip the readiness check this long (busy loops)."""

RANK_VARIABLES = (
    ("RANK", "WORLD_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
)


HOST = os.uname().nodename
"""This host's name: what ``socket.gethostname()`` returns (both are uname(2)'s
node name), without importing ``socket`` (with ``enum``, ``selectors``, ...:
about 5 ms of every traced process's start-up). Every tracer module names
this host by it, so that both ends of a channel agree."""


def process_key(pid: int | None = None) -> str:
    return f"{HOST}:{pid or os.getpid()}:{time.time_ns()}"


def rank_of(environ: os._Environ[str] | dict[str, str]) -> tuple[int | None, int | None]:
    for rank_var, size_var in RANK_VARIABLES:
        rank = environ.get(rank_var)
        if rank is not None and rank.isdigit():
            size = environ.get(size_var, "")
            return int(rank), int(size) if size.isdigit() else None
    return None, None


def describe_role(argv: list[str], rank: int | None, world_size: int | None) -> str:
    """A short human label for a process: its rank, mp name, or program name."""
    if rank is not None:
        return f"rank {rank}/{world_size}" if world_size else f"rank {rank}"
    mp = sys.modules.get("multiprocessing")
    if mp is not None:
        name = mp.current_process().name
        if name != "MainProcess":
            return name
    argv = program_args(argv)
    if len(argv) > 1 and argv[0] == "-m":
        return argv[1]
    if argv and argv[0] not in ("", "-c"):
        return os.path.basename(argv[0])
    return "python -c" if argv and argv[0] == "-c" else "python"


OPTIONS_WITH_VALUE = ("-W", "-X", "--check-hash-based-pycs")


def raised_by_a_signal_handler(exc: BaseException) -> bool:
    """Whether ``exc`` came out of a Python signal handler, the program's or a wrapper of it.

    CPython runs a handler in the main thread between two bytecodes of whatever
    runs there, tracer code included. What the handler raises (``signal.alarm``
    with a handler that raises ``TimeoutError`` is a common time-out) belongs to
    the program, and a tracer guard that caught it as a failure of its own kept
    it from the program: CPython's ``test_io`` ``check_reentrant_write`` looped
    for ever traced. Looked up only when a guard has caught something.
    """
    codes = set()
    for signum in _signal.valid_signals():
        try:
            handler = _signal.getsignal(signum)
        except (OSError, ValueError):
            continue
        function = getattr(handler, "func", handler)  # functools.partial
        function = getattr(function, "__func__", function)  # a bound method
        code = getattr(function, "__code__", None)
        if code is not None:
            codes.add(code)
    traceback = exc.__traceback__
    while traceback is not None:
        if traceback.tb_frame.f_code in codes:
            return True
        traceback = traceback.tb_next
    return False


def program_args(argv: list[str]) -> list[str]:
    """The interpreter's arguments without its own options (``-B``, ``-X dev``, ...):
    from ``-c``/``-m`` or the script on."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-c", "-m"):
            return argv[i:]
        if arg.startswith(("-c", "-m")) and not arg.startswith("--"):
            return [arg[:2], arg[2:], *argv[i + 1:]]
        if arg in OPTIONS_WITH_VALUE:
            i += 2
        elif arg.startswith("-") and arg not in ("-", "--"):
            i += 1
        else:
            return argv[i + 1:] if arg == "--" else argv[i:]
    return []


ENDING_AT_ONCE = "os._exit"
"""The final flush of a process that ends at once, with its own status. A SIGTERM or
SIGHUP arriving during any final flush waits for it (a pool's ``terminate`` reached
workers that were exiting, and killed them in the middle of it: their last records
were lost). After this one it is not acted on: untraced, the process would have been
gone by then, and it is the flush that made it late (a forkserver pool's workers leave
through ``os._exit`` and exit 0 untraced). After the flush at interpreter exit it is:
untraced, it would have found the interpreter finalizing and ended it there (a spawn
pool's terminated workers die of it), where ignoring it kept a traced worker
finalizing for ~8 ms more, which the pool's ``join`` waited for."""


class TracerSession:
    def __init__(self, config: TracerConfig) -> None:
        self.config = config
        self.clock = LogicalClock()
        self.key = process_key()
        self.errors = 0
        self._token_counter = 0
        self._role: tuple[str, int | None, int | None] | None = None
        self.local = thread_local()
        self.channels: list[Channel] = []
        curve = None
        if config.curve_server_key and config.curve_public_key and config.curve_secret_key:
            curve = (config.curve_server_key, config.curve_public_key, config.curve_secret_key)
        self.emitter = Emitter(config.endpoint, self.key, curve, config.flush_timeout_ms)
        self.monitor = Monitor(
            Scope(config.root, config.include, config.exclude),
            self.clock,
            self.emitter.add,
            full=config.mode == "full",
        )
        self.finished = False
        self.finishing = False
        """The final flush is under way (a flush-then-die signal waits for its end)."""
        self.pending_signal: int | None = None
        """A flush-then-die signal that came while :attr:`finishing`."""
        self.unseen: list[str] = []
        """What a channel knows it cannot observe in this process (an unknown library
        version, an unsupported API): sent in STATS, a problem line in every analysis."""
        self.flusher = IdleFlusher(self)
        """Sends what waits while the program runs no Python (``idleflush.py``)."""
        self.signal_handler: Callable[[int, Any], None] | None = None
        self.signal_watch: SignalWatch | None = None
        """Sends a flushed signal again whose handler a blocked main thread did not run
        (``sigwatch.py``); the idle flusher's thread looks at every turn."""
        self.audits: list[Callable[[str], None]] = []
        """Checks run at the periodic flush and at the end (``audit(reason)``), before
        the final records: the unseen-traffic detector compares kernel counters there."""
        """Our flush-then-die handler, where startup installed it."""
        self._signals_defaulted: list[tuple[int, Any]] = []
        """(signal, what was installed: our handler or the signal channel's wrapper of it)."""
        self._next_periodic = time.monotonic() + PERIODIC_S
        self._due = [self._next_periodic]
        """When a message event must call :meth:`_service` (a flush or periodic work may
        be due); events before it only append their record. A one-item list: the
        recorders read it through their closure."""
        self._records = self.emitter.pending
        self._method_of_caller = self.monitor.method_of_caller
        self._channel_numbers: dict[str, tuple[int, str]] = {}
        """Channel name → (its number in this process's log, the kind first met with it)."""
        self._declared_channels: dict[tuple[str, str], int] = {}
        """(kind, name) → number, for every CHANNEL record in this process's log."""
        self._next_channel_number = itertools.count()
        """Numbers are taken atomically (two threads may declare at once)."""
        self.blocking_check_at = 0.0
        """Before this ``time.monotonic()``, :meth:`before_blocking` has surely nothing to
        do: channels on a hot path may skip the call."""
        self.stamp: Callable[[], tuple[int, int]]
        """Clock and method for a send that is about to happen.

        Channels take it *before* the bytes leave and pass it to ``send``
        after: once the bytes are out, a reply can come back to another
        thread of this process, and its receive must not get an earlier clock
        than the send that caused it. Like the recorders, it looks for the
        method from its caller's caller: its caller is a channel."""
        self.send: SendRecorder
        self.recv: RecvRecorder
        self.stamp, self.send, self.recv = self._message_recorders()

    # -- start and end ---------------------------------------------------------

    def start(self, start_method: str | None = None) -> None:
        parent_token = os.environ.pop(PARENT_TOKEN_ENV, None)
        method = start_method or os.environ.pop(START_METHOD_ENV, None)
        self._begin(method or ("subprocess" if parent_token else "main"), parent_token)
        self.emitter.flush()  # the collector knows of this process even if it is killed early
        self.monitor.start()
        atexit.register(self._finish_at_exit)
        os.register_at_fork(before=self._before_fork, after_in_parent=self._after_fork_in_parent,
                            after_in_child=self._after_fork_in_child)
        self.flusher.ensure()

    def _begin(self, start_method: str, parent_token: str | None) -> None:
        """Announce this process: header, then the receive of its creation."""
        rank, world_size = rank_of(os.environ)
        argv = list(sys.orig_argv[1:]) if hasattr(sys, "orig_argv") else list(sys.argv)
        self.emitter.add([Tag.HEADER, {
            "format": FORMAT_VERSION,
            "key": self.key,
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "host": HOST,
            "argv": sys.orig_argv,
            "executable": sys.executable,
            "python": sys.version.split()[0],
            "cwd": os.getcwd(),
            "start_method": start_method,
            "parent_token": parent_token,
            "role": describe_role(argv, rank, world_size),
            "rank": rank,
            "world_size": world_size,
            "mode": self.config.mode,
            "started_ns": time.time_ns(),
        }])
        if parent_token:
            self.recv("proc", parent_token, 0, 1)

    def _finish_at_exit(self) -> None:
        """At interpreter exit: say whether the program ended normally or was interrupted.

        An uncaught exception has been printed by then and left in
        ``sys.last_exc``, so Ctrl-C (KeyboardInterrupt) and crashes are told
        apart from a normal end in ``distea show``.
        """
        last = getattr(sys, "last_exc", None)
        if isinstance(last, KeyboardInterrupt):
            self.finish("interrupted")
        elif isinstance(last, BaseException) and not isinstance(last, SystemExit):
            self.finish(f"uncaught {type(last).__name__}")
        else:
            self.finish("exit")

    def finish(self, reason: str) -> None:
        """Final flush: stacks, stats, END. Safe to call twice; never raises."""
        if self.finished:
            return
        if reason == "exit":
            # The interpreter flushes buffered standard streams after the tracer is
            # gone: a channel that records them (pipes) flushes them first.
            for channel in self.channels:
                flush = getattr(channel, "flush_at_exit", None)
                if flush is not None:
                    self.guarded(flush)
        self.finished = True
        self.finishing = True
        try:
            self._finish(reason)
        finally:
            self.finishing = False
            signum, self.pending_signal = self.pending_signal, None
            if signum is not None and reason != ENDING_AT_ONCE:
                _signal.signal(signum, _signal.SIG_DFL)  # it came while we flushed
                _signal.raise_signal(signum)

    def _finish(self, reason: str) -> None:
        try:
            self._audit(reason)
            self.flusher.stop(for_good=True)
            if self.signal_watch is not None:
                self.signal_watch.stop()
            self.monitor.stop()
            if reason != "exec":
                self.send("exit", f"{HOST}:{os.getpid()}", 0, 1)
            self.monitor.mark_stacks_executing()
            self._emit_lasts_and_stats()
            self.emitter.add([Tag.END, self.clock.value, reason])
            self.emitter.flush(final=True)
            self.emitter.close()
        except Exception:
            self.tracer_error()
        if self.emitter.dropped or self.emitter.undelivered:
            self._write_lost_note(reason)
        for channel in reversed(self.channels):
            try:
                channel.uninstall()
            except Exception:
                self.tracer_error()

    def _emit_lasts_and_stats(self) -> None:
        for record in self.monitor.drain_lasts():
            self.emitter.add(record)
        stats: dict[str, Any] = {
            "dropped_events": self.emitter.dropped,
            "tracer_errors": self.errors,
        }
        if self.unseen:
            stats["unseen"] = list(self.unseen)
        rank, world_size = rank_of(os.environ)
        argv = list(sys.orig_argv[1:])
        role = describe_role(argv, rank, world_size)
        if self._role != (role, rank, world_size):
            self._role = (role, rank, world_size)
            stats.update(role=role, rank=rank, world_size=world_size)
        self.emitter.add([Tag.STATS, stats])

    def _write_lost_note(self, reason: str) -> None:
        """The collector may never see this process's final STATS: say so beside the run.

        ``lost/<process>.json`` in the run directory (when this host has it)
        is read by the loader, so the loss shows in every summary and query.
        """
        emitter = self.emitter
        batches, records = emitter.undelivered or (0, 0)
        note = {
            "key": self.key,
            "pid": os.getpid(),
            "host": HOST,
            "argv": list(sys.orig_argv),
            "end_reason": reason,
            "dropped_records": emitter.dropped,
            "undelivered_batches": batches,
            "undelivered_records": records,
            "sent_batches": emitter.sent_batches,
            "endpoint": self.config.endpoint,
            "tracer_errors": self.errors,
        }
        try:
            folder = os.path.join(self.config.run_dir, LOST_DIR)
            os.makedirs(folder, mode=0o700, exist_ok=True)
            path = os.path.join(folder, process_file_name(self.key)[: -len(".msgpack")] + ".json")
            tmp = f"{path}.{os.getpid()}.tmp"
            import json  # only when something was lost

            with open(tmp, "w") as stream:
                json.dump(note, stream)
            os.replace(tmp, path)
        except Exception:
            self.tracer_error()

    # -- fork ----------------------------------------------------------------------

    def _default_our_signal_handlers(self) -> None:
        """Around a fork, our flush-on-signal handlers give way to the default action.

        CPython discards a signal that reaches a freshly forked child before
        its post-fork clean-up when a Python handler is installed: a parent's
        ``kill(child, SIGTERM)`` right after ``fork`` would be lost, and the
        child would live on. With SIG_DFL the kernel acts on it, as untraced.
        """
        handler = self.signal_handler
        if handler is None:
            return
        for signum in FLUSHED_SIGNALS:
            installed = _signal.getsignal(signum)
            if getattr(installed, WRAPPED_HANDLER, installed) is handler:
                try:
                    _signal.signal(signum, _signal.SIG_DFL)
                except ValueError:  # not the main thread: keep ours
                    continue
                self._signals_defaulted.append((signum, installed))

    def _restore_our_signal_handlers(self) -> None:
        defaulted, self._signals_defaulted = self._signals_defaulted, []
        for signum, installed in defaulted:
            if _signal.getsignal(signum) == _signal.SIG_DFL:
                _signal.signal(signum, installed)

    def _before_fork(self) -> None:
        if self.finished:
            return
        try:
            self.flusher.stop()  # no thread of ours across fork (idleflush.py)
            self._default_our_signal_handlers()
            self.local.fork_token = self.spawn_token({"fork": True})
            self._emit_lasts_and_stats()
            self.emitter.suspend()
        except Exception:
            self.tracer_error()

    def _after_fork_in_parent(self) -> None:
        if self.finished:
            return
        try:
            self._restore_our_signal_handlers()
            self.emitter.resume()
            self._due[0] = 0.0  # the next message event restarts the idle flusher
        except Exception:
            self.tracer_error()

    def _after_fork_in_child(self) -> None:
        if self.finished:
            return
        try:
            token = getattr(self.local, "fork_token", None)
            self.clock.reset()
            self._channel_numbers.clear()
            self._declared_channels.clear()
            self.key = process_key()
            self.errors = 0
            self._role = None
            self._next_periodic = self._due[0] = time.monotonic() + PERIODIC_S
            self.blocking_check_at = 0.0
            self.local = thread_local()
            self.emitter.reset_after_fork(self.key)
            self.monitor.reset_after_fork()
            self._begin("fork", token)
            self.monitor.adopt_stack(sys._getframe(1))
            self._restore_our_signal_handlers()
            if self.signal_watch is not None:
                self.signal_watch.reset_after_fork()
            self.flusher.reset_after_fork()
        except Exception:
            self.tracer_error()

    # -- events used by channels -----------------------------------------------

    def spawn_token(self, meta: dict[str, Any] | None = None) -> str:
        """Record the parent side of a process creation; the child receives the token."""
        self._token_counter += 1
        token = f"{self.key}#{self._token_counter}"
        self.send("proc", token, 0, 1, meta)
        self.emitter.flush()
        return token

    def _message_recorders(
        self,
    ) -> tuple[Callable[[], tuple[int, int]], SendRecorder, RecvRecorder]:
        """``stamp``, ``send`` and ``recv``: what channels call at every message.

        They are closures over the objects they touch (the clock, the pending
        records list, the monitor, the channel table), which all live as long
        as the session and are reset in place after ``fork``: each message then
        costs one tuple, one clock read, one dict lookup for its channel's
        number and the method lookup, with no attribute chains. The method
        lookup starts at the caller's caller: the caller is always tracer code
        (a channel's wrapper or helper). The re-arming of the epoch a receive
        opens is only called when something was disabled since the last one.

        A message record names its channel by number (trace format 2): the
        first message on a channel appends a CHANNEL record declaring it, so a
        record is less than half as long to store, and cheaper to pack, than
        with the channel's name in it.
        """
        clock = self.clock
        records = self.emitter.pending
        append = records.append
        method_of_caller = self._method_of_caller
        monitor = self.monitor
        to_rearm = monitor.to_rearm
        due = self._due
        numbers_get = self._channel_numbers.get
        declare = self._declare_channel

        def take_stamp() -> tuple[int, int]:
            value = clock.value = clock.value + 1
            return value, method_of_caller(2)

        def send(kind: str, channel: str, start: int, end: int,
                 meta: dict[str, Any] | None = None,
                 stamp: tuple[int, int] | None = None) -> None:
            if stamp is None:
                value = clock.value = clock.value + 1
                mid = method_of_caller(2)
            else:
                value, mid = stamp
            known = numbers_get(channel)
            number = known[0] if known is not None and known[1] is kind else declare(kind, channel)
            append((SEND, value, number, start, end, mid, get_ident(), meta))
            if monotonic() >= due[0] or len(records) >= BATCH_SIZE:
                self._service()

        def recv(kind: str, channel: str, start: int, end: int,
                 meta: dict[str, Any] | None = None) -> None:
            value = clock.value = clock.value + 1
            known = numbers_get(channel)
            number = known[0] if known is not None and known[1] is kind else declare(kind, channel)
            append((RECV, value, number, start, end, method_of_caller(2), get_ident(), meta))
            clock.epoch = value
            if to_rearm:
                monitor.new_epoch()
            if monotonic() >= due[0] or len(records) >= BATCH_SIZE:
                self._service()

        return take_stamp, send, recv

    def _declare_channel(self, kind: str, channel: str) -> int:
        """The number of ``kind``'s ``channel`` in this log, declared by a CHANNEL
        record the first time (the recorders' slow path).

        The same name met with two kinds (a socket's plain and SSL layers, say)
        gets two numbers; only the first is in the quick table, the other is
        found here. Two threads declaring at once may give one channel two
        numbers: each is declared before use, which is all a reader needs.
        """
        number = self._declared_channels.get((kind, channel))
        if number is None:
            number = next(self._next_channel_number)
            self.emitter.pending.append((CHANNEL, number, kind, channel))
            self._declared_channels[(kind, channel)] = number
            self._channel_numbers.setdefault(channel, (number, kind))
        return number

    def before_blocking(self, ready: Callable[..., bool] | None = None, *ready_args: Any) -> None:
        """Channels call this just before a receive that may block.

        Pending records (and moved last clocks) leave first, so that a process
        killed while it waits has lost nothing it did. To keep request/reply
        loops cheap, no flush is made for a receive that ``ready(*ready_args)``
        (when the channel can tell; it may wait a few milliseconds to find
        out) says will not really wait, however old the last flush: a busy
        loop's records leave with the periodic flush (``FLUSH_INTERVAL_S``)
        instead of one flush every ``IDLE_FLUSH_INTERVAL_S``, each of which
        also wakes the collector. ``ready`` itself is asked at most once a
        millisecond while it keeps answering yes, so a process killed while it
        waits has lost at most its last millisecond. Without ``ready``, a
        flush less than ``IDLE_FLUSH_INTERVAL_S`` after the previous one is
        skipped. ``ready`` is not guarded: what a signal handler raises while
        it waits belongs to the program.
        """
        if self.finished or not (self._records or self.monitor.dirty_states):
            return
        emitter = self.emitter
        now = monotonic()
        if ready is None or not self._records:
            if now - emitter.last_flush < IDLE_FLUSH_INTERVAL_S:
                return
        else:
            if now < self.blocking_check_at:
                return  # a receive was found ready a moment ago: a busy loop
            if ready(*ready_args):
                self.blocking_check_at = now + READY_CHECK_INTERVAL_S
                return
        try:
            for record in self.monitor.drain_lasts():
                emitter.add(record)
            if emitter.pending:
                emitter.flush()
        except Exception:
            self.tracer_error()

    def service_if_due(self) -> None:
        """What a new message record would have triggered (a due flush, periodic
        work), for a channel that extended a pending record instead (pipes)."""
        if monotonic() >= self._due[0]:
            self._service()

    def _service(self) -> None:
        """Flush what has waited long enough or filled a batch; now and then send
        last clocks and stats too. Message events call this when ``_due`` has
        come or a batch may be full, so most of them pay one clock read."""
        try:
            self.flusher.ensure()
            emitter = self.emitter
            now = monotonic()
            if now >= self._next_periodic:
                self._next_periodic = now + PERIODIC_S
                if not self.finished:
                    self.periodic()
            elif self._records and (now - emitter.last_flush > FLUSH_INTERVAL_S
                                    or len(self._records) >= emitter.flush_at):
                emitter.flush()
            self._due[0] = min(self._next_periodic, emitter.last_flush + FLUSH_INTERVAL_S)
        except Exception:
            self.tracer_error()

    def link(self, kind: str, end_a: str, end_b: str) -> None:
        """Two channel ends that are one pipe or socket pair."""
        self.emitter.add([Tag.LINK, kind, end_a, end_b])

    def say_unseen(self, text: str) -> None:
        """Note once what this process's channels cannot observe (a problem line)."""
        if text not in self.unseen:
            self.unseen.append(text)

    def untraced(self, pid: int | None, argv: list[str], reason: str,
                 extra: dict[str, Any] | None = None) -> None:
        self.emitter.add([Tag.UNTRACED, pid, argv, reason] + ([extra] if extra else []))

    def periodic(self) -> None:
        """Send last clocks and stats so a killed process loses little."""
        self._audit("periodic")
        self._emit_lasts_and_stats()
        self.emitter.flush()

    def flush_idle(self) -> None:
        """From the idle flusher's thread: send moved last clocks and pending records.

        Never waits for the emitter: a thread that is sending now will take
        these records too, or leave them for the next look.
        """
        if self.finished:
            return
        for record in self.monitor.drain_lasts():
            self.emitter.add(record)
        self.emitter.flush()

    def _audit(self, reason: str) -> None:
        for audit in self.audits:
            try:
                audit(reason)
            except Exception:
                self.tracer_error()

    def guarded(self, action: Callable[[], None]) -> None:
        """Run tracer work from inside user code: count a failure, never raise."""
        try:
            action()
        except Exception:
            self.tracer_error()

    def tracer_error(self) -> None:
        """Count a failure of tracer code, caught before it reached the program.

        Called from the ``except`` block that caught it: an exception that a
        signal handler of the program raised while tracer code ran is the
        program's, and goes on to it (re-raised, as if the guard were not there).
        """
        caught = sys.exception()
        if caught is not None and raised_by_a_signal_handler(caught):
            raise  # the exception the caller is handling
        self.errors += 1


_current: TracerSession | None = None


def current() -> TracerSession | None:
    """The session of this process, if tracing is on."""
    return _current


def set_current(session: TracerSession | None) -> None:
    global _current
    _current = session
