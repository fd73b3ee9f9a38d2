"""First/last clocks: Execute-After facts per method, against hand-derived order
and against ``--mode full`` (every entry and exit recorded) as the oracle."""

from __future__ import annotations

import bisect
import sys
from pathlib import Path

import pytest

from distea.model import RunData
from tests.tracing import run_traced

EPOCHS = """
import socket, threading

def before():
    return 1

def numbers():
    for i in range(3):
        yield i

def fails():
    raise ValueError("expected")

def after():
    return 2

def ping(sock):
    sock.sendall(b"ping")

def deep(n):
    return n if n == 0 else deep(n - 1)

def main():
    here, there = socket.socketpair()
    counter = numbers()
    next(counter)
    before()
    try:
        fails()
    except ValueError:
        pass
    deep(50)
    worker = threading.Thread(target=ping, args=(there,))
    worker.start()
    worker.join()
    assert here.recv(4) == b"ping"
    next(counter)
    after()
    print("done")

main()
"""


def only_process(data: RunData) -> str:
    (key,) = data.processes
    return key


def receive_clock(data: RunData, key: str) -> int:
    (event,) = [e for e in data.messages[key] if e.direction == "recv" and e.kind == "unix"]
    return event.clock


@pytest.mark.parametrize("mode", ["compact", "full"])
def test_first_and_last_around_a_receive(program, tmp_path: Path, mode: str) -> None:
    script = program("epochs.py", EPOCHS)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run",
                        "--mode", mode)
    assert traced.result.stdout == "done\n", traced.result.stderr
    data = traced.data
    key = only_process(data)
    received = receive_clock(data, key)
    ex = data.executions[key]
    # ran only before the receive
    for name in ("before", "fails", "deep", "ping"):
        assert ex[f"epochs.{name}"].last < received, name
    # started before, resumed after: a generator is executing after the receive
    assert ex["epochs.numbers"].first < received <= ex["epochs.numbers"].last
    # on the stack across the receive
    assert ex["epochs.main"].first < received <= ex["epochs.main"].last
    assert ex["epochs.<module>"].last >= received
    # started after
    assert ex["epochs.after"].first > received
    firsts = sorted(ex.values(), key=lambda e: e.first)
    assert [e.method for e in firsts][:4] == [
        "epochs.<module>", "epochs.main", "epochs.numbers", "epochs.before"]


def epoch_index(data: RunData, key: str) -> tuple[list[int], dict[str, tuple[int, int]]]:
    """Per method: (first clock, index of the epoch holding its last clock)."""
    starts = sorted({e.first for e in data.executions[key].values()}
                    | {m.clock for m in data.messages[key] if m.direction == "recv"})
    return starts, {name: (e.first, bisect.bisect_right(starts, e.last))
                    for name, e in data.executions[key].items()}


PIPELINE = """
import socket, sys

def produce(sock, n):
    for i in range(n):
        sock.sendall(encode(i))

def encode(i):
    return i.to_bytes(4, "big")

def consume(sock, n):
    total = 0
    for _ in range(n):
        total += decode(read_exactly(sock, 4))
        if total % 3 == 0:
            rare()
    return total

def read_exactly(sock, size):
    data = b""
    while len(data) < size:
        data += sock.recv(size - len(data))
    return data

def decode(raw):
    return int.from_bytes(raw, "big")

def rare():
    return None

def main():
    left, right = socket.socketpair()
    produce(left, 40)
    print(consume(right, 40))

main()
"""


def test_compact_equals_full_mode(program, tmp_path: Path) -> None:
    """Same execution twice: compact's facts must equal full mode's, epoch for epoch."""
    script = program("pipeline.py", PIPELINE)
    runs = {mode: run_traced([sys.executable, script.name], script.parent,
                             tmp_path / mode, "--mode", mode).data
            for mode in ("compact", "full")}
    compact, full = runs["compact"], runs["full"]
    ck, fk = only_process(compact), only_process(full)
    assert full.calls[fk], "full mode recorded no calls"
    assert compact.calls.get(ck) is None
    c_starts, c_facts = epoch_index(compact, ck)
    f_starts, f_facts = epoch_index(full, fk)
    assert c_starts == f_starts
    assert c_facts == f_facts
    # the oracle's own view: last = latest clock of any entry/exit of the method
    for name, execution in full.executions[fk].items():
        clocks = [c.clock for c in full.calls[fk] if c.method == name]
        assert max(clocks) <= execution.last


def test_program_can_still_profile_itself(program, tmp_path: Path) -> None:
    """cProfile takes sys.monitoring's PROFILER_ID: distea must leave it free."""
    script = program("profiled.py", """
        import cProfile

        def work():
            return sum(range(100))

        profiler = cProfile.Profile()
        profiler.enable()
        work()
        profiler.disable()
        print("profiled")
    """)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert (traced.result.returncode, traced.result.stdout, traced.result.stderr) == (
        0, "profiled\n", "")
    assert "profiled.work" in next(iter(traced.data.executions.values()))
