"""ZeroMQ REQ/REP: a client process and a server process, N round trips.

python -m benchmarks.workloads.zmq_loop [--n 5000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import zmq

from benchmarks.workloads.timing import timed


def encode_request(i: int) -> bytes:
    return json.dumps({"op": "add", "a": i, "b": i * 3}).encode()


def handle(request: bytes) -> bytes:
    message = json.loads(request)
    return str(compute(message["op"], message["a"], message["b"])).encode()


def compute(op: str, a: int, b: int) -> int:
    return a + b if op == "add" else a - b


def serve(n: int) -> None:
    context = zmq.Context()
    rep = context.socket(zmq.REP)
    port = rep.bind_to_random_port("tcp://127.0.0.1")
    print(port, flush=True)
    for _ in range(n):
        rep.send(handle(rep.recv()))
    rep.close(linger=1000)
    context.term()


def client(n: int) -> None:
    server = subprocess.Popen([sys.executable, "-m", __spec__.name, "--serve", "--n", str(n)],
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    port = int(server.stdout.readline())
    context = zmq.Context()
    req = context.socket(zmq.REQ)
    req.connect(f"tcp://127.0.0.1:{port}")
    total = 0
    with timed():
        for i in range(n):
            req.send(encode_request(i))
            total += int(req.recv())
    req.close(linger=1000)
    context.term()
    server.wait(timeout=60)
    print(total)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--serve", action="store_true")
    args = parser.parse_args()
    if args.serve:
        serve(args.n)
    else:
        client(args.n)


if __name__ == "__main__":
    main()
