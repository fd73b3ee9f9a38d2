"""CPU cost of recording one message, measured in one process (no scheduler noise).

    uv run python -m benchmarks.workloads.message_path [--repeats 5] [--n 20000]

The two-process loops of the main suite add the tracer's cost of both
processes *and* every wake-up delay of a busy 2-CPU machine to each round
trip, so their added µs swing from run to run. Here both ends of each
exchange run in one process, in lock-step, and the loop is timed with
``time.process_time()``: what is left is the CPU the tracer spends per
message. It runs itself untraced and under ``distea run`` (compact mode),
``--repeats`` times each, interleaved, and prints medians:

- **socket**: the TCP loop's own framing functions
  (``benchmarks.workloads.tcp_loop``) over a ``socketpair``: per round trip
  2 ``sendall`` and 4 ``recv`` (header, then body, each way);
- **zmq**: a PAIR pair over ``inproc://``, one ``send`` and one ``recv``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.workloads.tcp_loop import encode_request, handle, read_frame, write_frame
from benchmarks.workloads.tools import distea_command

MESSAGES = {"socket": 6, "zmq": 2}
"""Recorded messages per round trip of each loop."""


def socket_round_trips(n: int) -> float:
    import socket

    a, b = socket.socketpair()
    try:
        def loop(count: int) -> float:
            started = time.process_time()
            for i in range(count):
                write_frame(a, encode_request(i))
                write_frame(b, handle(read_frame(b)))
                int(read_frame(a))
            return time.process_time() - started

        loop(n // 10)  # warm up: first starts, stream names
        return loop(n) / n
    finally:
        a.close()
        b.close()


def zmq_round_trips(n: int) -> float:
    import zmq

    context = zmq.Context()
    a, b = context.socket(zmq.PAIR), context.socket(zmq.PAIR)
    a.bind("inproc://message-path")
    b.connect("inproc://message-path")
    payload = b"x" * 64
    try:
        def loop(count: int) -> float:
            started = time.process_time()
            for _ in range(count):
                a.send(payload)
                b.recv()
            return time.process_time() - started

        loop(n // 10)
        return loop(n) / n
    finally:
        a.close(linger=0)
        b.close(linger=0)
        context.term()


LOOPS: dict[str, Callable[[int], float]] = {"socket": socket_round_trips, "zmq": zmq_round_trips}


def inner(n: int) -> None:
    """Run every loop once in this process and print seconds per round trip as JSON."""
    print(json.dumps({name: loop(n) for name, loop in LOOPS.items()}))


def measure_once(traced: bool, n: int) -> dict[str, float]:
    command = [sys.executable, "-m", __spec__.name, "--inner", "--n", str(n)]
    with tempfile.TemporaryDirectory(prefix="distea-message-path-") as out:
        if traced:
            command = distea_command("compact", command, Path(out))
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result: dict[str, float] = json.loads(output.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--n", type=int, default=20_000, help="round trips per loop")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner:
        inner(args.n)
        return
    samples: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for _ in range(args.repeats):
        for traced in (False, True):
            samples[traced].append(measure_once(traced, args.n))
    print(f"CPU µs per round trip, median of {args.repeats} (process_time, one process)\n")
    print("| loop | messages/round trip | untraced | distea compact | added | added per message |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, messages in MESSAGES.items():
        plain = statistics.median(s[name] for s in samples[False]) * 1e6
        with_distea = statistics.median(s[name] for s in samples[True]) * 1e6
        added = with_distea - plain
        print(f"| {name} | {messages} | {plain:.1f} | {with_distea:.1f} | +{added:.1f} "
              f"| +{added / messages:.2f} |")


if __name__ == "__main__":
    main()
