"""Ventilator: generates a batch of tasks and fans them out to the workers.

It waits for every worker to report ready before sending, so that PUSH's
round-robin spreads the batch over all workers instead of handing it all to
whichever connected first.
"""

from __future__ import annotations

import argparse
import random

import zmq

from sample_systems._launch import announce_ready
from sample_systems.task_pipeline._zmq import bind_loopback, endpoint, make_socket

SEED = 7


def generate_tasks(count: int) -> list[int]:
    """Each task is an upper bound below which a worker counts primes."""
    rng = random.Random(SEED)
    return [rng.randrange(1_000, 8_000) for _ in range(count)]


def wait_for_workers(ready: zmq.Socket[bytes], workers: int) -> list[str]:
    """Block (with a timeout) until every worker has said it is ready."""
    return sorted(ready.recv().decode() for _ in range(workers))


def announce_batch(sink: zmq.Socket[bytes], count: int) -> None:
    """Tell the sink how many results to expect."""
    sink.send_multipart([b"BATCH", str(count).encode()])


def dispatch_tasks(tasks_out: zmq.Socket[bytes], tasks: list[int]) -> None:
    """Push every task; ZeroMQ round-robins them over the connected workers."""
    for task_id, bound in enumerate(tasks):
        tasks_out.send_multipart([str(task_id).encode(), str(bound).encode()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sink-port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=24)
    args = parser.parse_args()
    with zmq.Context() as ctx:
        tasks_out = make_socket(ctx, zmq.PUSH)
        ready = make_socket(ctx, zmq.PULL)
        sink = make_socket(ctx, zmq.PUSH)
        sink.connect(endpoint(args.sink_port))
        announce_ready(bind_loopback(tasks_out), bind_loopback(ready))
        workers = wait_for_workers(ready, args.workers)
        tasks = generate_tasks(args.tasks)
        announce_batch(sink, len(tasks))
        dispatch_tasks(tasks_out, tasks)
        for sock in (tasks_out, ready, sink):
            sock.close()
    print(f"dispatched {len(tasks)} tasks to {', '.join(workers)}")


if __name__ == "__main__":
    main()
