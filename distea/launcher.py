"""Run a command under tracing: collector up, environment set, command launched.

The command starts as early as possible: the collector's ``ipc://`` socket
is bound and listening (a plain Unix socket) before the command is
launched, and the collector's thread (:mod:`distea.localcollector`) takes
that socket over while the command's interpreter starts; a tracer that
connects before then waits in the socket's backlog, losing nothing. So the
milliseconds that ``distea run`` spends starting the collector overlap the
traced program's own start instead of delaying it.

``distea run`` is a thin CLI over :func:`trace_command`. The traced command
gets the same arguments, working directory, stdin/stdout/stderr and exit
status as without distea; only its environment gains the tracer's hook
(``PYTHONPATH`` first entry and ``DISTEA_CONFIG``). When the command dies of
a signal, ``distea run`` dies of the same signal, so that whoever waits for
it sees what it would have seen without distea.

With ``connect`` (``distea run --connect tcp://HOST:PORT --key FILE``) no
collector is started here: :mod:`distea.remoterun` runs the command.
"""

from __future__ import annotations

import _signal as signal  # the signal module's own functions, without its enums (~2 ms)
import os
import sys
import time
from _socket import AF_UNIX, SOCK_STREAM, gethostname
from _socket import socket as Socket

from distea.rundir import (
    DEFAULT_RUNS_DIR,
    create_run_dir,
    new_run_id,
    write_run_meta,
)
from distea.suppressing import suppress
from distea.tracer.config import (
    CONFIG_ENV,
    PARENT_TOKEN_ENV,
    START_METHOD_ENV,
    TRACER_PATH_ENV,
    TracerConfig,
    tracer_code_id,
)

TYPE_CHECKING = False  # not typing's: nothing before the command needs typing (10 ms)

if TYPE_CHECKING:
    from collections.abc import Callable
    from os import PathLike
    from types import FrameType
    from typing import Any

    StrPath = str | PathLike[str]

    from distea.localcollector import LocalCollector

# Not imported here at module level, so that the command starts first (see above):
# distea.localcollector (and threading). Nor ever on a local run's path: pathlib,
# subprocess, socket, signal, shutil and hashlib, whose imports (re-exports and enums
# of the C modules used here instead) cost every distea run tens of milliseconds;
# see "where distea run's own milliseconds go" in docs/performance.md.

BOOTSTRAP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tracer", "bootstrap")
IPC_NAME = "collector.ipc"
IPC_PATH_MAX = 100
"""sun_path holds 108 bytes; longer run directories get their socket in a private temp dir."""
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
RESTORED_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)
"""Ignored by Python itself, not by the command: back to their defaults in the child
(as ``subprocess``'s ``restore_signals`` does)."""
LISTEN_BACKLOG = 1024
"""Tracers that may wait to be accepted at once (the kernel caps it at somaxconn)."""


