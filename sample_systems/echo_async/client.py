"""Asyncio echo client: pipelines batches of requests over one connection.

A batch is written in full before any reply is read, which is the case a
tracer must get right: several sends on one TCP stream, then several receives,
with the byte offsets telling which reply answers which request.
"""

from __future__ import annotations

import argparse
import asyncio

READ_TIMEOUT_S = 10.0
BATCHES = 2
BATCH_SIZE = 3


def make_requests(name: str, batch: int) -> list[str]:
    """The request lines of one batch; deterministic per client."""
    return [f"{name} batch {batch} request {index}" for index in range(BATCH_SIZE)]


async def send_requests(writer: asyncio.StreamWriter, requests: list[str]) -> None:
    """Write a whole batch before reading anything back."""
    for request in requests:
        writer.write(request.encode() + b"\n")
    await writer.drain()


async def read_replies(reader: asyncio.StreamReader, count: int) -> list[str]:
    """Read `count` reply lines, in order."""
    replies = []
    for _ in range(count):
        raw = await asyncio.wait_for(reader.readline(), READ_TIMEOUT_S)
        if not raw:
            raise ConnectionError("server closed the connection early")
        replies.append(raw.decode().rstrip("\n"))
    return replies


async def pipeline_requests(port: int, name: str) -> list[str]:
    """Run every batch over one connection and return all replies."""
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port), READ_TIMEOUT_S
    )
    replies: list[str] = []
    try:
        for batch in range(BATCHES):
            requests = make_requests(name, batch)
            await send_requests(writer, requests)
            replies += await read_replies(reader, len(requests))
    finally:
        writer.close()
        await writer.wait_closed()
    return replies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--name", required=True)
    args = parser.parse_args()
    for reply in asyncio.run(pipeline_requests(args.port, args.name)):
        print(reply)


if __name__ == "__main__":
    main()
