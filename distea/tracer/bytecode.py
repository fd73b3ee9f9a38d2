"""Bytecode caches for the tracer's own modules, whatever the program's environment says.

Python caches a module's compiled bytecode (``__pycache__``) at its first
import, unless ``PYTHONDONTWRITEBYTECODE`` or ``-B`` says not to, as
containers and CI images often do (and uv installs without bytecode by
default). The tracer runs in every process of a run: without its caches,
each traced process compiled the tracer from source again, about 100 ms.

Two parts:

- the bootstrap hook imports and starts the tracer with
  ``sys.dont_write_bytecode`` off, and puts it back before the program's
  first line: the modules imported at start-up get their caches;
- modules the tracer imports later (a channel once its library is imported,
  the transport at the first flush) may be imported by any thread while the
  program runs, when the flag must stay the program's: so the first process
  of a run (one without a traced parent), still at start-up, writes the
  caches that are missing or older than their source, here. Its children
  then find them. Nothing is written where the install is read-only.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any

TRACER_DIR = os.path.dirname(os.path.abspath(__file__))


def tracer_sources() -> list[str]:
    """Every source file of ``distea.tracer`` (with the bootstrap hook itself)."""
    sources: list[str] = []
    for folder, _, names in os.walk(TRACER_DIR):
        if os.path.basename(folder) != "__pycache__":
            sources.extend(os.path.join(folder, n) for n in names if n.endswith(".py"))
    return sources


def write_missing_caches(sources: list[str] | None = None) -> int:
    """Compile and cache each source whose cache is missing or stale; how many were written.

    Call only while no other thread runs (it turns ``sys.dont_write_bytecode``
    off for the moment). A source that does not compile, or a cache that
    cannot be written, is left to the import system, as without this.
    """
    from importlib.machinery import SourceFileLoader
    from importlib.util import MAGIC_NUMBER, cache_from_source

    stale = [source for source in (tracer_sources() if sources is None else sources)
             if not _cache_is_fresh(source, cache_from_source, MAGIC_NUMBER)]
    written = 0
    dont_write_bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        for source in stale:
            try:
                SourceFileLoader("_distea_bytecode", source).get_code("_distea_bytecode")
                written += 1
            except (OSError, SyntaxError, ImportError, ValueError):
                continue
    finally:
        sys.dont_write_bytecode = dont_write_bytecode
    return written


def _cache_is_fresh(source: str, cache_from_source: Any, magic: bytes) -> bool:
    """Whether the import system would take ``source``'s cache as it is: this Python's
    magic number, and the source's mtime and size recorded in its header (PEP 552)."""
    try:
        with open(cache_from_source(source), "rb") as stream:
            header = stream.read(16)
        stat = os.stat(source)
    except (OSError, ValueError, NotImplementedError):
        return False
    if len(header) < 16 or header[:4] != magic:
        return False
    if int.from_bytes(header[4:8], "little"):
        return True  # a hash-based cache: checked by the import system itself
    return (int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF)