class LaunchError(Exception):
    """The command could not be started; ``exit_code`` follows shell conventions."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class TraceOptions:
    """How to trace (plain class: ``dataclasses`` would import ``inspect`` before the
    command starts)."""

    def __init__(self, mode: str = "compact", include: tuple[str, ...] = (),
                 exclude: tuple[str, ...] = (), flush_timeout: float = 10.0, root: str = ".",
                 connect: str | None = None, key_file: StrPath | None = None,
                 connect_timeout: float = 10.0) -> None:
        self.mode = mode
        self.include = include
        self.exclude = exclude
        self.flush_timeout = flush_timeout
        """Seconds to wait after the command for processes still flushing."""
        self.root = root
        self.connect = connect
        """A ``distea collect`` endpoint to write to instead of a local collector."""
        self.key_file = key_file
        """The client credentials ``distea collect`` wrote (needed with ``connect``)."""
        self.connect_timeout = connect_timeout

    def __repr__(self) -> str:
        return f"TraceOptions({vars(self)})"


class RunOutcome:
    """What ``trace_command`` reports back (plain class, as :class:`TraceOptions`)."""

    def __init__(self, run_dir: str | None, exit_code: int, duration_s: float,
                 still_open: list[str] | None = None, signal: int | None = None,
                 endpoint: str = "", notes: list[str] | None = None) -> None:
        self.run_dir = run_dir
        """The run directory, or None when the run went to a remote collector."""
        self.exit_code = exit_code
        self.duration_s = duration_s
        self.still_open: list[str] = [] if still_open is None else still_open
        """Process keys that never sent a final batch (killed, or outlived the wait)."""
        self.signal = signal
        """The signal that killed the command, if one did."""
        self.endpoint = endpoint
        self.notes: list[str] = [] if notes is None else notes
        """One-line messages for the user (remote runs: delivery of the summary)."""

    def __repr__(self) -> str:
        return f"RunOutcome({vars(self)})"


def allocate_run_dir(output: StrPath | None) -> str:
    """``output`` made a fresh run directory, or a new one under ``.distea/runs``."""
    if output is not None:
        if os.path.exists(output) and not os.path.isdir(output):
            raise LaunchError(f"{output} exists and is not a directory", 2)
        if os.path.isdir(output):
            if os.listdir(output):
                raise LaunchError(f"{output} exists and is not empty; choose a new directory", 2)
            os.rmdir(output)
        return os.fspath(create_run_dir(output))
    os.makedirs(DEFAULT_RUNS_DIR, exist_ok=True)
    for attempt in range(100):
        candidate = os.path.join(DEFAULT_RUNS_DIR,
                                 new_run_id() + (f"-{attempt}" if attempt else ""))
        try:
            return create_run_dir(candidate)
        except FileExistsError:
            continue
    raise LaunchError("could not allocate a run directory", 2)


def make_run_dir(output: StrPath | None) -> str:
    """:func:`allocate_run_dir` with every OS error turned into one clear line."""
    try:
        return allocate_run_dir(output)
    except OSError as exc:
        where = exc.filename or output or DEFAULT_RUNS_DIR
        raise LaunchError(f"cannot create the run directory {where}: {exc.strerror}",
                          2) from None


def resolve_command(command: list[str]) -> list[str]:
    if not command:
        raise LaunchError("no command given: distea run -- python app.py", 2)
    if os.sep not in command[0]:
        if which(command[0]) is None:
            raise LaunchError(f"command not found: {command[0]}", 127)
    elif not os.path.exists(command[0]):
        raise LaunchError(f"no such file: {command[0]}", 127)
    elif os.path.isdir(command[0]) or not os.access(command[0], os.X_OK):
        raise LaunchError(f"permission denied: {command[0]} is not executable", 126)
    return command


def runs_python(command: list[str]) -> bool:
    """Whether ``command`` starts a Python: a ``python*`` program, or a script whose
    ``#!`` line names one (``torchrun``, a console script). Only a guess, for a
    speed-up: its first process then likely runs this distea (``distea run`` prepares
    the tracer's code for it; a process that runs another leaves nothing to chance)."""
    program = command[0] if os.sep in command[0] else which(command[0]) or command[0]
    if os.path.basename(program).startswith("python"):
        return True
    try:
        with open(program, "rb") as stream:
            first = stream.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def which(name: str) -> str | None:
    """The executable ``name`` on ``PATH``, as ``shutil.which`` finds it (without
    importing shutil, which brings bz2, lzma and fnmatch's regular expressions)."""
    for folder in os.get_exec_path():
        path = os.path.join(folder, name)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    return None


def tracer_environment(config: TracerConfig, base: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in (PARENT_TOKEN_ENV, START_METHOD_ENV)}
    env[CONFIG_ENV] = config.to_env()
    existing = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [BOOTSTRAP_DIR, existing]))
    import_dir = tracer_import_dir()
    if import_dir is not None:
        env[TRACER_PATH_ENV] = import_dir
    return env


def tracer_import_dir() -> str | None:
    """A directory holding only this distea and its msgpack, for Pythons that lack them.

    With distea installed as a tool (``uv tool install``, pipx), the traced
    program runs in an environment of its own that has neither. The start-up
    hook then imports the tracer from here, and only from here: putting the
    tool's whole site-packages on the program's path would let the program
    import click, rich or zmq that it never installed. Symbolic links, made
    once per distea install under the user's cache directory (atomically:
    concurrent runs may race to make it); None where that is impossible (the
    hook then reports the child as untraced, with the reason).
    """
    msgpack = find_spec("msgpack")
    if msgpack is None or msgpack.origin is None:
        return None
    sources = {"distea": os.path.dirname(os.path.realpath(__file__)),
               "msgpack": os.path.dirname(os.path.realpath(msgpack.origin))}
    digest = sha256("\0".join(sources.values()).encode()).hexdigest()[:16]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    target = os.path.join(cache, "distea", f"tracer-path-{digest}")
    if os.path.isdir(target):
        return target
    try:
        import shutil
        import tempfile

        os.makedirs(os.path.dirname(target), exist_ok=True)
        building = tempfile.mkdtemp(prefix=".building-", dir=os.path.dirname(target))
        for name, source in sources.items():
            os.symlink(source, os.path.join(building, name), target_is_directory=True)
        try:
            os.rename(building, target)
        except OSError:  # another run made it first
            shutil.rmtree(building, ignore_errors=True)
    except OSError:
        return None
    return target if os.path.isdir(target) else None


