"""Shared memory under a real ``distea run``: no lock, no message, ordered safely by time.

The reader polls a flag in shared memory that the writer sets: nothing the
tracer can see passes between them, so only the shared-segment rule of
docs/semantics.md ("Shared memory") puts the reader's use after the writer's
computation, and the result names the segment.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.channels.support import Traced, run_both
from tests.tracing import DISTEA

SHM = """
import mmap, multiprocessing as mp, os, sys, time
from multiprocessing import shared_memory

def produce(): return 7
def consume(x): return x * 6
def before_poll(): return 0

def open_segment(how, name):
    if how == "shm":
        shm = shared_memory.SharedMemory(name=name)
        return shm, shm.buf
    fd = os.open(name, os.O_RDWR)
    mapped = mmap.mmap(fd, 16)
    os.close(fd)
    return mapped, mapped

def writer(how, name):
    segment, buf = open_segment(how, name)
    buf[1] = produce()
    buf[0] = 1
    del buf
    segment.close()

def reader(how, name):
    segment, buf = open_segment(how, name)
    before_poll()
    while buf[0] == 0:
        time.sleep(0.001)
    print(consume(buf[1]), flush=True)
    del buf
    segment.close()

if __name__ == "__main__":
    method, how = sys.argv[1], sys.argv[2]
    mp.set_start_method(method)
    if how == "shm":
        shm = shared_memory.SharedMemory(create=True, size=16)
        name = shm.name
    else:
        name = os.path.abspath("segment.bin")
        with open(name, "wb") as f:
            f.write(bytes(16))
        private = mmap.mmap(os.open(name, os.O_RDONLY), 16, access=mmap.ACCESS_COPY)
        private.close()
    try:
        r = mp.Process(target=reader, args=(how, name), name="reader")
        r.start()
        w = mp.Process(target=writer, args=(how, name), name="writer")
        w.start()
        w.join()
        r.join()
    finally:
        if how == "shm":
            shm.close()
            shm.unlink()
"""


def key_of(traced: Traced, role: str) -> str:
    (key,) = [k for k, p in traced.run.processes.items() if p.role == role]
    return key


@pytest.mark.parametrize(("method", "how"), [("spawn", "shm"), ("fork", "shm"),
                                             ("spawn", "file")])
def test_unlocked_shared_segment_orders_the_reader_after_the_writer(
        program, method: str, how: str) -> None:
    script = program("shm.py", SHM)
    traced = run_both(script, method, how)
    assert traced.stdout == "42\n"
    assert traced.errors() == 0
    reader, writer = key_of(traced, "reader"), key_of(traced, "writer")
    path = "/dev/shm/psm_" if how == "shm" else "segment.bin"
    attaches = traced.events("shm")
    assert {e.process for e in attaches if path in e.meta["path"]} >= {reader, writer}
    assert not [e for e in attaches if e.meta["path"].endswith("segment.bin")
                and e.process not in (reader, writer)]  # the private mapping shares nothing
    assert traced.run.matching.by_kind["shm"].external == 0

    result = traced.run.impact("shm.produce")
    assert "shm.consume" in result.impacted[reader]
    assert path in result.shared_memory[reader]
    explanation = traced.run.explain("shm.produce", "shm.consume")
    assert explanation.impacted and path in explanation.reason
    assert [s.detail.split()[0] for s in explanation.steps if s.action == "recv"] == ["shared"]
    shown = subprocess.run([str(DISTEA), "impact", "shm.produce", "--run", str(traced.run.path)],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "arrives through shared memory" in shown.stdout and path in shown.stdout
    # backwards too: the reader's use may depend on the writer's computation
    assert "shm.produce" in traced.run.deps("shm.consume").deps[writer]
