"""Messages that all have one CRC-32: fingerprints (length, CRC-32) that cannot tell them apart.

Used by workloads and tests that put the analyzer's content pairing in the
worst case, where only order and time can pair a receive with its send.
"""

from __future__ import annotations

import zlib


def forge(prefix: bytes, target: int) -> bytes:
    """``prefix`` and four bytes that bring its CRC-32 to ``target``.

    CRC-32 of a fixed-length message is affine in its bits over GF(2): the
    four bytes are the solution of a 32 x 32 linear system, found by Gaussian
    elimination on its columns."""
    base = zlib.crc32(prefix + bytes(4))
    columns = [(zlib.crc32(prefix + (1 << bit).to_bytes(4, "little")) ^ base, 1 << bit)
               for bit in range(32)]
    want, solution = target ^ base, 0
    for pivot in range(32):
        mask = 1 << pivot
        k = next(k for k in range(pivot, 32) if columns[k][0] & mask)
        columns[pivot], columns[k] = columns[k], columns[pivot]
        for j in range(32):
            if j != pivot and columns[j][0] & mask:
                columns[j] = (columns[j][0] ^ columns[pivot][0], columns[j][1] ^ columns[pivot][1])
    for pivot in range(32):
        if want & (1 << pivot):
            solution ^= columns[pivot][1]
    return prefix + solution.to_bytes(4, "little")
