"""CPU-bound pure Python: recursive calls (the tracer's callback cost, nothing else).

python -m benchmarks.workloads.cpu [--n 27] [--rounds 3]
"""

from __future__ import annotations

import argparse

from benchmarks.workloads.timing import timed


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=27)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    total = 0
    with timed():
        for _ in range(args.rounds):
            total += fib(args.n)
    print(total)


if __name__ == "__main__":
    main()
