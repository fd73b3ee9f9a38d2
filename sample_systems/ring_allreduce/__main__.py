"""Launch ring all-reduce training: W worker processes started with multiprocessing spawn.

python -m sample_systems.ring_allreduce [--workers W] [--steps S]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import queue
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.context import SpawnProcess
from multiprocessing.queues import Queue
from operator import attrgetter
from typing import Any

from sample_systems.ring_allreduce.worker import WorkerResult, run_worker

TIMEOUT_S = 30.0


@contextmanager
def rank_environment(rank: int, world_size: int) -> Iterator[None]:
    """Set RANK/WORLD_SIZE/LOCAL_RANK while one child is spawned, then restore.

    A spawned child inherits the environment at start, so it carries its rank
    from its first instruction on (a tracer can label the process at startup).
    """
    values = {"RANK": str(rank), "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(rank)}
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                del os.environ[key]
            else:
                os.environ[key] = old


def start_workers(
    world_size: int, steps: int, results: Queue
) -> tuple[list[SpawnProcess], Queue, list[Queue]]:
    """Spawn one process per rank, each with its rank in its environment."""
    ctx = multiprocessing.get_context("spawn")
    ports_out: Queue = ctx.Queue()
    ports_in: list[Queue] = [ctx.Queue() for _ in range(world_size)]
    processes = []
    for rank in range(world_size):
        process = ctx.Process(
            target=run_worker,
            args=(steps, ports_out, ports_in[rank], results),
            name=f"rank-{rank}",
        )
        with rank_environment(rank, world_size):
            process.start()
        processes.append(process)
    return processes, ports_out, ports_in


def wait_for(source: Queue, processes: list[SpawnProcess], deadline: float) -> Any:
    """Get one item from `source`, failing fast if any worker has died."""
    while time.monotonic() < deadline:
        try:
            return source.get(timeout=0.1)
        except queue.Empty:
            failed = [p.name for p in processes if p.exitcode not in (None, 0)]
            if failed:
                raise RuntimeError(f"worker(s) failed: {', '.join(failed)}") from None
    raise TimeoutError("workers did not answer before the deadline")


def share_ports(
    ports_out: Queue, ports_in: list[Queue], processes: list[SpawnProcess], deadline: float
) -> None:
    """Collect every rank's listening port and send the full table to every rank."""
    ports = dict(wait_for(ports_out, processes, deadline) for _ in processes)
    table = [ports[rank] for rank in range(len(processes))]
    for inbox in ports_in:
        inbox.put(table)


def stop_workers(processes: list[SpawnProcess]) -> None:
    """Join every worker; terminate any that will not finish."""
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            process.terminate()
            process.join(timeout=5)


def report(results: list[WorkerResult]) -> None:
    """Print the global loss curve and check that every rank holds the same model."""
    losses = results[0].losses
    for step, loss in enumerate(losses):
        if step % 5 == 0 or step == len(losses) - 1:
            print(f"step {step:3d}  loss {loss:.6f}")
    print(f"first loss {losses[0]:.6f}  last loss {losses[-1]:.6f}")
    agree = all(result.weights == results[0].weights for result in results)
    print(f"{len(results)} ranks {'agree' if agree else 'DISAGREE'} on the final weights")
    if not agree:
        raise RuntimeError("ranks disagree on the final weights")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    deadline = time.monotonic() + TIMEOUT_S
    results_queue: Queue = multiprocessing.get_context("spawn").Queue()
    processes, ports_out, ports_in = start_workers(args.workers, args.steps, results_queue)
    try:
        share_ports(ports_out, ports_in, processes, deadline)
        results = [wait_for(results_queue, processes, deadline) for _ in processes]
    except (RuntimeError, TimeoutError) as err:
        print(f"ring_allreduce: FAILED: {err}", file=sys.stderr)
        return 1
    finally:
        stop_workers(processes)
    print(f"ring_allreduce: launcher + {args.workers} ranks started with multiprocessing spawn")
    report(sorted(results, key=attrgetter("rank")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
