"""A thread that sends what an idle process recorded (DESIGN.md §7).

Records leave a process at its message events (the periodic flush), before
a receive that may block, and at exit. A process that runs Python only in
short bursts called from C (a Ray worker's task, a gRPC server's handler
in its thread pool, a worker that then waits in ``time.sleep`` or a C
``select``) reaches none of those points after its last burst: what it did
would stay in memory until it exits, and be lost if it is killed first.
The end of a burst cannot be seen from Python either: the user's code
returns into library code, which then blocks in C, exactly as it returns
into library code everywhere else; and in compact mode most return events
are switched off anyway (``monitor.py``). So a small thread checks every
``INTERVAL_S`` whether records or moved last clocks wait, and flushes them:
they reach the collector at most about ``2 * INTERVAL_S`` after they happen.

Invariants:

- never more than one flusher thread, and none across ``fork``: the
  session's before-fork hook calls :meth:`IdleFlusher.stop`, which wakes
  the thread and waits until it is gone, from the kernel's list of the
  process's threads too (the emitter's lock, which the flush takes, is then
  free for ``Emitter.suspend``). It is started again
  in the child at once, and in the parent at the session's next service
  call (:meth:`ensure`): not in the parent's after-fork hook, since Python
  counts the process's threads for its "multi-threaded fork" warning after
  that hook, and the warning must not appear because of us;
- it is invisible to the program: a raw ``_thread`` (not in
  ``threading.enumerate()``, not joined by ``threading._shutdown``), and
  it never blocks on the emitter: ``Emitter.flush`` without ``wait`` leaves
  the records for later when another thread is sending;
- it never takes a signal meant for the program: it starts with every
  signal blocked (a program that blocks SIGUSR1 and ``sigwait``s for it
  would otherwise die of it, delivered to our thread);
- it never raises into anything: an error is counted on the session.

Cost: one wake-up every ``INTERVAL_S`` (measured in docs/performance.md);
a flush only when something is waiting and nothing else flushed lately.
"""

from __future__ import annotations

import _signal
import _thread
import os
import time

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from distea.tracer.session import TracerSession

INTERVAL_S = 0.05
"""How often the thread looks; records reach the collector within about twice this."""
STOP_TIMEOUT_S = 2.0
"""The longest ``stop`` waits for the thread (a flush is bounded by the transport)."""
EXIT_WAIT_S = 0.05
"""The longest ``stop`` waits, after that, for the kernel to drop the thread."""


class IdleFlusher:
    def __init__(self, session: TracerSession) -> None:
        self.session = session
        self.running = False
        """A thread is started and not asked to stop (read without a lock: a hint)."""
        self.wanted = True
        """False once the session ends: ``ensure`` then starts nothing."""
        self._wake = _thread.allocate_lock()
        """Held while the thread sleeps on it; released by ``stop`` to wake it."""
        self._gone = _thread.allocate_lock()
        """Held by the running thread; released as its last act."""
        self._control = _thread.allocate_lock()
        """Held while a thread starts or stops the flusher (never two threads at once)."""
        self._stop = False
        self._native_id = 0
        """The running thread's kernel id (0: none yet)."""

    def ensure(self) -> None:
        """Start the thread if it is not running (cheap when it is).

        Never waits: a thread that finds another one starting or stopping
        the flusher, or the previous flusher not yet gone, leaves it to the
        next call.
        """
        if self.running or not self.wanted:
            return
        if not self._control.acquire(blocking=False):
            return
        try:
            if self.running or not self.wanted or not self._gone.acquire(blocking=False):
                return
            self._stop = False
            self._wake.acquire(blocking=False)  # held: the thread sleeps on it
            self.running = True
            # the thread inherits this thread's signal mask: everything blocked
            previous = _signal.pthread_sigmask(_signal.SIG_BLOCK, _signal.valid_signals())
            try:
                _thread.start_new_thread(self._run, ())
            except Exception:
                self.running = False
                self._gone.release()
                raise
            finally:
                _signal.pthread_sigmask(_signal.SIG_SETMASK, previous)
        finally:
            self._control.release()

    def stop(self, for_good: bool = False) -> None:
        """Stop the thread and wait until it has left; ``for_good``: never start again.

        Before a fork it waits until the kernel has dropped the thread too
        (:func:`_wait_until_exited`, at least one short sleep); at the
        session's end (``for_good``) it does not: that wait is for the fork's
        thread count, and it was most of the 0.3 ms that stopping took at
        every traced process's exit.
        """
        if for_good:
            self.wanted = False
        if not self._control.acquire(timeout=STOP_TIMEOUT_S):
            return
        try:
            if not self.running:
                return
            self._stop = True
            self.running = False
            if self._wake.locked():
                self._wake.release()
            if self._gone.acquire(timeout=STOP_TIMEOUT_S):
                self._gone.release()
                if not for_good:  # a fork may follow; at the session's end none is traced
                    _wait_until_exited(self._native_id)
        finally:
            self._control.release()

    def reset_after_fork(self) -> None:
        """In a forked child: the parent's thread does not exist here; start our own."""
        self.running = False
        self._stop = False
        self._control = _thread.allocate_lock()
        self._wake = _thread.allocate_lock()
        self._gone = _thread.allocate_lock()
        if self.wanted:
            self.ensure()

    def _run(self) -> None:
        self._native_id = _thread.get_native_id()
        session = self.session
        emitter = session.emitter
        pending = emitter.pending
        dirty = session.monitor.dirty_states
        wake = self._wake
        gone = self._gone
        try:
            while not self._stop:
                wake.acquire(timeout=INTERVAL_S)
                if self._stop or session.finished:
                    break
                if session.signal_watch is not None:
                    try:
                        session.signal_watch.check()
                    except Exception:
                        session.tracer_error()
                if not (pending or dirty):
                    continue
                if time.monotonic() - emitter.last_flush < INTERVAL_S:
                    continue  # the program's own events flushed lately
                try:
                    session.flush_idle()
                except Exception:
                    session.tracer_error()
        finally:
            gone.release()


def _wait_until_exited(native_id: int) -> None:
    """Wait until the kernel no longer lists the thread ``native_id`` (at most
    ``EXIT_WAIT_S``): it released ``_gone`` on its way out, but Python counts the
    process's threads in ``/proc/self/stat`` right after a ``fork``, and a thread
    still exiting then made a traced ``os.fork`` warn that the process is
    multi-threaded (``DeprecationWarning``), under load. Linux only; elsewhere
    there is no such list to read, and nothing to wait for."""
    task = f"/proc/self/task/{native_id}"
    deadline = time.monotonic() + EXIT_WAIT_S
    while native_id and time.monotonic() < deadline:
        try:
            os.stat(task)
        except OSError:
            return
        time.sleep(0.0002)
