"""Start tracing in this process: called by the bootstrap hook.

Order matters: the process channel patches ``os`` before anything imports
``subprocess`` (which binds some ``os`` functions at import time), the
monitor starts last so the tracer's own start-up is not traced.
"""

from __future__ import annotations

import importlib
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from distea.tracer.config import TracerConfig
from distea.tracer.session import Channel, TracerSession, current, set_current

CHANNEL_MODULES = (
    ("distea.tracer.channels.processes", "ProcessChannel"),
    ("distea.tracer.channels.sockets", "SocketChannel"),
    ("distea.tracer.channels.datagrams", "DatagramChannel"),
    ("distea.tracer.channels.multiprocessing", "MultiprocessingChannel"),
    ("distea.tracer.channels.zmq", "ZmqChannel"),
    ("distea.tracer.channels.torch_distributed", "TorchDistributedChannel"),
)


def _load_channels() -> list[Channel]:
    channels: list[Channel] = []
    for module_name, class_name in CHANNEL_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        channels.append(getattr(module, class_name)())
    return channels


def start(config: TracerConfig) -> TracerSession:
    """Trace this process; a second call returns the running session."""
    session = current()
    if session is not None:
        return session
    session = TracerSession(config)
    set_current(session)
    for channel in _load_channels():
        channel.install(session)
        session.channels.append(channel)
    session.start()
    _flush_on_sigterm(session)
    return session


def start_from_environment() -> TracerSession | None:
    config = TracerConfig.from_env()
    return start(config) if config is not None else None


def _flush_on_sigterm(session: TracerSession) -> None:
    """SIGTERM's default action skips atexit: flush, then die of it as before.

    Only installed where the program has not chosen a handler, and only in
    the main thread (where Python allows it). The process still dies of
    SIGTERM with the same status.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return
    handler: Callable[[int, FrameType | None], Any]

    def handler(signum: int, frame: FrameType | None) -> None:
        session.finish("signal")
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

    signal.signal(signal.SIGTERM, handler)
    sys.modules[__name__].__dict__["_sigterm_handler"] = handler
