"""multiprocessing synchronization: every SemLock release is a send, every acquire a receive.

``Lock``, ``RLock``, ``Semaphore``, ``BoundedSemaphore``, ``Condition``,
``Event`` and ``Barrier`` of :mod:`multiprocessing.synchronize` are all built
on one class, ``SemLock``, a wrapper around a POSIX semaphore that several
processes share (an ``Event`` is a Condition and a Semaphore; a Condition is
four SemLocks; a Barrier is a Condition over a shared array; a lock-guarded
``Value``/``Array`` takes its RLock on every access). So recording the
SemLock's operations records them all, through whatever primitive the
program used: a ``release`` is a SEND, a successful ``acquire`` (also through
``with``) a RECV, on channel kind ``sem`` named by the semaphore.

Which release let an acquire through is not observable, but both ends take
``time.monotonic_ns()`` (``meta["t"]``): the release before it posts the
semaphore, the acquire after it returned. On one host CLOCK_MONOTONIC is
system-wide, so the release that let an acquire through has a smaller time;
the analyzer orders the acquire after every such release
(:mod:`distea.analyzer.match_timed`). For a lock that is exactly the
previous holder's release; for a counting semaphore it is safe and may be
more than needed.

Semaphore identity, stable in every process that shares it:

- a semaphore of a spawn or forkserver context keeps its POSIX name
  (``/mp-xxxx``) until it is unlinked, and a spawned child rebuilds it from
  that name: ``HOST:sem:NAME``;
- a fork-context semaphore is unlinked at once (no name) and reaches children
  only by inheritance: it is named where it is created,
  ``HOST:sem:PROCESS-KEY:HANDLE``, and the name is kept on the Python object,
  which forked children inherit.

Queues serialize their readers and writers with their own locks (and bound
their size with a semaphore); those operations are the queue's business,
paired by the ``mp`` channel, and are not recorded: a SemLock operation
called directly from ``get``/``put``/``_feed`` of :mod:`multiprocessing.queues`
is skipped (one frame lookup). ``JoinableQueue.join``/``task_done`` go through
its Condition and are recorded.

Operations on a semaphore that no other process can hold yet are not
recorded (a lock used by threads only, a Value filled in before the workers
start): whatever they did is ordered before any other process's use by the
``fork`` or spawn that shares it. A semaphore is shared once it is pickled
for a child (``__getstate__``), when it is rebuilt in one (``__setstate__``),
and, for one created here, once this process has forked since; those that
existed before the patch count as shared.

multiprocessing is imported after the tracer starts, so the class is patched
by a post-import hook once ``multiprocessing.synchronize`` has executed.
"""

from __future__ import annotations

import os
import sys
from time import monotonic_ns
from types import ModuleType

from distea.tracer.channels.importhooks import IMPORT_HOOKS
from distea.tracer.channels.patching import Patches
from distea.tracer.session import HOST, TracerSession

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any

KIND = "sem"
ATTRIBUTE = "_distea_sem"
"""Where a SemLock keeps its channel name (inherited by forked children)."""
BORN = "_distea_born"
"""Where a SemLock created here keeps how many forks this process had made then."""
SHARED = "_distea_shared"
"""Set on a SemLock once another process may hold it."""
QUEUE_METHODS = frozenset({"get", "put", "_feed"})
"""Methods of multiprocessing.queues whose own SemLock operations are not recorded."""


def semaphore_channel(semlock: Any, creator: str) -> str:
    """The channel name of a ``_multiprocessing.SemLock`` (module docstring)."""
    name = semlock.name
    if name is not None:
        return f"{HOST}:sem:{name}"
    return f"{HOST}:sem:{creator}:{semlock.handle}"


