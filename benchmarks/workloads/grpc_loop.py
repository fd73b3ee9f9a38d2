"""gRPC unary round trips: a client process and a server process (generic handler).

python -m benchmarks.workloads.grpc_loop [--n 2000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
from concurrent import futures

import grpc

from benchmarks.workloads.timing import timed

METHOD = "/bench.Calc/Compute"


def encode_request(i: int) -> bytes:
    return json.dumps({"op": "add", "a": i, "b": i * 3}).encode()


def compute(op: str, a: int, b: int) -> int:
    return a + b if op == "add" else a - b


def handle(request: bytes, context: grpc.ServicerContext) -> bytes:
    message = json.loads(request)
    return str(compute(message["op"], message["a"], message["b"])).encode()


def serve(n: int) -> None:
    done = threading.Event()
    served = [0]

    def counted(request: bytes, context: grpc.ServicerContext) -> bytes:
        reply = handle(request, context)
        served[0] += 1
        if served[0] == n:
            done.set()
        return reply

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "bench.Calc", {"Compute": grpc.unary_unary_rpc_method_handler(counted)}),))
    print(server.add_insecure_port("127.0.0.1:0"), flush=True)
    server.start()
    done.wait()
    server.stop(grace=1).wait()


def client(n: int) -> None:
    server = subprocess.Popen([sys.executable, "-m", __spec__.name, "--serve", "--n", str(n)],
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    port = int(server.stdout.readline())
    total = 0
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(METHOD)
        with timed():
            for i in range(n):
                total += int(call(encode_request(i)))
    server.wait(timeout=60)
    print(total)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--serve", action="store_true")
    args = parser.parse_args()
    if args.serve:
        serve(args.n)
    else:
        client(args.n)


if __name__ == "__main__":
    main()
