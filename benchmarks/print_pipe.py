"""What recording a pipe stdout costs a print-heavy program.

    uv run python -m benchmarks.print_pipe [--repeats 5] [--lines 200000]

The program prints ``lines`` short lines and measures the CPU time of its own
loop (``time.process_time``: the reader and the tracer's start-up are not in
it, and a busy shared machine moves it less than wall time). It runs
untraced and under ``distea run``, with its stdout a pipe (read by ``cat``,
recorded by the tracer) or a file (``/dev/null``, not a pipe: nothing
recorded), buffered (the default for a pipe) and unbuffered (``-u``: one raw
write per ``print`` part). The table gives medians of ``repeats`` rounds, each
round running every configuration once.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PROGRAM = '''
import sys, time

def line(i):
    return f"line {i} of the log"

def main(n):
    start = time.process_time()
    for i in range(n):
        print(line(i))
    sys.stdout.flush()
    print(f"{time.process_time() - start:.6f}", file=sys.stderr)

main(int(sys.argv[1]))
'''
DISTEA = Path(sys.executable).parent / "distea"
CONFIGS = [(traced, sink) for traced in (False, True) for sink in ("pipe", "file")]


def loop_seconds(script: Path, lines: int, traced: bool, sink: str, buffered: bool,
                 folder: Path) -> float:
    """CPU seconds of the print loop in one run."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    command = [sys.executable, str(script), str(lines)]
    run_dir = folder / "run"
    if traced:
        command = [str(DISTEA), "run", "-q", "-o", str(run_dir), "--", *command]
    if sink == "pipe":
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env) as proc:
            assert proc.stdout is not None and proc.stderr is not None
            while proc.stdout.read(1 << 16):
                pass
            err = proc.stderr.read().decode()
    else:
        with open(os.devnull, "wb") as null:
            err = subprocess.run(command, stdout=null, stderr=subprocess.PIPE, env=env,
                                 check=True).stderr.decode()
    shutil.rmtree(run_dir, ignore_errors=True)
    return float(err.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lines", type=int, default=200_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        script = folder / "print_heavy.py"
        script.write_text(PROGRAM)
        print(f"load average before: {os.getloadavg()[0]:.1f}")
        print("| stdout | untraced pipe (s) | traced pipe (s) | ratio "
              "| untraced file (s) | traced file (s) | ratio |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for buffered in (True, False):
            samples: dict[tuple[bool, str], list[float]] = {c: [] for c in CONFIGS}
            for _ in range(args.repeats):
                for traced, sink in CONFIGS:
                    samples[(traced, sink)].append(
                        loop_seconds(script, args.lines, traced, sink, buffered, folder))
            med = {c: statistics.median(v) for c, v in samples.items()}
            print(f"| {'buffered' if buffered else 'unbuffered (-u)'} "
                  f"| {med[(False, 'pipe')]:.3f} | {med[(True, 'pipe')]:.3f} "
                  f"| {med[(True, 'pipe')] / med[(False, 'pipe')]:.2f}x "
                  f"| {med[(False, 'file')]:.3f} | {med[(True, 'file')]:.3f} "
                  f"| {med[(True, 'file')] / med[(False, 'file')]:.2f}x |")
        print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
