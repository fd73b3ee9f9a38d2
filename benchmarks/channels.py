"""Message-channel overhead: traced / untraced wall time for message-heavy programs.

    uv run python -m benchmarks.channels [--repeats 5] [--messages 2000]

Workloads (each a real multi-process program written to a temporary folder):

- ``zmq req/rep``: a REQ process and a REP process, small round trips;
- ``mp pool map``: ``multiprocessing.Pool(2).map`` with ``chunksize=1`` (one
  task message and one result message per item);
- ``zmq pub/sub``: one publisher, three subscribers, small messages.

Each is run untraced and under ``distea run`` alternately; the table gives
medians of ``repeats`` runs: the whole command's wall time (process start-up
included) and the message loop's own time as the program measures it, each
as a ratio traced / untraced, and the time tracing adds per loop item (one
REQ/REP round trip = 2 messages, one pool task = 2 messages, one publication
= 1 send and 3 receives). :func:`measure_channels` returns the same rows for
the benchmark suite.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DISTEA = Path(sys.executable).parent / "distea"
TIMEOUT_S = 120

REQ_REP = r'''
import subprocess, sys, time, zmq
N = int(sys.argv[1])
if len(sys.argv) > 2:
    ctx = zmq.Context(); s = ctx.socket(zmq.REQ); s.connect(sys.argv[2])
    for i in range(N):
        s.send(b"ping %d" % i); s.recv()
    s.close(); ctx.term()
else:
    ctx = zmq.Context(); s = ctx.socket(zmq.REP)
    port = s.bind_to_random_port("tcp://127.0.0.1")
    child = subprocess.Popen([sys.executable, __file__, str(N), f"tcp://127.0.0.1:{port}"])
    s.recv(); s.send(b"pong")
    started = time.perf_counter()
    for _ in range(N - 1):
        s.send(s.recv())
    loop = time.perf_counter() - started
    child.wait(60); s.close(); ctx.term()
    print(f"LOOP {loop:.6f}")
'''

POOL_MAP = r'''
import multiprocessing as mp, sys, time

def square(x):
    return x * x

if __name__ == "__main__":
    N = int(sys.argv[1])
    with mp.Pool(2) as pool:
        pool.map(square, range(4))
        started = time.perf_counter()
        total = sum(pool.map(square, range(N), chunksize=1))
        loop = time.perf_counter() - started
        pool.close(); pool.join()
    print(f"LOOP {loop:.6f}")
'''

PUB_SUB = r'''
import subprocess, sys, time, zmq
N = int(sys.argv[1])
SUBSCRIBERS = 3
if len(sys.argv) > 2:
    ctx = zmq.Context(); s = ctx.socket(zmq.SUB)
    s.setsockopt(zmq.SUBSCRIBE, b""); s.setsockopt(zmq.RCVTIMEO, 30000)
    s.connect(sys.argv[2])
    while s.recv() != b"stop":
        pass
    s.close(); ctx.term()
else:
    ctx = zmq.Context(); s = ctx.socket(zmq.XPUB)
    s.setsockopt(zmq.XPUB_VERBOSE, 1); s.setsockopt(zmq.SNDHWM, 0)
    port = s.bind_to_random_port("tcp://127.0.0.1")
    children = [subprocess.Popen([sys.executable, __file__, str(N), f"tcp://127.0.0.1:{port}"])
                for _ in range(SUBSCRIBERS)]
    for _ in children:
        s.recv()
    started = time.perf_counter()
    for i in range(N):
        s.send(b"tick %d" % i)
    s.send(b"stop")
    for child in children:
        child.wait(60)
    loop = time.perf_counter() - started
    s.close(); ctx.term()
    print(f"LOOP {loop:.6f}")
'''

WORKLOADS: dict[str, str] = {
    "zmq req/rep": REQ_REP,
    "mp pool map": POOL_MAP,
    "zmq pub/sub": PUB_SUB,
}


def _run(argv: list[str], cwd: Path) -> tuple[float, float]:
    started = time.perf_counter()
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {result.stderr[-2000:]}")
    loop = next(float(line.split()[1]) for line in result.stdout.splitlines()
                if line.startswith("LOOP "))
    return wall, loop


def measure_channels(repeats: int = 5, messages: int = 2000) -> list[dict[str, Any]]:
    """One row per workload: medians (seconds) and traced/untraced ratios."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="distea-bench-") as folder:
        base = Path(folder)
        for name, source in WORKLOADS.items():
            script = base / (name.replace(" ", "_").replace("/", "_") + ".py")
            script.write_text(source)
            plain: list[tuple[float, float]] = []
            traced: list[tuple[float, float]] = []
            for repeat in range(repeats):
                plain.append(_run([sys.executable, script.name, str(messages)], base))
                run_dir = base / f"run-{script.stem}-{repeat}"
                traced.append(_run([str(DISTEA), "run", "-q", "-o", str(run_dir), "--",
                                    sys.executable, script.name, str(messages)], base))
            wall_plain = statistics.median(w for w, _ in plain)
            wall_traced = statistics.median(w for w, _ in traced)
            loop_plain = statistics.median(lp for _, lp in plain)
            loop_traced = statistics.median(lp for _, lp in traced)
            rows.append({
                "workload": name,
                "messages": messages,
                "repeats": repeats,
                "wall_untraced_s": wall_plain,
                "wall_traced_s": wall_traced,
                "wall_ratio": wall_traced / wall_plain,
                "loop_untraced_s": loop_plain,
                "loop_traced_s": loop_traced,
                "loop_ratio": loop_traced / loop_plain,
                "loop_us_added_per_item": 1e6 * (loop_traced - loop_plain) / messages,
            })
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| workload | items | wall untraced | wall traced | wall ratio "
             "| loop untraced | loop traced | loop ratio | µs added / item |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['messages']} | {r['wall_untraced_s']:.3f} s "
            f"| {r['wall_traced_s']:.3f} s | {r['wall_ratio']:.2f} "
            f"| {r['loop_untraced_s']:.3f} s | {r['loop_traced_s']:.3f} s "
            f"| {r['loop_ratio']:.2f} | {r['loop_us_added_per_item']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args()
    rows = measure_channels(args.repeats, args.messages)
    print(f"median of {args.repeats} runs, Python {sys.version.split()[0]}\n")
    print(markdown(rows))


if __name__ == "__main__":
    main()
