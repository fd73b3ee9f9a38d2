"""Start tracing in this process: called by the bootstrap hook.

Order matters: the process channel patches ``os`` before anything imports
``subprocess`` (which binds some ``os`` functions at import time), the
monitor starts last so the tracer's own start-up is not traced.
"""

from __future__ import annotations

import _signal
import os
import sys

from distea.tracer.channels import CHANNEL_MODULES
from distea.tracer.channels.importhooks import IMPORT_HOOKS
from distea.tracer.config import PARENT_TOKEN_ENV, TracerConfig, tracer_code_id
from distea.tracer.session import (
    FLUSHED_SIGNALS,
    WRAPPED_HANDLER,
    TracerSession,
    current,
    set_current,
)
from distea.tracer.sigwatch import SignalWatch
from distea.wire import UNTRACED_DIR

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from types import FrameType

    from distea.tracer.seams import Channel

DEFERRED_CHANNELS = (
    ("socket", "distea.tracer.channels.sockets", "SocketChannel", ("ssl",)),
    ("socket", "distea.tracer.channels.datagrams", "DatagramChannel"),
    ("signal", "distea.tracer.channels.wakeup", "WakeupChannel"),
    ("multiprocessing.connection", "distea.tracer.channels.multiprocessing",
     "MultiprocessingChannel"),
    ("multiprocessing.synchronize", "distea.tracer.channels.mpsync", "SyncChannel"),
    ("asyncio", "distea.tracer.channels.asyncio_boundary", "AsyncioBoundaryChannel",
     ("uvloop",)),
    ("mmap", "distea.tracer.channels.sharedmem", "SharedMemoryChannel"),
    ("zmq", "distea.tracer.channels.zmq", "ZmqChannel"),
    ("torch.distributed", "distea.tracer.channels.torch_distributed",
     "TorchDistributedChannel"),
    ("grpc", "distea.tracer.channels.grpc", "GrpcChannel"),
    ("ray", "distea.tracer.channels.ray", "RayChannel"),
    ("sqlite3", "distea.tracer.channels.sqlite", "SqliteChannel"),
)
"""Channels that patch one library: (library, module, class[, libraries that
import it]). Their module is imported, and the channel installed, only once
the program imports the library (right after the library's module has
executed, before the importer gets it: no object of it can exist
unpatched), so that a process that never imports it does not load the
channel (nor ``socket``, ``enum``...) at start-up. Two channels of one
library install in this order. A library that imports the trigger (``ssl``
imports ``socket``) is still executing when the channel installs: it is
watched from the start, so that the channel's hook on it runs once it is
complete (``ImportHooks.when_imported``)."""


def _channel_class(module_name: str, class_name: str) -> type[Channel] | None:
    try:
        __import__(module_name)  # not importlib.import_module: importlib is ~1 ms at start-up
        module = sys.modules[module_name]
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return None
        raise
    channel_class: type[Channel] = getattr(module, class_name)
    return channel_class


class DeferredChannel:
    """Stands for a channel until its library is imported, then installs the real one."""

    def __init__(self, library: str, module_name: str, class_name: str,
                 importers: tuple[str, ...] = ()) -> None:
        self.library = library
        self.module_name = module_name
        self.class_name = class_name
        self.importers = importers
        self.session: TracerSession | None = None
        self.channel: Channel | None = None

    def install(self, session: TracerSession) -> None:
        self.session = session
        for name in self.importers:
            IMPORT_HOOKS.watch(name)
        # The channel's own module may be imported by another channel's module
        # before the library is (zmq's imports datagrams', which imports socket):
        # watched, it can be waited for while it executes (see _load).
        if self.module_name not in sys.modules:
            IMPORT_HOOKS.watch(self.module_name)
        IMPORT_HOOKS.when_imported(self.library, self._load)

    def _load(self, library: object) -> None:
        if self.module_name in sys.modules:
            # imported, or still executing (its own import of the library brought us
            # here, with its class not defined yet): install once it is complete
            IMPORT_HOOKS.when_imported(self.module_name, self._install)
        else:
            self._install(None)

    def _install(self, module: object) -> None:
        session = self.session
        if session is None or session.finished or self.channel is not None:
            return
        try:
            channel_class = _channel_class(self.module_name, self.class_name)
            if channel_class is not None:
                channel = channel_class()
                channel.install(session)
                self.channel = channel
                # session.channels stays in the order of installation: the session
                # uninstalls in reverse, so patches stacked on one attribute unwind
                session.channels.remove(self)
                session.channels.append(self)
        except Exception:
            session.tracer_error()

    def uninstall(self) -> None:
        if self.channel is not None:
            self.channel.uninstall()
        else:
            IMPORT_HOOKS.forget(self.library, self._load)
            IMPORT_HOOKS.forget(self.module_name)


