"""The few constants the tracer and the readers must agree on.

Kept apart from :mod:`distea.traceformat` so that the tracer, which starts
in every traced process, imports only this small module and not the reader
(pathlib, dataclasses, the model). See traceformat's docstring for what the
records mean.
"""

from __future__ import annotations

FORMAT_VERSION = 2
"""The trace format this distea writes; it reads every format from 1 up to it."""
PROC_SUFFIX = ".msgpack"
UNTRACED_DIR = "untraced"
LOST_DIR = "lost"
"""Notes from tracers whose last records may not have reached the collector."""
WIRE_MAGIC = b"distea-batch"
"""First frame of every tracer → collector message."""
WIRE_CLIENT = b"distea-client"
"""First frame of a ``distea run --connect`` summary: ``[WIRE_CLIENT, msgpack(map)]``."""


class Tag:
    """First item of every record: what kind of record it is.

    Plain ints, not an ``IntEnum``: ``enum`` (with ``functools`` and
    ``collections``) would cost every traced process about 3 ms at start-up.
    """

    HEADER = 0
    METHOD = 1
    FIRST = 2
    LAST = 3
    CALL = 4
    RETURN = 5
    SEND = 6
    RECV = 7
    STATS = 8
    END = 9
    UNTRACED = 10
    LINK = 11
    CHANNEL = 12


def process_file_name(key: str) -> str:
    """File name for a process key (keys hold ``:``, which some tools dislike)."""
    return key.replace(":", "_").replace("/", "_") + PROC_SUFFIX


NOT_PYTHON = "not a Python program"
"""How an UNTRACED record's reason begins for a child that is no Python program
(``redis-server``, a database): the reason goes on with the executable's name."""
