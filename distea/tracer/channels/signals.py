"""Signals: ``os.kill`` and friends are sends, the Python handler's run is the receive.

- Sends: ``os.kill`` (and through it ``Popen.send_signal``/``terminate``/
  ``kill`` and ``multiprocessing.Process.terminate``/``kill``), ``os.killpg``
  and ``signal.pthread_kill``. The record is taken before the signal leaves
  (its handler may run, even end this process, before the call returns), with
  the target in ``meta``: ``pid``, ``pgid`` (a process group) or ``all``
  (``kill(-1, ...)``). Signal 0 (an existence check) sends nothing.
- Receives: every Python-level handler runs through a wrapper that records
  the receive, with this process's ``pid`` and ``pgid``, before calling the
  program's handler. ``signal.signal`` installs the wrapper, ``signal.getsignal``
  and ``signal.signal``'s return value give back the program's own handler,
  so the program sees no difference (but for one more frame in the
  traceback of an exception that escapes a handler). Handlers already
  installed when the tracer starts are wrapped too, and the tracer's own
  flush-on-SIGTERM handler as well: a SIGTERM whose action is to end the
  process is then received, and the process's ``exit`` send that follows
  links it to its death and to the parent's ``wait``. SIGINT handlers are
  left alone: they raise KeyboardInterrupt, whose traceback (at every
  Ctrl-C) would show the wrapper. Nor are the handlers of signals the
  kernel sends (SIGCHLD, the timers' SIGALRM/SIGVTALRM/SIGPROF, SIGWINCH,
  SIGIO, SIGURG) wrapped (see ``UNWRAPPED``).

Channel kind ``signal``, one channel per host and signal number
(``HOST:signal:NUM``); both ends take ``time.monotonic_ns()`` (``meta["t"]``).
Signals of one number are merged by the kernel while pending, so no count
pairs them: the analyzer orders a handler's run after every send to its
process (or group) that happened before it (:mod:`distea.analyzer.match_timed`).

Not recorded: signals sent by the kernel or by untraced processes (their
receive has no send: counted as external), signals whose action is the
default or ignore (no Python code runs; a fatal default is linked to the
process's exit at analysis time), C-level handlers, ``signal.raise_signal``
and ``alarm``/``setitimer``. A handler run that interrupts the session's
recorders or the monitor's callbacks is not recorded (that code is not
reentrant): counted as a tracer error.
"""

from __future__ import annotations

import _signal
import os
from time import monotonic_ns

from distea.tracer.channels.importhooks import IMPORT_HOOKS
from distea.tracer.channels.patching import Patches
from distea.tracer.session import HOST, WRAPPED_HANDLER, TracerSession

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any

KIND = "signal"
TRACER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORE_FILES = frozenset(os.path.join(TRACER_DIR, name)
                       for name in ("session.py", "monitor.py", "clock.py"))
