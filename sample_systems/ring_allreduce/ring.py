"""Ring all-reduce over TCP: rank r sends to rank r+1 and receives from rank r-1.

The vector is cut into one chunk per rank. In W-1 reduce-scatter steps each
rank passes a chunk to its right neighbour and adds the chunk arriving from
its left; afterwards rank r holds the full sum of chunk (r+1) mod W. In W-1
all-gather steps the finished chunks travel once more round the ring. Each
rank sends 2(W-1)/W of the vector in total, whatever W is.

The summation order of every chunk is fixed by the algorithm, and the
all-gather copies the finished chunks verbatim, so all ranks end with
bit-identical results, run after run.
"""

from __future__ import annotations

import socket
import struct

import numpy as np

HEADER = struct.Struct("!I")
TIMEOUT_S = 10.0


def send_chunk(sock: socket.socket, chunk: np.ndarray) -> None:
    """Length-prefixed float64 frame."""
    payload = np.ascontiguousarray(chunk, dtype="<f8").tobytes()
    sock.sendall(HEADER.pack(len(payload)) + payload)


def recv_exact(sock: socket.socket, size: int) -> bytes:
    """Read exactly `size` bytes (TCP may deliver a frame in pieces)."""
    data = bytearray()
    while len(data) < size:
        piece = sock.recv(size - len(data))
        if not piece:
            raise ConnectionError("ring neighbour closed the connection")
        data += piece
    return bytes(data)


def recv_chunk(sock: socket.socket) -> np.ndarray:
    """The inverse of `send_chunk`."""
    (size,) = HEADER.unpack(recv_exact(sock, HEADER.size))
    return np.frombuffer(recv_exact(sock, size), dtype="<f8").copy()


def connect_ring(listener: socket.socket, right_port: int) -> tuple[socket.socket, socket.socket]:
    """Connect to the right neighbour, then accept the left one.

    Connecting first cannot deadlock: every listener is already listening, so
    the connection completes in the kernel before the neighbour accepts it.
    """
    right = socket.create_connection(("127.0.0.1", right_port), timeout=TIMEOUT_S)
    listener.settimeout(TIMEOUT_S)
    left, _ = listener.accept()
    left.settimeout(TIMEOUT_S)
    return left, right


def reduce_scatter(
    chunks: list[np.ndarray],
    rank: int,
    world_size: int,
    left: socket.socket,
    right: socket.socket,
) -> None:
    """After this, chunks[(rank + 1) % world_size] holds the sum over all ranks."""
    for step in range(world_size - 1):
        send_chunk(right, chunks[(rank - step) % world_size])
        index = (rank - step - 1) % world_size
        chunks[index] = chunks[index] + recv_chunk(left)


def all_gather(
    chunks: list[np.ndarray],
    rank: int,
    world_size: int,
    left: socket.socket,
    right: socket.socket,
) -> None:
    """Circulate the finished chunks until every rank has all of them."""
    for step in range(world_size - 1):
        send_chunk(right, chunks[(rank - step + 1) % world_size])
        chunks[(rank - step) % world_size] = recv_chunk(left)


def ring_allreduce(
    vector: np.ndarray, rank: int, world_size: int, left: socket.socket, right: socket.socket
) -> np.ndarray:
    """Sum `vector` over all ranks; every rank gets the same result."""
    chunks = [chunk.copy() for chunk in np.array_split(vector, world_size)]
    reduce_scatter(chunks, rank, world_size, left, right)
    all_gather(chunks, rank, world_size, left, right)
    return np.concatenate(chunks)
