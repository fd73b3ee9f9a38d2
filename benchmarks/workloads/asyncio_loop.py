"""asyncio streams request/response: a client process and a server process, N round trips.

python -m benchmarks.workloads.asyncio_loop [--n 5000] [--loop std|uvloop]

The same exchange on the standard event loop (where the socket channel sees
the bytes) and on uvloop (where libuv moves them and the asyncio boundary
channel records them), so the two rows of the per-round-trip table compare
the two ways distea sees one asyncio program. Each request and reply is one
line and passes through a few functions on each side.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from collections.abc import Coroutine
from typing import Any

from benchmarks.workloads.timing import timed


def encode_request(i: int) -> bytes:
    return f"add {i} {i * 3}\n".encode()


def handle(request: bytes) -> bytes:
    _, a, b = request.split()
    return f"{compute(int(a), int(b))}\n".encode()


def compute(a: int, b: int) -> int:
    return a + b


async def serve() -> None:
    done = asyncio.Event()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            writer.write(handle(line))
        writer.close()
        done.set()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await done.wait()
    server.close()


async def client(port: int, n: int) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    total = 0
    with timed():
        for i in range(n):
            writer.write(encode_request(i))
            total += int(await reader.readline())
    writer.close()
    await writer.wait_closed()
    return total


def run(main: Coroutine[Any, Any, Any], loop: str) -> Any:
    if loop == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--loop", choices=("std", "uvloop"), default="std")
    parser.add_argument("--serve", action="store_true")
    args = parser.parse_args()
    if args.serve:
        run(serve(), args.loop)
        return
    server = subprocess.Popen([sys.executable, "-m", __spec__.name, "--serve", "--loop",
                               args.loop], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    port = int(server.stdout.readline())
    print(run(client(port, args.n), args.loop))
    server.wait(timeout=60)


if __name__ == "__main__":
    main()
