"""A spawn ``Pool(4).map`` over 100 small items: four fresh interpreters, little work.

What a short job or a test suite's process pool costs traced: almost all of
it is the start-up of each worker (interpreter, ``multiprocessing``'s spawn
preparation, and the tracer's own start).

python -m benchmarks.workloads.spawn_pool [--items 100]
"""

from __future__ import annotations

import time

STARTED_NS = time.time_ns()  # the program's first line (benchmarks/startup_phases.py)

import argparse  # noqa: E402  # after the first mark: their import is a phase
import multiprocessing as mp  # noqa: E402

from benchmarks.workloads.timing import Phases, timed  # noqa: E402


def square(x: int) -> int:
    return x * x


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=100)
    args = parser.parse_args()
    mark = Phases(STARTED_NS)
    mark("imported")
    with timed():
        pool = mp.get_context("spawn").Pool(4)
        mark("pool made")
        with pool:
            total = sum(pool.map(square, range(args.items)))
            mark("mapped")
        mark("terminated")
    mark.write()
    print(total)


if __name__ == "__main__":
    main()