UNWRAPPED = frozenset(getattr(_signal, name) for name in (
    "SIGINT", "SIGCHLD", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGWINCH", "SIGIO", "SIGURG")
    if hasattr(_signal, name))
"""Signals whose handlers are left alone. SIGINT's raise KeyboardInterrupt, whose
traceback (printed at every Ctrl-C) would show the wrapper's frame; the others
come from the kernel (a child's end, timers, the terminal, I/O readiness), often
many times a second (sampling profilers use SIGPROF), not from another process."""
HANDLER = WRAPPED_HANDLER
"""Attribute of a wrapper: the program's handler it calls."""


def signal_channel(signum: int) -> str:
    return f"{HOST}:signal:{int(signum)}"


def kill_target(pid: int) -> dict[str, Any]:
    """What ``kill(pid, ...)`` reaches, as ``meta`` (see kill(2))."""
    if pid > 0:
        return {"pid": pid}
    if pid == 0:
        return {"pgid": os.getpgrp()}
    if pid == -1:
        return {"all": True}
    return {"pgid": -pid}


def _inside_tracer_core(filename: str) -> bool:
    """Whether the session's recorders or the monitor's callbacks were interrupted.

    Those update the clock and the monitor's per-code state in several steps:
    a receive recorded in between could leave a code disarmed for good. A
    channel's wrapper may be interrupted (a process that signals itself is,
    right after ``kill``), and so may the emitter: a flush from the handler
    finds the emitter's (non-reentrant) lock taken and leaves its records for
    the next one.
    """
    return filename in CORE_FILES


class SignalChannel:
    def __init__(self) -> None:
        self.patches = Patches()
        self.session: TracerSession | None = None
        self.wrapped: dict[int, Any] = {}
        """Signal number → the wrapper we installed for it."""

    def install(self, session: TracerSession) -> None:
        """``os.kill`` and ``os.killpg`` now, ``signal``'s functions once it is imported.

        Until the program imports ``signal`` (which imports ``enum``: ~3 ms
        that a process that never uses it need not pay), a Python handler can
        only be one that was installed before the tracer or by it (its
        flush-on-SIGTERM handler): those are wrapped now, through ``_signal``.
        """
        self.session = session
        self.patches.replace(os, "kill", self._kill(os.kill))
        if hasattr(os, "killpg"):
            self.patches.replace(os, "killpg", self._killpg(os.killpg))
        self._wrap_installed()
        IMPORT_HOOKS.when_imported("signal", self._patch_module)

    def _patch_module(self, signal: Any) -> None:
        self._default = signal.SIG_DFL
        self._original_signal = self.patches.replace(signal, "signal", self._signal())
        self._original_getsignal = self.patches.replace(signal, "getsignal", self._getsignal())
        if hasattr(signal, "pthread_kill"):
            self.patches.replace(signal, "pthread_kill", self._pthread_kill(signal.pthread_kill))

    def uninstall(self) -> None:
        """Put the program's own handlers back where ours still stand (main thread only)."""
        IMPORT_HOOKS.forget("signal", self._patch_module)
        for signum, wrapper in list(self.wrapped.items()):
            try:
                if _signal.getsignal(signum) is wrapper:
                    _signal.signal(signum, getattr(wrapper, HANDLER))
            except (ValueError, OSError, TypeError):
                pass
        self.wrapped.clear()
        self.patches.restore()

    def _wrap_installed(self) -> None:
        """Wrap the Python handlers that were installed before the tracer started."""
        for signum in _signal.valid_signals():
            try:
                handler = _signal.getsignal(signum)
                if callable(handler) and int(signum) not in UNWRAPPED:
                    _signal.signal(signum, self._wrapper(signum, handler))
            except (ValueError, OSError, TypeError):
                continue  # not the main thread, or a signal Python cannot handle

    # -- receive side ------------------------------------------------------------

    def _wrapper(self, signum: int, handler: Any) -> Any:
        channel = self

        def handle(num: int, frame: Any) -> Any:
            channel._received(num, frame)
            return handler(num, frame)

        setattr(handle, HANDLER, handler)
        handle.__wrapped__ = handler  # type: ignore[attr-defined]
        self.wrapped[int(signum)] = handle
        return handle

    def _received(self, signum: int, frame: Any) -> None:
        session = self.session
        if session is None or session.finished:
            return
        try:
            if frame is not None and _inside_tracer_core(frame.f_code.co_filename):
                session.errors += 1  # interrupted the session or monitor: not reentrant
                return
            session.recv(KIND, signal_channel(signum), 0, 1,
                         {"t": monotonic_ns(), "pid": os.getpid(), "pgid": os.getpgrp()})
        except Exception:
            session.tracer_error()

    def _signal(self) -> Any:
        channel = self

        def signal_(signalnum: Any, handler: Any) -> Any:
            installed = handler
            session = channel.session
            if callable(handler) and session is not None and not session.finished \
                    and int(signalnum) not in UNWRAPPED:
                try:
                    installed = channel._wrapper(signalnum, handler)
                except Exception:
                    session.tracer_error()
            previous = channel._original_signal(signalnum, installed)
            if installed is handler:
                channel.wrapped.pop(int(signalnum), None)
            return channel._as_installed_by_program(previous)

        return signal_

    def _getsignal(self) -> Any:
        channel = self

        def getsignal(signalnum: Any) -> Any:
            return channel._as_installed_by_program(channel._original_getsignal(signalnum))

        return getsignal

    def _as_installed_by_program(self, handler: Any) -> Any:
        """What the program installed: its own handler where our wrapper stands, and
        ``SIG_DFL`` where only the tracer's flush-then-die handler does (it ends the
        process as the default action would: CPython's ``test_getsignal`` saw it)."""
        handler = getattr(handler, HANDLER, handler)
        session = self.session
        if session is not None and handler is not None and handler is session.signal_handler:
            return self._default
        return handler

    # -- send side ---------------------------------------------------------------

    def _send(self, signum: Any, target: Any, call: str) -> None:
        """Record a signal about to leave (before: its handler may end this very process)."""
        session = self.session
        if session is None or session.finished or not signum:
            return
        try:
            session.send(KIND, signal_channel(signum), 0, 1,
                         {"t": monotonic_ns(), "call": call, **target()})
        except Exception:
            session.tracer_error()

    def _kill(self, original: Any) -> Any:
        channel = self

        def kill(pid: Any, signum: Any) -> Any:
            channel._send(signum, lambda: kill_target(int(pid)), "kill")
            return original(pid, signum)

        kill.__wrapped__ = original  # type: ignore[attr-defined]
        return kill

    def _killpg(self, original: Any) -> Any:
        channel = self

        def killpg(pgid: Any, signum: Any) -> Any:
            channel._send(signum, lambda: {"pgid": int(pgid) or os.getpgrp()}, "killpg")
            return original(pgid, signum)

        killpg.__wrapped__ = original  # type: ignore[attr-defined]
        return killpg

    def _pthread_kill(self, original: Any) -> Any:
        channel = self

        def pthread_kill(thread_id: Any, signalnum: Any) -> Any:
            channel._send(signalnum, lambda: {"pid": os.getpid()}, "pthread_kill")
            return original(thread_id, signalnum)

        pthread_kill.__wrapped__ = original  # type: ignore[attr-defined]
        return pthread_kill
