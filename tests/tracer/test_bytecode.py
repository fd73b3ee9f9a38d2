"""The tracer's bytecode caches are written where missing or stale, whatever the flag says."""

from __future__ import annotations

import os
import sys
from importlib.util import MAGIC_NUMBER, cache_from_source
from pathlib import Path

from distea.tracer.bytecode import TRACER_DIR, tracer_sources, write_missing_caches


def test_missing_and_stale_caches_are_written_fresh_ones_left(tmp_path: Path,
                                                               monkeypatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    fresh, missing, stale, broken = (tmp_path / f"{n}.py" for n in ("fresh", "missing",
                                                                     "stale", "broken"))
    for source in (fresh, missing, stale):
        source.write_text(f"NAME = {source.stem!r}\n")
    broken.write_text("def (:\n")
    assert write_missing_caches([str(fresh), str(stale)]) == 2
    os.utime(stale, (os.stat(stale).st_atime, os.stat(stale).st_mtime + 10))  # edited later
    fresh_cache = Path(cache_from_source(str(fresh)))
    before = fresh_cache.stat().st_mtime_ns

    written = write_missing_caches([str(fresh), str(missing), str(stale), str(broken)])

    assert written == 2  # missing and stale; the broken one is left to the import system
    assert fresh_cache.stat().st_mtime_ns == before
    for source in (missing, stale):  # what the import system checks (PEP 552)
        header = Path(cache_from_source(str(source))).read_bytes()[:16]
        assert header[:4] == MAGIC_NUMBER
        assert int.from_bytes(header[8:12], "little") == int(source.stat().st_mtime)
    assert not Path(cache_from_source(str(broken))).exists()
    assert sys.dont_write_bytecode is True  # the caller's flag, back


def test_the_sources_are_the_whole_tracer_with_its_bootstrap_hook() -> None:
    sources = {os.path.relpath(s, TRACER_DIR) for s in tracer_sources()}
    assert {"startup.py", "session.py", "zmtp.py", "channels/zmq.py",
            "bootstrap/sitecustomize.py"} <= sources
    assert all(s.endswith(".py") for s in sources)