def find_spec(name: str) -> Any:
    """Where the top-level module ``name`` is, without importing it: what
    ``importlib.util.find_spec`` asks, without importing importlib (and warnings)."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = find(name, None) if find is not None else None
        if spec is not None:
            return spec
    return None


def sha256(data: bytes) -> Any:
    """hashlib's SHA-256; Python's own (``_sha2``) where there is one: OpenSSL's, which
    hashlib prefers, costs a library load (3 ms) for one digest of two paths."""
    try:
        from _sha2 import sha256 as builtin
    except ImportError:  # a Python built with OpenSSL's hashes only
        from hashlib import sha256 as openssl

        return openssl(data)
    return builtin(data)


def ipc_endpoint(run_dir: StrPath) -> tuple[str, str | None]:
    """The collector's ``ipc://`` endpoint; a private temp dir when the path is too long."""
    path = os.path.join(os.path.realpath(run_dir), IPC_NAME)
    if len(path) <= IPC_PATH_MAX:
        return f"ipc://{path}", None
    import tempfile

    private = tempfile.mkdtemp(prefix="distea-")  # mode 0700
    return f"ipc://{os.path.join(private, IPC_NAME)}", private


def listen(endpoint: str) -> int:
    """Bind and listen on the ``ipc://`` endpoint's path; the listening descriptor.

    A tracer may connect from here on: it waits in the backlog until the
    collector (:class:`distea.localcollector.LocalCollector`, given this
    descriptor) accepts it.
    """
    path = endpoint[len("ipc://"):]
    with suppress(FileNotFoundError):
        os.unlink(path)  # as ZeroMQ's own bind does
    listener = Socket(AF_UNIX, SOCK_STREAM)
    try:
        listener.bind(path)
        listener.listen(LISTEN_BACKLOG)
    except BaseException:
        listener.close()
        raise
    return listener.detach()


def trace_command(command: list[str], output: StrPath | None,
                  options: TraceOptions) -> RunOutcome:
    command = resolve_command(command)
    if options.connect is not None or options.key_file is not None:
        from distea.remoterun import trace_remote

        return trace_remote(command, options)
    run_dir = make_run_dir(output)
    endpoint, private = ipc_endpoint(run_dir)
    try:
        listener = listen(endpoint)
    except OSError as exc:
        raise LaunchError(f"cannot start the collector at {endpoint}: {exc.strerror}",
                          2) from None
    prepares = runs_python(command)
    config = TracerConfig(
        run_dir=os.path.realpath(run_dir),
        endpoint=endpoint,
        mode=options.mode,
        root=os.path.realpath(options.root),
        include=options.include,
        exclude=options.exclude,
        flush_timeout_ms=2000,
        prepared=tracer_code_id() if prepares else None,
    )
    started = time.time()
    meta: dict[str, object] = {
        "run_id": os.path.basename(os.path.normpath(run_dir)),
        "command": command,
        "cwd": os.getcwd(),
        "mode": options.mode,
        "include": list(options.include),
        "exclude": list(options.exclude),
        "endpoint": endpoint,
        "started_at": started,
        "python": sys.version.split()[0],
        "host": gethostname(),
    }
    collectors: list[LocalCollector] = []
    notes: list[str] = []

    def while_starting() -> None:
        """While the command starts: the collector's thread takes over the listening
        socket, run.json is written, and (for a Python command) the tracer's caches and
        start-up image are brought up to date, which its first process then need not do."""
        try:
            from distea.localcollector import LocalCollector

            collectors.append(LocalCollector(run_dir, endpoint, listener).start())
        except Exception as exc:  # the command runs on: say why it is not traced
            unlink_socket(endpoint)  # its children see it
            notes.append(f"cannot start the collector at {endpoint}: {exc}; "
                         "the command ran untraced")
        write_run_meta(run_dir, meta)
        if prepares and collectors:
            # The only other thread here, the collector's, imports nothing in a local
            # run: the bytecode flag this turns off for a moment is no one else's.
            from distea.tracer.bytecode import refresh_tracer_code

            with suppress(Exception):  # a speed-up of the command's start, never a failure
                refresh_tracer_code()

    status: int | None = None
    still_open: list[str] = []
    summary: dict[str, Any] = {"problems": notes, "still_open": []}
    try:
        status = run_child(command, tracer_environment(config, dict(os.environ)),
                            while_starting)
    finally:
        if collectors:
            collector = collectors[0]
            streams = collector.drain(options.flush_timeout)
            collector.close()
            still_open = [s.key for s in streams]
            summary = collector.summary(streams)
        elif not notes:
            with suppress(OSError):
                os.close(listener)  # never handed over: the command could not start
        unlink_socket(endpoint)
        if private is not None:
            import shutil

            shutil.rmtree(private, ignore_errors=True)
        finished = time.time()
        meta.update(finished_at=finished, collector=summary)
        if status is not None:
            meta["exit_code"] = exit_code_of(status)
            if status < 0:
                meta["signal"] = -status
        write_run_meta(run_dir, meta)
    return RunOutcome(run_dir, exit_code_of(status), finished - started, still_open,
                      -status if status < 0 else None, endpoint, notes)


