"""Plain data handed between distea's stages.

The tracer writes records (see :mod:`distea.traceformat`); the loader turns
them into these dataclasses; the analyzer reads only these. Nothing here has
behaviour beyond small derived properties, so every stage can be tested on
hand-built values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Direction = Literal["send", "recv"]


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """One OS process of a run, as its tracer described itself."""

    key: str
    """Unique within a run: ``host:pid:start_ns`` (an exec'd image gets a new key)."""
    pid: int
    ppid: int
    host: str
    argv: tuple[str, ...]
    executable: str
    python: str
    cwd: str
    start_method: str
    """How the process came to be traced: main, subprocess, fork, spawn, forkserver, exec."""
    parent_token: str | None
    """The spawn token its parent recorded, or None for the command itself."""
    role: str
    """A human label: ``rank 1/4`` for training workers, else the program name."""
    rank: int | None
    world_size: int | None
    mode: str
    """``compact`` or ``full``."""
    started_ns: int
    end_reason: str | None = None
    """How tracing ended (exit, os._exit, exec, signal); None when it never said: killed."""
    dropped_events: int = 0
    tracer_errors: int = 0

    @property
    def complete(self) -> bool:
        """True when the tracer flushed a final record: nothing after it was lost."""
        return self.end_reason is not None


@dataclass(frozen=True, slots=True)
class Method:
    """One code object, named the way users query it: ``pkg.mod.Class.meth``."""

    name: str
    module: str
    qualname: str
    file: str
    firstline: int
    lastline: int


@dataclass(slots=True, unsafe_hash=True)
class Execution:
    """Execute-After facts of one method in one process (DESIGN.md §3).

    ``first`` is the clock at its first start; ``last`` the latest clock at
    which it was executing. Clocks are per process.

    Not frozen, for the same reason as :class:`MessageEvent` (one per method
    and process: hundreds of thousands in a large run), but hashable like the
    frozen records; treat it as read-only.
    """

    process: str
    method: str
    first: int
    last: int


@dataclass(slots=True)
class MessageEvent:
    """One send or receive, positioned on its channel.

    Not frozen, unlike the records above: a load builds hundreds of
    thousands of these, and a frozen dataclass costs five times as much to
    construct. Treat it as read-only all the same.

    ``start``/``end`` are byte offsets for streams, message indexes for
    message-oriented channels (``end = start + 1``).
    """

    process: str
    clock: int
    direction: Direction
    kind: str
    channel: str
    start: int
    end: int
    method: str | None
    thread: int
    meta: Mapping[str, object] | None = field(default=None, compare=False)


def channel_label(ev: MessageEvent) -> str:
    """``KIND CHANNEL`` for people, with the path of a file (its channel is its identity)."""
    path = ev.meta.get("path") if ev.meta else None
    if ev.kind == "file" and isinstance(path, str):
        return f"file {path}"
    return f"{ev.kind} {ev.channel}"


@dataclass(slots=True)
class CallEvent:
    """``--mode full`` only: one entry (call or resume) or exit of a method.

    Not frozen, for the same reason as :class:`MessageEvent` (millions per run).
    """

    process: str
    method: str
    clock: int
    thread: int
    entering: bool


@dataclass(frozen=True, slots=True)
class UntracedChild:
    """A child process that was started but could not be traced, and why."""

    parent: str
    pid: int | None
    argv: tuple[str, ...]
    reason: str
    token: str | None = None
    """The spawn token of its start (the channel of its parent's ``proc`` send), if known."""
    pipes: tuple[str | None, ...] = ()
    """Pipe channel names of its stdin, stdout and stderr, then of the pipe its forked
    process reports a failed ``exec`` on (None: not a pipe), if known."""


@dataclass(frozen=True, slots=True)
class ChannelLink:
    """Two channel ends that are one pipe or socket pair (recorded where created)."""

    process: str
    kind: str
    end_a: str
    end_b: str


@dataclass(slots=True)
class RunData:
    """Everything recorded in one run directory, before any analysis."""

    path: str
    meta: Mapping[str, object]
    processes: dict[str, ProcessInfo] = field(default_factory=dict)
    methods: dict[str, Method] = field(default_factory=dict)
    executions: dict[str, dict[str, Execution]] = field(default_factory=dict)
    """process key → method name → execution."""
    messages: dict[str, list[MessageEvent]] = field(default_factory=dict)
    """process key → its message events in clock order."""
    calls: dict[str, list[CallEvent]] = field(default_factory=dict)
    """process key → entries/exits (full mode only)."""
    untraced: list[UntracedChild] = field(default_factory=list)
    links: list[ChannelLink] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """Human-readable notes on anything lost or damaged while loading."""
