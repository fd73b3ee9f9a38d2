"""The workload's own measure of its main loop, free of start-up and shutdown.

A workload wraps its main loop in :func:`timed`; when ``BENCH_TIMING_FILE``
is set (the benchmark runner sets it for every run), the loop's wall time
is appended to that file. Only the process that runs the loop writes
(the client, in the two-process workloads, whose loop spans the whole
exchange with the server).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

TIMING_ENV = "BENCH_TIMING_FILE"


@contextmanager
def timed() -> Iterator[None]:
    start = time.perf_counter()
    yield
    elapsed = time.perf_counter() - start
    path = os.environ.get(TIMING_ENV)
    if path:
        with open(path, "a") as fh:
            fh.write(f"{elapsed!r}\n")


def read(path: str) -> float | None:
    """The loop time a run wrote, or None."""
    try:
        with open(path) as fh:
            values = [float(line) for line in fh if line.strip()]
    except (OSError, ValueError):
        return None
    return values[-1] if values else None


PHASES_ENV = "BENCH_PHASES_FILE"
"""Where :class:`Phases` writes its marks (``benchmarks/startup_phases.py`` sets it)."""


class Phases:
    """Wall-clock marks of a workload's phases, written once at the end.

    Kept in memory and written by :meth:`write` in one go, so that a traced
    run records no file write between two marks.
    """

    def __init__(self, started_ns: int) -> None:
        self.marks: list[tuple[str, int]] = [("started", started_ns)]

    def __call__(self, name: str) -> None:
        self.marks.append((name, time.time_ns()))

    def write(self) -> None:
        path = os.environ.get(PHASES_ENV)
        if path:
            with open(path, "w") as fh:
                fh.writelines(f"{name} {at}\n" for name, at in self.marks)


def read_phases(path: str) -> dict[str, int]:
    """Mark name → wall clock (ns), from what :meth:`Phases.write` wrote."""
    with open(path) as fh:
        return {name: int(at) for name, at in (line.rsplit(" ", 1) for line in fh if line.strip())}
