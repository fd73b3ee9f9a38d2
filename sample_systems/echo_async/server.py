"""Asyncio echo server: replies ``ECHO <n> <line>`` to every line it receives.

`n` counts lines per connection, so a client can check that pipelined replies
come back in request order. The server stops by itself once the expected
number of clients have connected and hung up.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
from dataclasses import dataclass, field

from sample_systems._launch import announce_ready

READ_TIMEOUT_S = 10.0
SERVE_TIMEOUT_S = 20.0


@dataclass
class EchoStats:
    """What the server did, and an event set when the last client leaves."""

    expected_clients: int
    clients_done: int = 0
    lines_echoed: int = 0
    all_done: asyncio.Event = field(default_factory=asyncio.Event)


def echo_line(number: int, line: str) -> bytes:
    """Build the reply for one request line."""
    return f"ECHO {number} {line}\n".encode()


async def handle_connection(
    stats: EchoStats, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Echo every line of one connection until the client closes it."""
    number = 0
    try:
        while raw := await asyncio.wait_for(reader.readline(), READ_TIMEOUT_S):
            number += 1
            writer.write(echo_line(number, raw.decode().rstrip("\n")))
            await writer.drain()
    finally:
        writer.close()
        await writer.wait_closed()
        stats.lines_echoed += number
        stats.clients_done += 1
        if stats.clients_done == stats.expected_clients:
            stats.all_done.set()


async def serve_until_done(expected_clients: int) -> EchoStats:
    """Serve on an OS-chosen port until every expected client has finished."""
    stats = EchoStats(expected_clients)
    server = await asyncio.start_server(functools.partial(handle_connection, stats), "127.0.0.1", 0)
    async with server:
        announce_ready(server.sockets[0].getsockname()[1])
        await asyncio.wait_for(stats.all_done.wait(), SERVE_TIMEOUT_S)
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=2)
    args = parser.parse_args()
    stats = asyncio.run(serve_until_done(args.clients))
    print(f"echoed {stats.lines_echoed} lines for {stats.clients_done} clients")


if __name__ == "__main__":
    main()
