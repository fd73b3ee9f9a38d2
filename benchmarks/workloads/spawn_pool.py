"""A spawn ``Pool(4).map`` over 100 small items: four fresh interpreters, little work.

What a short job or a test suite's process pool costs traced: almost all of
it is the start-up of each worker (interpreter, ``multiprocessing``'s spawn
preparation, and the tracer's own start).

python -m benchmarks.workloads.spawn_pool [--items 100]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp

from benchmarks.workloads.timing import timed


def square(x: int) -> int:
    return x * x


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=100)
    args = parser.parse_args()
    with timed(), mp.get_context("spawn").Pool(4) as pool:
        total = sum(pool.map(square, range(args.items)))
    print(total)


if __name__ == "__main__":
    main()