class SyncChannel:
    def __init__(self) -> None:
        self.patches = Patches()
        self.session: TracerSession | None = None
        self.queues_file = ""
        self.forks = 0
        """Forks this process (and its parents, for a forked child) made so far."""

    def install(self, session: TracerSession) -> None:
        self.session = session
        IMPORT_HOOKS.when_imported("multiprocessing.synchronize", self._patch_module)
        os.register_at_fork(before=self._forking)

    def _forking(self) -> None:
        self.forks += 1

    def uninstall(self) -> None:
        IMPORT_HOOKS.forget("multiprocessing.synchronize")
        self.patches.restore()

    def _patch_module(self, module: ModuleType) -> None:
        cls = getattr(module, "SemLock", None)
        session = self.session
        if cls is None or session is None or session.finished \
                or not hasattr(cls, "_make_methods"):
            return
        self.queues_file = os.path.join(os.path.dirname(module.__file__ or ""), "queues.py")
        self._patch_make_methods(cls)
        self._patch_context_manager(cls)
        self._patch_pickling(cls)

    # -- identity and filtering --------------------------------------------------

    def _channel_of(self, lock: Any) -> str | None:
        """The lock's channel name; None when recording is off for it."""
        session = self.session
        if session is None or session.finished:
            return None
        state = lock.__dict__
        if SHARED not in state:
            born = state.get(BORN)
            if born is not None and born >= self.forks:
                return None  # no other process can hold it yet
            state[SHARED] = True
        name = state.get(ATTRIBUTE)
        if name is None:
            name = semaphore_channel(lock._semlock, session.key)
            state[ATTRIBUTE] = name
        return name

    def _queue_internal(self, frame: Any) -> bool:
        code = frame.f_code
        return code.co_name in QUEUE_METHODS and code.co_filename == self.queues_file

    # -- the patches -------------------------------------------------------------

    def _patch_make_methods(self, cls: type) -> None:
        original = cls._make_methods  # type: ignore[attr-defined]
        channel = self

        def _make_methods(lock: Any) -> None:
            original(lock)
            try:
                if channel.session is not None and not channel.session.finished:
                    state = lock.__dict__
                    state.setdefault(BORN, channel.forks)
                    if ATTRIBUTE not in state:  # named by its creator: forked children inherit it
                        state[ATTRIBUTE] = semaphore_channel(lock._semlock,
                                                             channel.session.key)
                    lock.acquire = channel._acquire(lock, lock.acquire)
                    lock.release = channel._release(lock, lock.release)
            except Exception:
                if channel.session is not None:
                    channel.session.tracer_error()

        self.patches.replace(cls, "_make_methods", _make_methods)

    def _acquire(self, lock: Any, original: Any) -> Any:
        channel = self

        def acquire(*args: Any, **kwargs: Any) -> Any:
            name = channel._channel_of(lock)
            if name is None or channel._queue_internal(sys._getframe(1)):
                return original(*args, **kwargs)
            channel._before_blocking(args, kwargs)
            got = original(*args, **kwargs)
            if got:
                channel._received(name)
            return got

        acquire.__wrapped__ = original  # type: ignore[attr-defined]
        return acquire

    def _release(self, lock: Any, original: Any) -> Any:
        channel = self

        def release(*args: Any, **kwargs: Any) -> Any:
            name = channel._channel_of(lock)
            if name is None or channel._queue_internal(sys._getframe(1)):
                return original(*args, **kwargs)
            sent = channel._sending()
            result = original(*args, **kwargs)  # raises (not owned, too many): no send
            channel._sent(name, sent)
            return result

        release.__wrapped__ = original  # type: ignore[attr-defined]
        return release

    def _patch_context_manager(self, cls: type) -> None:
        enter, exit_ = cls.__enter__, cls.__exit__  # type: ignore[attr-defined]
        channel = self

        def __enter__(lock: Any) -> Any:
            name = channel._channel_of(lock)
            if name is None or channel._queue_internal(sys._getframe(1)):
                return enter(lock)
            channel._before_blocking((), {})
            got = enter(lock)
            if got:
                channel._received(name)
            return got

        def __exit__(lock: Any, *args: Any) -> Any:
            name = channel._channel_of(lock)
            if name is None or channel._queue_internal(sys._getframe(1)):
                return exit_(lock, *args)
            sent = channel._sending()
            result = exit_(lock, *args)
            channel._sent(name, sent)
            return result

        self.patches.replace(cls, "__enter__", __enter__)
        self.patches.replace(cls, "__exit__", __exit__)

    def _patch_pickling(self, cls: type) -> None:
        """A SemLock pickled for a child, or rebuilt in one, is shared from then on."""
        getstate: Any = cls.__getstate__
        setstate: Any = cls.__setstate__  # type: ignore[attr-defined]

        def __getstate__(lock: Any) -> Any:
            lock.__dict__[SHARED] = True
            return getstate(lock)

        def __setstate__(lock: Any, state: Any) -> None:
            lock.__dict__[SHARED] = True
            setstate(lock, state)

        self.patches.replace(cls, "__getstate__", __getstate__)
        self.patches.replace(cls, "__setstate__", __setstate__)

    # -- recording ---------------------------------------------------------------

    def _before_blocking(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Records leave before an acquire that may wait (a process killed there loses none)."""
        block = args[0] if args else kwargs.get("block", True)
        session = self.session
        if block and session is not None:
            try:
                session.before_blocking()
            except Exception:
                session.tracer_error()

    def _received(self, name: str) -> None:
        session = self.session
        if session is None:
            return
        try:
            session.recv(KIND, name, 0, 1, {"t": monotonic_ns()})
        except Exception:
            session.tracer_error()

    def _sending(self) -> tuple[tuple[int, int], int] | None:
        """Stamp and time of a release, taken before the semaphore is posted."""
        session = self.session
        if session is None:
            return None
        try:
            t = monotonic_ns()  # before the clock is taken: no later than the event's clock
            return session.stamp(), t
        except Exception:
            session.tracer_error()
            return None

    def _sent(self, name: str, sent: tuple[tuple[int, int], int] | None) -> None:
        session = self.session
        if session is None or sent is None:
            return
        try:
            session.send(KIND, name, 0, 1, {"t": sent[1]}, stamp=sent[0])
        except Exception:
            session.tracer_error()