def _load_channels() -> list[Channel]:
    channels: list[Channel] = []
    for module_name, class_name in CHANNEL_MODULES:
        channel_class = _channel_class(module_name, class_name)
        if channel_class is not None:
            channels.append(channel_class())
    channels.extend(DeferredChannel(*deferred) for deferred in DEFERRED_CHANNELS)
    return channels


def start(config: TracerConfig) -> TracerSession:
    """Trace this process; a second call returns the running session."""
    session = current()
    if session is not None:
        return session
    session = TracerSession(config)
    set_current(session)
    _flush_on_sigterm(session)  # before the signal channel, which wraps it
    for channel in _load_channels():
        session.channels.append(channel)  # first: a deferred one may install at once
        channel.install(session)
    session.start()
    return session


def start_from_environment() -> TracerSession | None:
    config = TracerConfig.from_env()
    if config is None:
        return None
    gone = collector_gone(config.endpoint)
    if gone:
        note_untraced(config.run_dir, gone)
        return None
    if PARENT_TOKEN_ENV not in os.environ and config.prepared != tracer_code_id():
        # the first process of the run, when distea run does not see to it (bytecode.py)
        from distea.tracer.bytecode import refresh_tracer_code

        refresh_tracer_code()
    return start(config)


def collector_gone(endpoint: str) -> str | None:
    """Why the collector of ``endpoint`` surely cannot be reached, or None.

    Only an ``ipc://`` endpoint can be checked for free: its socket file is
    removed when the run ends. A process started with the environment of a
    finished run (a daemon left behind, a copied shell) is then not traced
    at all, rather than traced into nowhere.
    """
    if endpoint.startswith("ipc://") and not os.path.exists(endpoint[len("ipc://"):]):
        return f"its run's collector is gone ({endpoint} does not exist): not traced"
    return None


def note_untraced(run_dir: str, reason: str) -> None:
    """Leave ``untraced/<pid>.json`` in the run directory, if it is still there."""
    try:
        folder = os.path.join(run_dir, UNTRACED_DIR)
        if not os.path.isdir(run_dir):
            return
        os.makedirs(folder, mode=0o700, exist_ok=True)
        note = {"pid": os.getpid(), "argv": list(sys.orig_argv), "reason": reason,
                "parent_token": os.environ.get(PARENT_TOKEN_ENV)}
        import json  # only for a process that is not traced

        with open(os.path.join(folder, f"{os.getpid()}.json"), "w") as stream:
            json.dump(note, stream)
    except Exception:
        pass


def _flush_on_sigterm(session: TracerSession) -> None:
    """SIGTERM's (and SIGHUP's) default action skips atexit: flush, then die of it as before.

    Only installed where the program has not chosen a handler, and only in
    the main thread (where Python allows it). The process still dies of
    the signal with the same status. A program that installs its own
    handler later simply replaces ours (and exits through atexit, or not).
    A signal that the main thread misses while it blocks is sent again by
    the signal watch (``sigwatch.py``), so that the process still dies of it.
    """
    def handler(signum: int, frame: FrameType | None) -> None:
        if session.finishing:  # the final flush it interrupted acts on it once done
            session.pending_signal = signum
            return
        session.finish("signal")
        _signal.signal(signum, _signal.SIG_DFL)
        _signal.raise_signal(signum)

    def is_ours(signum: int) -> bool:
        installed = _signal.getsignal(signum)
        return getattr(installed, WRAPPED_HANDLER, installed) is handler  # or the channel's wrap

    installed = []
    try:
        for signum in FLUSHED_SIGNALS:
            if _signal.getsignal(signum) == _signal.SIG_DFL:
                _signal.signal(signum, handler)
                installed.append(signum)
    except ValueError:  # not the main thread (checked so, without importing threading)
        return
    session.signal_handler = handler
    if installed:
        session.signal_watch = SignalWatch.start(tuple(installed), is_ours)
