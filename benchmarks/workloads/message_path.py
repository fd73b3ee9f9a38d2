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

``--parts`` splits one message's cost instead: inside one traced process it
times the pieces of the path (the original calls, the patched ones, an empty
wrapper, the session's recorder alone, msgpack packing one record, pyzmq's
``RCVMORE`` query), best of 5 runs each, in nanoseconds.
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
from typing import Any

import msgpack

from benchmarks.workloads.tcp_loop import encode_request, handle, read_frame, write_frame
from benchmarks.workloads.tools import distea_command
from distea.wire import Tag

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


def best_ns(action: Callable[[], None], n: int) -> float:
    """Nanoseconds per iteration of ``action`` (a loop of ``n``), best of 5 runs."""
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best / n * 1e9


def message_parts(n: int) -> dict[str, float]:
    """The pieces of one message's path, timed inside this (traced) process."""
    import socket

    import zmq

    from distea.tracer.session import current

    session = current()
    if session is None:
        raise SystemExit("--parts runs under distea run (it times the tracer's own pieces)")
    a, b = socket.socketpair()
    sendall: Any = socket.socket.sendall  # distea's wrappers, which keep __wrapped__
    recv: Any = socket.socket.recv
    raw_sendall, raw_recv = sendall.__wrapped__, recv.__wrapped__
    payload = b"x" * 16

    def patched() -> None:
        for _ in range(n):
            sendall(a, payload)
            recv(b, 64)

    def original() -> None:
        for _ in range(n):
            raw_sendall(a, payload)
            raw_recv(b, 64)

    def empty_wrappers() -> None:
        def send_wrapper(sock: socket.socket, data: bytes, *args: object) -> None:
            raw_sendall(sock, data, *args)

        def recv_wrapper(sock: socket.socket, *args: object) -> bytes:
            return raw_recv(sock, *args)

        for _ in range(n):
            send_wrapper(a, payload)
            recv_wrapper(b, 64)

    def recorder() -> None:
        record = session.recv
        for i in range(n):
            record("tcp", "127.0.0.1:40000>127.0.0.1:51234", i, i + 16)

    records = [(int(Tag.RECV), i, 0, i, i + 16, 3, 1 << 47, None)  # on channel number 0
               for i in range(n)]

    def packing() -> None:
        msgpack.packb(records, use_bin_type=True)

    context = zmq.Context()
    pair = context.socket(zmq.PAIR)
    rcvmore, get = int(zmq.RCVMORE), zmq.Socket.get

    def zmq_rcvmore() -> None:
        for _ in range(n):
            get(pair, rcvmore)

    try:
        return {
            "socket send + recv, original": best_ns(original, n),
            "socket send + recv, as traced": best_ns(patched, n),
            "socket send + recv, empty Python wrappers": best_ns(empty_wrappers, n),
            "session.recv alone (one record)": best_ns(recorder, n),
            "msgpack packing, per record": best_ns(packing, n),
            "pyzmq RCVMORE query (zmq.Socket.get)": best_ns(zmq_rcvmore, n),
        }
    finally:
        a.close()
        b.close()
        pair.close(linger=0)
        context.term()


def inner(n: int) -> None:
    """Run every loop once in this process and print seconds per round trip as JSON."""
    print(json.dumps({name: loop(n) for name, loop in LOOPS.items()}))


def measure_once(traced: bool, n: int, mode: str = "--inner") -> dict[str, float]:
    command = [sys.executable, "-m", __spec__.name, mode, "--n", str(n)]
    with tempfile.TemporaryDirectory(prefix="distea-message-path-") as out:
        if traced:
            command = distea_command("compact", command, Path(out))
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result: dict[str, float] = json.loads(output.strip().splitlines()[-1])
    return result


def print_parts(n: int) -> None:
    parts = measure_once(True, n, "--inner-parts")
    print("ns per iteration, best of 5, inside one process under distea run (compact)\n")
    print("| piece | ns |")
    print("| --- | ---: |")
    for name, value in parts.items():
        print(f"| {name} | {value:.0f} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--n", type=int, default=20_000, help="round trips per loop")
    parser.add_argument("--parts", action="store_true",
                        help="split one message's cost into the pieces of its path")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--inner-parts", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner:
        inner(args.n)
        return
    if args.inner_parts:
        print(json.dumps(message_parts(args.n)))
        return
    if args.parts:
        print_parts(args.n)
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
