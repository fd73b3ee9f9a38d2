"""TCP request/response: a client process and a server process, N round trips.

python -m benchmarks.workloads.tcp_loop [--n 5000]

The client starts the server as a child (``python -m
benchmarks.workloads.tcp_loop --serve``), reads its port from the first
line of its output, then sends length-prefixed requests; every request and
reply passes through a few functions on each side, so that every receive
(a new epoch for distea) is followed by calls.
"""

from __future__ import annotations

import argparse
import socket
import struct
import subprocess
import sys

from benchmarks.workloads.timing import timed

HEADER = struct.Struct("!I")


def read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


def read_frame(sock: socket.socket) -> bytes:
    (size,) = HEADER.unpack(read_exactly(sock, HEADER.size))
    return read_exactly(sock, size)


def write_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(HEADER.pack(len(payload)) + payload)


def encode_request(i: int) -> bytes:
    return f"add {i} {i * 3}".encode()


def handle(request: bytes) -> bytes:
    op, a, b = parse(request)
    return str(compute(op, a, b)).encode()


def parse(request: bytes) -> tuple[str, int, int]:
    op, a, b = request.decode().split()
    return op, int(a), int(b)


def compute(op: str, a: int, b: int) -> int:
    return a + b if op == "add" else a - b


def serve() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        print(listener.getsockname()[1], flush=True)
        conn, _ = listener.accept()
        with conn:
            while True:
                try:
                    request = read_frame(conn)
                except EOFError:
                    return
                write_frame(conn, handle(request))


def client(n: int) -> None:
    server = subprocess.Popen([sys.executable, "-m", __spec__.name, "--serve"],
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    port = int(server.stdout.readline())
    total = 0
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with timed():
            for i in range(n):
                write_frame(sock, encode_request(i))
                total += int(read_frame(sock))
    server.wait(timeout=60)
    print(total)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--serve", action="store_true")
    args = parser.parse_args()
    if args.serve:
        serve()
    else:
        client(args.n)


if __name__ == "__main__":
    main()
