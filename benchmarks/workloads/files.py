"""A file-heavy program: one process writes many small files, a child reads them all.

Every open and close goes through the file channel (a send per write-close,
a receive per read-open, each with one ``fstat``), so this is its worst case
per byte: thousands of tiny files and almost no other work.

python -m benchmarks.workloads.files [--files 2000]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import tempfile
from pathlib import Path

from benchmarks.workloads.timing import timed


def write_all(folder: Path, count: int) -> None:
    for i in range(count):
        with open(folder / f"part-{i:05d}.txt", "w") as f:
            f.write(f"record {i}\n" * 4)


def read_all(folder: str, count: int, out: mp.SimpleQueue) -> None:  # type: ignore[type-arg]
    total = 0
    for i in range(count):
        with open(os.path.join(folder, f"part-{i:05d}.txt")) as f:
            total += len(f.read())
    out.put(total)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="distea-files-") as folder, timed():
        write_all(Path(folder), args.files)
        ctx = mp.get_context("fork")
        out = ctx.SimpleQueue()
        reader = ctx.Process(target=read_all, args=(folder, args.files, out))
        reader.start()
        total = out.get()
        reader.join()
    print(total)


if __name__ == "__main__":
    main()
