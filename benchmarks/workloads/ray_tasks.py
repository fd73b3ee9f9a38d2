"""Ray tasks: N small remote function calls, each awaited with ray.get (one worker).

python -m benchmarks.workloads.ray_tasks [--n 300]

Ray's start-up (seconds) is outside the timed loop; the loop measures what a
task's submission, execution and ``ray.get`` cost, traced or not.
"""

from __future__ import annotations

import argparse

import ray

from benchmarks.workloads.timing import timed


def compute(a: int, b: int) -> int:
    return a + b


@ray.remote
def task(i: int) -> int:
    return compute(i, i * 3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    args = parser.parse_args()
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    try:
        ray.get(task.remote(0))  # the worker is started and the function exported
        total = 0
        with timed():
            for i in range(args.n):
                total += ray.get(task.remote(i))
        print(total)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
