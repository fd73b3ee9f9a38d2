"""The wire protocol: one JSON object per line, request then reply, over TCP.

Requests carry an ``op``: ``put``, ``get``, ``replicate``, ``promote``,
``status`` or ``stop``. Replies carry ``ok`` and whatever the op returns.
"""

from __future__ import annotations

import json
import socket
from typing import Any

TIMEOUT_S = 10.0

Message = dict[str, Any]


class Connection:
    """A persistent request/reply connection to one node."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
        self.reader = self.sock.makefile("rb")

    def call(self, request: Message) -> Message:
        """Send one request and wait for its reply."""
        send_message(self.sock, request)
        reply = read_message(self.reader)
        if reply is None:
            raise ConnectionError(f"node on port {self.port} closed the connection")
        return reply

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def send_message(sock: socket.socket, message: Message) -> None:
    """Write one message as a JSON line (keys sorted so bytes are reproducible)."""
    sock.sendall(json.dumps(message, sort_keys=True).encode() + b"\n")


def read_message(reader: Any) -> Message | None:
    """Read one JSON line; None at end of stream."""
    line = reader.readline()
    return json.loads(line) if line else None
