"""A flush-then-die signal must end the process even when its main thread is blocked.

The tracer's flush-on-SIGTERM handler (``startup._flush_on_sigterm``, also
for SIGHUP) is a Python handler, and CPython runs Python handlers only in
the main thread, between two bytecodes. CPython's C handler, which runs at
once in whichever thread the kernel chose, only notes the signal. The main
thread then runs the Python handler at its next bytecode; if it is inside a
blocking call, the signal interrupts the call (``EINTR``) and the handler
runs there. Two cases escape both:

- the signal lands after the main thread's last look for pending signals
  and before its system call starts (a window that is widest while the
  main thread waits for the GIL, which the idle flusher's thread takes
  every ``INTERVAL_S``);
- the kernel delivers it to another thread of the program.

The main thread then blocks with the signal noted and its handler never
run. Untraced, the signal's default action would have ended the process at
once; traced, a spawn ``Pool`` worker that its parent terminates while it
waits for the task queue's lock (held for good by the parent) hung for
ever, and so did its parent, in ``join``.

CPython's C handler also writes the signal's number to the **wakeup
descriptor** (``signal.set_wakeup_fd``). Where the program has none, the
watch points it at a pipe of its own, and the idle flusher reads that pipe
at every turn (:meth:`SignalWatch.check`): when a flushed signal has come
and the tracer's handler has still not run ``GRACE_S`` later, the watch
sends the signal again, to the main thread itself. The main thread is
inside its blocking call by then, the signal interrupts it, and CPython
runs the handler: the process flushes its trace and dies of the signal, as
it would have died without distea (``tests/reliability/test_signal_watch.py``).

The descriptor stays the program's to set: the wakeup channel
(``channels/wakeup.py``) hands the program -1 where only the watch's pipe
stood, and puts the watch's pipe back when the program sets -1 again.
While the program's own descriptor is set (an asyncio loop with signal
handlers), the watch is blind; such a loop runs Python handlers at once
anyway. After a ``fork`` the child makes its own pipe
(:meth:`SignalWatch.reset_after_fork`); until the parent's idle flusher
is started again after a ``fork`` (at its next message event), nothing
watches the parent.
"""

from __future__ import annotations

import _thread
import os
from _signal import pthread_kill, set_wakeup_fd
from posix import read
from time import monotonic

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from collections.abc import Callable

# The pipe is read, the descriptor set and the signal sent again with the functions as
# they were when this module was imported, at the tracer's start, before the channels
# patch them (their home modules too: channels/patching.py): the tracer's own acts are
# not the program's.

GRACE_S = 0.1
"""How long the tracer's handler may take to run before the signal is sent again."""
READ_SIZE = 512


class SignalWatch:
    """The wakeup pipe and what came through it (read by the idle flusher's thread only)."""

    def __init__(self, signals: tuple[int, ...], is_ours: Callable[[int], bool],
                 read_fd: int, write_fd: int) -> None:
        self.signals = signals
        self.is_ours = is_ours
        """Whether the handler now installed for a signal is the tracer's own."""
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.main_thread = _thread.get_ident()
        self.active = True
        """False where the program's own wakeup descriptor took the place of ours."""
        self.came: tuple[int, float] | None = None
        """(signal, when it came) of a flushed signal whose handler has not run yet."""

    @classmethod
    def start(cls, signals: tuple[int, ...], is_ours: Callable[[int], bool]) -> SignalWatch | None:
        """Set the wakeup descriptor to a new pipe of the watch's (from the main thread),
        unless the program has one: then leave it, and watch nothing (None)."""
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)  # CPython's C handler never waits
        try:
            previous = set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        except (ValueError, OSError):
            previous = None  # not the main thread
        if previous != -1:
            if previous is not None:
                set_wakeup_fd(previous)
            os.close(read_fd)
            os.close(write_fd)
            return None
        return cls(signals, is_ours, read_fd, write_fd)

    def check(self) -> None:
        """Note the flushed signals that came; send one again whose handler did not run."""
        if not self.active:
            return
        try:
            came = read(self.read_fd, READ_SIZE)
        except (BlockingIOError, InterruptedError):
            came = b""
        now = monotonic()
        if self.came is None:
            signum = next((n for n in came if n in self.signals), None)
            if signum is not None:
                self.came = (signum, now)
            return
        signum, since = self.came
        if now - since < GRACE_S:
            return
        if not self.is_ours(signum):
            self.came = None  # the program's own handler now: its signals are its own
            return
        self.came = (signum, now)  # and again, should this one land in the window too
        pthread_kill(self.main_thread, signum)

    def program_sets(self, fd: int, previous: int) -> int:
        """After the program's own ``set_wakeup_fd(fd)`` returned ``previous``: what the
        program should see returned, with the watch's pipe back where the program
        set none."""
        if previous == self.write_fd:
            previous = -1  # only the watch's pipe stood there: none, for the program
        self.active = fd == -1
        if self.active:
            set_wakeup_fd(self.write_fd, warn_on_full_buffer=False)
        return previous

    def reset_after_fork(self) -> None:
        """In a forked child (its main thread now): a pipe of its own, not the parent's."""
        old_read, old_write = self.read_fd, self.write_fd
        self.came = None
        self.main_thread = _thread.get_ident()
        if self.active:
            read_fd, write_fd = os.pipe()
            os.set_blocking(read_fd, False)
            os.set_blocking(write_fd, False)
            previous = set_wakeup_fd(write_fd, warn_on_full_buffer=False)
            if previous != old_write:  # the program's, set meanwhile through _signal
                set_wakeup_fd(previous)
                os.close(read_fd)
                os.close(write_fd)
                self.active = False
            else:
                self.read_fd, self.write_fd = read_fd, write_fd
        os.close(old_read)
        os.close(old_write)

    def stop(self) -> None:
        """Give the wakeup descriptor back to nobody, where it is still ours (main thread)."""
        if self.active:
            try:
                previous = set_wakeup_fd(-1)
                if previous != self.write_fd:
                    set_wakeup_fd(previous)
            except (ValueError, OSError):
                return  # not the main thread: leave both
        self.active = False
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:  # closed already (a program's closerange): nothing to give back
                continue
