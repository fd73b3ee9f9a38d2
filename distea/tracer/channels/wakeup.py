"""The signal wakeup descriptor: a channel that something distea cannot see writes to.

``signal.set_wakeup_fd(fd)`` makes CPython's C signal handler write one byte
to ``fd`` whenever a signal arrives; asyncio points it at the write end of
its self-pipe (a socket pair) so that a signal wakes the selector. That write
happens in C, between two bytecodes, and no wrapper of ours sees it: the
channel's recorded offsets then run behind the bytes its reader gets, and
pairing by offsets would put a receive before its own send (docs/guarantees.md,
"Writes distea cannot see").

This channel patches ``signal.set_wakeup_fd`` and, when the program hands it
a descriptor, records one marker: a SEND of kind ``untrusted`` on the channel
name that that descriptor's sends carry (``meta["why"]`` says who writes
unseen, ``meta["of"]`` the channel's own kind). The analyzer then pairs that
channel's receives without trusting its offsets (:mod:`distea.analyzer.match_unseen`).
Nothing of the call changes: the original runs first, with the same
arguments, and its result or exception is the program's, but for the
tracer's own descriptor (its signal watch, ``distea/tracer/sigwatch.py``),
which the program never sees: where only it stood, the call returns -1,
and it is set again when the program sets -1.
"""

from __future__ import annotations

import os
import signal
import stat
from posix import fstat  # not os.fstat: a program may mock that one, and see our calls

from distea.tracer.channels.patching import Patches
from distea.tracer.session import TracerSession

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any

UNSEEN_KIND = "untrusted"
WHY = "signal wakeup fd (signal.set_wakeup_fd): CPython's C signal handler writes to it"


def channel_of(fd: int) -> tuple[str, str] | None:
    """(kind, channel name) that sends on ``fd`` are recorded under, or None."""
    # imported here: a program that imports signal need not load socket for us
    import socket

    from distea.tracer.channels.multiprocessing import pipe_name
    from distea.tracer.channels.sockets import describe

    mode = fstat(fd).st_mode
    if stat.S_ISFIFO(mode):
        return "pipe", pipe_name(fstat(fd).st_ino)
    if not stat.S_ISSOCK(mode):
        return None
    sock = socket.socket(fileno=os.dup(fd))  # a duplicate: closing it leaves fd open
    try:
        stream = describe(sock, "tcp")
    finally:
        sock.close()
    return (stream.kind, stream.outgoing) if stream is not None else None


class WakeupChannel:
    def __init__(self) -> None:
        self.patches = Patches()
        self.marked: str | None = None
        """The channel marked last: asyncio sets the same descriptor again at every
        ``add_signal_handler``, and -1 when its last handler goes."""

    def install(self, session: TracerSession) -> None:
        self.session = session
        original = signal.set_wakeup_fd
        channel = self

        def set_wakeup_fd(fd: Any, /, *args: Any, **kwargs: Any) -> Any:
            result = original(fd, *args, **kwargs)
            if session.finished:
                return result
            watch = session.signal_watch
            if watch is not None and isinstance(fd, int):
                try:  # the tracer's own pipe stays out of the program's sight (sigwatch.py)
                    result = watch.program_sets(fd, result)
                except Exception:
                    session.tracer_error()
            try:
                if isinstance(fd, int) and fd >= 0:
                    channel.mark(fd)
                else:
                    channel.marked = None
            except Exception:
                session.tracer_error()
            return result

        self.patches.replace(signal, "set_wakeup_fd", set_wakeup_fd)

    def mark(self, fd: int) -> None:
        found = channel_of(fd)
        if found is None or found[1] == self.marked:
            return
        self.marked = found[1]
        self.session.send(UNSEEN_KIND, found[1], 0, 0, {"why": WHY, "of": found[0]})

    def uninstall(self) -> None:
        self.patches.restore()
