"""A call-heavy loop: many small functions, methods, closures, generators and
exceptions, called over and over (the per-location cost of the callbacks).

python -m benchmarks.workloads.calls [--n 200000]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from benchmarks.workloads.timing import timed


@dataclass
class Point:
    x: float
    y: float

    def norm2(self) -> float:
        return self.x * self.x + self.y * self.y

    def shifted(self, dx: float) -> Point:
        return Point(self.x + dx, self.y)


def make_scaler(k: float):
    def scale(v: float) -> float:
        return v * k

    return scale


def evens(limit: int):
    yield from range(0, limit, 2)


def checked(v: int) -> int:
    if v % 97 == 0:
        raise ValueError(v)
    return v


def step(i: int, scale) -> float:
    p = Point(float(i), 1.0).shifted(0.5)
    total = scale(p.norm2())
    for e in evens(6):
        total += e
    try:
        total += checked(i)
    except ValueError:
        total -= 1
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200_000)
    args = parser.parse_args()
    scale = make_scaler(0.5)
    acc = 0.0
    with timed():
        for i in range(args.n):
            acc += step(i, scale)
    print(int(acc) % 1000)


if __name__ == "__main__":
    main()