def unlink_socket(endpoint: str) -> None:
    with suppress(FileNotFoundError):
        os.unlink(endpoint[len("ipc://"):])


def exit_code_of(status: int) -> int:
    """A ``Popen.returncode`` as a shell would report it (128 + N for signal N)."""
    return status if status >= 0 else 128 - status


# -- the child ---------------------------------------------------------------------


def run_child(command: list[str], env: dict[str, str],
               while_starting: Callable[[], None] | None = None) -> int:
    """Start the command, pass our signals on to it, return its status as
    ``Popen.returncode`` gives it (``-N`` for signal N).

    ``while_starting`` runs once the command is started and our signals are
    passed on, before waiting for it (it must not raise).

    SIGINT typed at a terminal reaches the whole foreground process group,
    the command included: passing it on as well would deliver it twice, so
    it is passed on only when it did not come from our terminal.

    ``posix_spawnp``, not ``subprocess`` (whose import costs every run ~10 ms):
    the command is looked up on ``PATH`` and started as an ``exec`` from a
    shell would, with the signals Python ignores for itself back to their
    defaults (as ``restore_signals`` does), and with the descriptors that
    ``distea run`` itself was given, as it would have them without distea
    (descriptors distea opens are close-on-exec). One trace of the C library
    stays: glibc's ``posix_spawn`` starts the command with its two internal
    signals (32 and 33, below SIGRTMIN) ignored, as every program started by
    ``posix_spawn`` has them (Rust's ``Command``, for one); glibc programs
    install their own handlers for them at start.
    """
    try:
        pid = os.posix_spawnp(command[0], command, env, setsigdef=RESTORED_SIGNALS)
    except FileNotFoundError:
        raise LaunchError(f"command not found: {command[0]}", 127) from None
    except PermissionError:
        raise LaunchError(f"permission denied: {command[0]}", 126) from None
    except OSError as exc:
        raise LaunchError(f"cannot run {command[0]}: {exc.strerror}", 126) from None

    reaped = False

    def forward(signum: int, frame: FrameType | None) -> None:
        if reaped or (signum == signal.SIGINT and _in_terminal_foreground()):
            return  # once reaped, the pid may be another process's
        with suppress(ProcessLookupError):
            os.kill(pid, signum)

    previous = {s: signal.signal(s, forward) for s in FORWARDED_SIGNALS}
    try:
        if while_starting is not None:
            while_starting()
        while True:
            try:
                _, status = os.waitpid(pid, 0)
            except KeyboardInterrupt:  # only if a handler was replaced under us
                continue
            reaped = True
            return os.waitstatus_to_exitcode(status)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _in_terminal_foreground() -> bool:
    for fd in (0, 1, 2):
        try:
            return os.tcgetpgrp(fd) == os.getpgrp()
        except OSError:
            continue
    return False


def die_like(signum: int) -> None:
    """End this process by ``signum``, as the traced command ended (no core file)."""
    import resource

    with suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
    os.kill(os.getpid(), signum)
    time.sleep(1)  # a signal that does not kill (SIGCHLD-like) falls through
