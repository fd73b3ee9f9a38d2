"""Worker: pulls tasks, counts primes, pushes results, stops on the sink's signal."""

from __future__ import annotations

import argparse
import math

import zmq

from sample_systems.task_pipeline._zmq import (
    RECV_TIMEOUT_MS,
    connect_and_wait,
    endpoint,
    make_socket,
)


def count_primes(bound: int) -> int:
    """The work itself: how many primes are below `bound` (trial division)."""
    return sum(1 for n in range(2, bound) if is_prime(n))


def is_prime(n: int) -> bool:
    """Trial division by odd numbers up to the square root."""
    if n % 2 == 0:
        return n == 2
    return all(n % d for d in range(3, math.isqrt(n) + 1, 2))


def report_ready(ready: zmq.Socket[bytes], name: str) -> None:
    """Tell the ventilator this worker's task connection is up."""
    ready.send(name.encode())


def process_tasks(
    tasks_in: zmq.Socket[bytes], control: zmq.Socket[bytes], results: zmq.Socket[bytes]
) -> None:
    """Serve tasks until the stop signal arrives (or nothing happens for too long)."""
    poller = zmq.Poller()
    poller.register(tasks_in, zmq.POLLIN)
    poller.register(control, zmq.POLLIN)
    while True:
        events = dict(poller.poll(RECV_TIMEOUT_MS))
        if not events:
            raise TimeoutError("no task and no stop signal")
        if control in events:
            control.recv()
            return
        task_id, bound = tasks_in.recv_multipart()
        results.send_multipart([b"RESULT", task_id, str(count_primes(int(bound))).encode()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", required=True)
    parser.add_argument("--tasks-port", type=int, required=True)
    parser.add_argument("--ready-port", type=int, required=True)
    parser.add_argument("--sink-port", type=int, required=True)
    parser.add_argument("--control-port", type=int, required=True)
    args = parser.parse_args()
    with zmq.Context() as ctx:
        control = make_socket(ctx, zmq.SUB)
        control.setsockopt(zmq.SUBSCRIBE, b"")
        connect_and_wait(control, args.control_port)
        tasks_in = make_socket(ctx, zmq.PULL)
        connect_and_wait(tasks_in, args.tasks_port)
        results = make_socket(ctx, zmq.PUSH)
        results.connect(endpoint(args.sink_port))
        ready = make_socket(ctx, zmq.PUSH)
        ready.connect(endpoint(args.ready_port))
        report_ready(ready, args.name)
        process_tasks(tasks_in, control, results)
        # The stop signal means the sink has every result: nothing is left to
        # deliver, so do not linger (the monitor sockets used while connecting
        # would otherwise hold the context open for the full linger period).
        for sock in (control, tasks_in, results, ready):
            sock.close(linger=0)
    print("stopped on the sink's signal")


if __name__ == "__main__":
    main()
