"""A small six-process multiprocessing program: a coordinator and five spawned workers.

Each worker takes a few tasks from a shared queue and puts results on
another; the coordinator sums them. Short-lived processes with a handful of
messages each: the start-up cost per process dominates, as in many small
distributed jobs.

python -m benchmarks.workloads.six_procs [--tasks 50]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
from typing import Any

from benchmarks.workloads.timing import timed

WORKERS = 5


def work(n: int) -> int:
    return sum(i * i for i in range(n))


def worker(tasks: Any, results: Any) -> None:
    while (n := tasks.get()) is not None:
        results.put(work(n))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=50)
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    with timed():
        tasks, results = ctx.Queue(), ctx.Queue()
        procs = [ctx.Process(target=worker, args=(tasks, results)) for _ in range(WORKERS)]
        for p in procs:
            p.start()
        for i in range(args.tasks):
            tasks.put(100 + i)
        for _ in procs:
            tasks.put(None)
        total = sum(results.get() for _ in range(args.tasks))
        for p in procs:
            p.join()
    print(total)


if __name__ == "__main__":
    main()
