"""Framing between mappers and the reducer: length-prefixed JSON frames over TCP.

A mapper's partial result is ``PARTITIONS`` frames, one per partition of the
key space, concatenated and written with a single ``sendall`` (one message);
the reducer reads them back frame by frame.
"""

from __future__ import annotations

import json
import socket
import struct
import zlib

HEADER = struct.Struct("!I")
PARTITIONS = 8
"""Partitions of the key space (words), the same in every mapper."""
TIMEOUT_S = 10.0


def partition_of(word: str) -> int:
    """The partition a word belongs to (crc32, so the same in every process and run)."""
    return zlib.crc32(word.encode()) % PARTITIONS


def encode_frame(partition: int, counts: dict[str, int]) -> bytes:
    """One partition's counts as a length-prefixed JSON frame (keys sorted)."""
    payload = json.dumps({"partition": partition, "counts": counts}, sort_keys=True).encode()
    return HEADER.pack(len(payload)) + payload


def recv_exact(sock: socket.socket, size: int) -> bytes:
    """Read exactly `size` bytes (TCP may deliver a frame in pieces)."""
    data = bytearray()
    while len(data) < size:
        piece = sock.recv(size - len(data))
        if not piece:
            raise ConnectionError("mapper closed the connection in the middle of a frame")
        data += piece
    return bytes(data)


def recv_frame(sock: socket.socket) -> tuple[int, dict[str, int]]:
    """The inverse of `encode_frame`: (partition, counts)."""
    (size,) = HEADER.unpack(recv_exact(sock, HEADER.size))
    frame = json.loads(recv_exact(sock, size))
    return int(frame["partition"]), {str(w): int(n) for w, n in frame["counts"].items()}
