"""Where the wall time of a traced spawn pool goes, phase by phase, against untraced.

    uv run python -m benchmarks.startup_phases [--rounds 15]

The start-up table (``python -m benchmarks.startup``) says how much longer
the spawn ``Pool(4)`` workload takes traced; this says in which part of
the program. The workload (``benchmarks/workloads/spawn_pool.py``) marks
the wall clock at its first line, after its imports, once the pool is made
(the workers are started, not yet running), once ``map`` has its results
(the workers have started and worked), and once ``terminate`` has joined
them; this runner adds the moment it started the command and the moment
the command was reaped. Untraced and under ``distea run -q`` in
alternation; medians of ``--rounds``.

- *to the first line*: the interpreter's start, and traced also ``distea
  run``'s own start and the tracer's start in the program's process;
- *imports*: ``argparse`` and ``multiprocessing`` (traced: the channels
  that ``multiprocessing``'s modules wake);
- *Pool(4)*: the resource tracker and four workers spawned;
- *map*: the workers' start (interpreter, spawn preparation, the tracer's
  start in each) and the work, on a machine that may have fewer cores than
  processes: what one process adds delays the others;
- *terminate*: SIGTERM to the workers (traced: each flushes, then dies of
  it) and their joins;
- *exit*: the program's own exit, and traced the tracer's end in it and in
  the resource tracker, which ``distea run`` waits for before it returns.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.workloads.timing import PHASES_ENV, read_phases

REPO = Path(__file__).resolve().parents[1]
DISTEA = Path(sys.executable).parent / "distea"
WORKLOAD = "benchmarks.workloads.spawn_pool"
PHASES = (
    ("to the program's first line", "spawned", "started"),
    ("imports (argparse, multiprocessing)", "started", "imported"),
    ("Pool(4): tracker and workers spawned", "imported", "pool made"),
    ("map: workers start and work", "pool made", "mapped"),
    ("terminate: workers end, joined", "mapped", "terminated"),
    ("exit (traced: and distea run's end)", "terminated", "reaped"),
)


def one_run(traced: bool, folder: Path) -> dict[str, int]:
    """The marks of one run, with ``spawned`` and ``reaped`` added (wall clock, ns)."""
    marks_path = folder / "marks"
    command = [sys.executable, "-m", WORKLOAD]
    if traced:
        command = [str(DISTEA), "run", "-q", "-o", str(folder / f"run-{time.monotonic_ns()}"),
                   "--", *command]
    env = {**os.environ, PHASES_ENV: str(marks_path)}
    spawned = time.time_ns()
    subprocess.run(command, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
    reaped = time.time_ns()
    marks = read_phases(str(marks_path))
    marks_path.unlink()
    return {**marks, "spawned": spawned, "reaped": reaped}


def measure(rounds: int) -> list[tuple[str, float, float]]:
    """(phase, untraced ms, traced ms): medians over ``rounds`` alternating runs."""
    samples: dict[bool, list[dict[str, int]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="distea-phases-") as tmp:
        for i in range(rounds):
            for traced in ((False, True) if i % 2 == 0 else (True, False)):
                samples[traced].append(one_run(traced, Path(tmp)))
    rows = []
    for name, begin, end in (*PHASES, ("whole command", "spawned", "reaped")):
        medians = [statistics.median((run[end] - run[begin]) / 1e6 for run in samples[traced])
                   for traced in (False, True)]
        rows.append((name, medians[0], medians[1]))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    rows = measure(args.rounds)
    print(f"spawn Pool(4).map, 100 items: wall time by phase, medians of {args.rounds} runs")
    print("| phase | untraced | distea run | added |")
    print("| --- | ---: | ---: | ---: |")
    for name, untraced, traced in rows:
        print(f"| {name} | {untraced:.1f} ms | {traced:.1f} ms | {traced - untraced:+.1f} ms |")
    print("(the phases' medians need not add up to the whole command's)")


if __name__ == "__main__":
    main()
