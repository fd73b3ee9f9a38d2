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
