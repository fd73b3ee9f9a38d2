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
from posix import fstat, read  # not os's, which a program may replace or mock
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
READ_SIZE = 65536
"""A whole pipe buffer: every byte CPython wrote since the last look, at once."""
HIGHEST_FD, LOWEST_HIGH_FD = 1024, 256
"""The watch's pipe takes the highest free descriptor numbers below 1024 (not the
process's limit, which may be a million: the kernel's table would grow to it)."""


class SignalWatch:
    """The wakeup pipe and what came through it (read by the idle flusher's thread only)."""

    def __init__(self, signals: tuple[int, ...], is_ours: Callable[[int], bool],
                 read_fd: int, write_fd: int) -> None:
        self.signals = signals
        self.is_ours = is_ours
        """Whether the handler now installed for a signal is the tracer's own."""
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.inode = fstat(read_fd).st_ino
        self.main_thread = _thread.get_ident()
        self.active = True
        """False where the program's own wakeup descriptor took the place of ours."""
        self.came: tuple[int, float] | None = None
        """(signal, when it came) of a flushed signal whose handler has not run yet."""

    @classmethod
    def start(cls, signals: tuple[int, ...], is_ours: Callable[[int], bool]) -> SignalWatch | None:
        """Set the wakeup descriptor to a new pipe of the watch's (from the main thread),
        unless the program has one: then leave it, and watch nothing (None)."""
        read_fd, write_fd = _new_pipe()
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
        if not self.active or not self._still_ours():
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

    def _still_ours(self) -> bool:
        """Whether the pipe is still there; made again at its numbers where the program
        closed it (``os.closerange``), so that CPython's handler never writes to a closed
        descriptor (it would say so on stderr). Where the program has taken a number
        of ours since, the watch stops: the descriptor stays set (only the main thread
        may change it), and signals would reach the program's file, an accepted risk
        that high numbers make remote."""
        ends = (self.read_fd, self.write_fd)
        ours = [_is_pipe(fd, self.inode) for fd in ends]
        if all(ours):
            return True
        if any(_is_open(fd) for fd, is_ours in zip(ends, ours, strict=True) if not is_ours):
            self.active = False  # taken by the program
            return False
        for fd, is_ours in zip(ends, ours, strict=True):
            if is_ours:
                os.close(fd)  # the other end was closed: both are made again
        self.read_fd, self.write_fd = _new_pipe(ends)
        self.inode = fstat(self.read_fd).st_ino
        return True

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
        """In a forked child (its main thread now): a pipe of its own, not the parent's,
        set as the wakeup descriptor where the parent's pipe was."""
        old_read, old_write = self.read_fd, self.write_fd
        self.came = None
        self.main_thread = _thread.get_ident()
        self.read_fd, self.write_fd = _new_pipe()
        self.inode = fstat(self.read_fd).st_ino
        if self.active:
            previous = set_wakeup_fd(self.write_fd, warn_on_full_buffer=False)
            if previous != old_write:  # the program's, set meanwhile through _signal
                set_wakeup_fd(previous)
                self.active = False
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


def _new_pipe(numbers: tuple[int, int] | None = None) -> tuple[int, int]:
    """A pipe whose ends never block (CPython's C handler must not wait), are closed on
    exec (as every descriptor Python makes), and have high numbers (``numbers``, or
    the highest free ones below ``HIGHEST_FD``): a program that closes every
    descriptor and opens files again (a daemon) gets low numbers, not ours."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    wanted = numbers or _free_numbers()
    if wanted is None:
        return read_fd, write_fd
    for fd, target in ((read_fd, wanted[0]), (write_fd, wanted[1])):
        os.dup2(fd, target, inheritable=False)
        os.close(fd)
    return wanted


def _free_numbers() -> tuple[int, int] | None:
    """The two highest descriptor numbers below ``HIGHEST_FD`` (and the process's limit)
    that nothing uses, or None."""
    free: list[int] = []
    fd = min(HIGHEST_FD, os.sysconf("SC_OPEN_MAX")) - 1
    while len(free) < 2 and fd > LOWEST_HIGH_FD:
        try:
            fstat(fd)
        except OSError:
            free.append(fd)
        fd -= 1
    return (free[0], free[1]) if len(free) == 2 else None


def _is_open(fd: int) -> bool:
    try:
        fstat(fd)
    except OSError:
        return False
    return True


def _is_pipe(fd: int, inode: int) -> bool:
    try:
        return fstat(fd).st_ino == inode
    except OSError:
        return False
