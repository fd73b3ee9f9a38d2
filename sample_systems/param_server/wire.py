"""Message encoding: ZeroMQ frames carrying float64 arrays and small integers."""

from __future__ import annotations

import numpy as np

PULL = b"PULL"
PUSH = b"PUSH"
DONE = b"DONE"


def encode_array(array: np.ndarray) -> bytes:
    """Raw little-endian float64 bytes; both ends know the shape."""
    return np.ascontiguousarray(array, dtype="<f8").tobytes()


def decode_array(frame: bytes) -> np.ndarray:
    """The inverse of `encode_array` (a writable copy)."""
    return np.frombuffer(frame, dtype="<f8").copy()


def encode_int(value: int) -> bytes:
    return str(value).encode()


def decode_int(frame: bytes) -> int:
    return int(frame)
