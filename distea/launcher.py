"""Run a command under tracing: collector up, environment set, command launched.

``distea run`` is a thin CLI over :func:`trace_command`. The traced command
gets the same arguments, working directory, stdin/stdout/stderr and exit
status as without distea; only its environment gains the tracer's hook
(``PYTHONPATH`` first entry and ``DISTEA_CONFIG``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from distea.collector import Collector
from distea.tracer.config import CONFIG_ENV, PARENT_TOKEN_ENV, START_METHOD_ENV, TracerConfig
from distea.traceformat import (
    DEFAULT_RUNS_DIR,
    create_run_dir,
    new_run_id,
    write_run_meta,
)

BOOTSTRAP_DIR = Path(__file__).parent / "tracer" / "bootstrap"
IPC_NAME = "collector.ipc"
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class LaunchError(Exception):
    """The command could not be started; ``exit_code`` follows shell conventions."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class TraceOptions:
    mode: str = "compact"
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    flush_timeout: float = 10.0
    """Seconds to wait after the command for processes still flushing."""
    root: str = "."


@dataclass
class RunOutcome:
    run_dir: Path
    exit_code: int
    duration_s: float
    still_open: list[str] = field(default_factory=list)
    """Process keys that never sent a final batch (killed, or outlived the wait)."""


def allocate_run_dir(output: Path | None) -> Path:
    if output is not None:
        if output.exists() and any(output.iterdir()):
            raise LaunchError(f"{output} exists and is not empty; choose a new directory", 2)
        if output.exists():
            output.rmdir()
        return create_run_dir(output)
    DEFAULT_RUNS_DIR.mkdir(parents=True, exist_ok=True)
    for attempt in range(100):
        candidate = DEFAULT_RUNS_DIR / (new_run_id() + (f"-{attempt}" if attempt else ""))
        try:
            return create_run_dir(candidate)
        except FileExistsError:
            continue
    raise LaunchError("could not allocate a run directory", 2)


def resolve_command(command: list[str]) -> list[str]:
    if not command:
        raise LaunchError("no command given: distea run -- python app.py", 2)
    if os.sep not in command[0] and shutil.which(command[0]) is None:
        raise LaunchError(f"command not found: {command[0]}", 127)
    return command


def tracer_environment(config: TracerConfig, base: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in (PARENT_TOKEN_ENV, START_METHOD_ENV)}
    env[CONFIG_ENV] = config.to_env()
    existing = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BOOTSTRAP_DIR), existing]))
    return env


def trace_command(command: list[str], output: Path | None, options: TraceOptions) -> RunOutcome:
    command = resolve_command(command)
    try:
        run_dir = allocate_run_dir(output)
    except OSError as exc:
        raise LaunchError(f"cannot create the run directory: {exc.strerror}: {exc.filename}",
                          2) from None
    endpoint = f"ipc://{run_dir.resolve() / IPC_NAME}"
    collector = Collector(run_dir, endpoint).start()
    config = TracerConfig(
        run_dir=str(run_dir.resolve()),
        endpoint=endpoint,
        mode=options.mode,
        root=str(Path(options.root).resolve()),
        include=options.include,
        exclude=options.exclude,
        flush_timeout_ms=2000,
    )
    started = time.time()
    meta: dict[str, object] = {
        "run_id": run_dir.name,
        "command": command,
        "cwd": os.getcwd(),
        "mode": options.mode,
        "include": list(options.include),
        "exclude": list(options.exclude),
        "endpoint": endpoint,
        "started_at": started,
        "python": sys.version.split()[0],
    }
    write_run_meta(run_dir, meta)
    try:
        exit_code = _run_child(command, tracer_environment(config, dict(os.environ)))
    finally:
        still_open = collector.drain(options.flush_timeout)
        collector.close()
        (run_dir / IPC_NAME).unlink(missing_ok=True)
        finished = time.time()
        meta.update(
            finished_at=finished,
            collector={
                "batches": collector.stats.batches,
                "bytes": collector.stats.bytes,
                "rejected": collector.stats.rejected,
                "problems": collector.stats.problems,
                "still_open": [s.key for s in still_open],
            },
        )
    meta["exit_code"] = exit_code
    write_run_meta(run_dir, meta)
    return RunOutcome(run_dir, exit_code, finished - started, [s.key for s in still_open])


def _run_child(command: list[str], env: dict[str, str]) -> int:
    """Start the command, pass our signals on to it, return its exit status."""
    try:
        child = subprocess.Popen(command, env=env)
    except FileNotFoundError:
        raise LaunchError(f"command not found: {command[0]}", 127) from None
    except PermissionError:
        raise LaunchError(f"permission denied: {command[0]}", 126) from None

    def forward(signum: int, frame: FrameType | None) -> None:
        child.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in FORWARDED_SIGNALS}
    try:
        returncode = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return returncode if returncode >= 0 else 128 - returncode
