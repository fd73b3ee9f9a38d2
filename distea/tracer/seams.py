"""The tracer's seams, for type checkers only.

Runtime code imports this module under ``TYPE_CHECKING`` alone: it needs
``typing``, which a traced process that does not use it itself would
otherwise import at start-up (~5 ms, see docs/performance.md). Each Protocol
names what one side of a seam may rely on of the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from distea.tracer.session import TracerSession

Record = list[Any] | tuple[Any, ...]
"""One trace record: ``[Tag, ...]`` (see docs/trace-format.md)."""


class Transport(Protocol):
    """A PUSH connection to the collector: :class:`~distea.tracer.zmtp.ZmtpPush`
    (local runs) or :class:`~distea.tracer.zmqpush.PyzmqPush` (CURVE over tcp)."""

    closes_at_fork: bool
    """Whether it must be closed before ``fork`` (it has threads)."""

    def has_room(self) -> bool:
        """Whether a batch can be queued now without waiting."""
        ...

    def send(self, frames: Sequence[bytes | memoryview], timeout_ms: int | None) -> bool:
        """Queue one message: without ``timeout_ms`` only if there is room; False if not queued."""
        ...

    def close(self, linger_ms: int) -> bool:
        """Let the queue leave for at most ``linger_ms``; False if it may not all have."""
        ...

    def abandon(self) -> None:
        """In a forked child: let go of the parent's connection without using it."""
        ...


class SendRecorder(Protocol):
    """``session.send(kind, channel, start, end, meta=None, stamp=None)``: a message left."""

    def __call__(self, kind: str, channel: str, start: int, end: int,
                 meta: dict[str, Any] | None = None,
                 stamp: tuple[int, int] | None = None) -> None: ...


class RecvRecorder(Protocol):
    """``session.recv(kind, channel, start, end, meta=None)``: a message arrived."""

    def __call__(self, kind: str, channel: str, start: int, end: int,
                 meta: dict[str, Any] | None = None) -> None: ...


class Channel(Protocol):
    """One transport's interceptor: patches on install, restores on uninstall."""

    def install(self, session: TracerSession) -> None: ...

    def uninstall(self) -> None: ...
