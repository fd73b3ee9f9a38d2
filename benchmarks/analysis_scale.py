"""How the offline analyzer scales: load + order time, and query latency.

    uv run python -m benchmarks.analysis_scale              # the standard sizes
    uv run python -m benchmarks.analysis_scale --quick      # small sizes only
    uv run python -m benchmarks.analysis_scale --repeat 3   # median of 3 loads per size

Synthetic run directories are written straight in the trace format: P
processes, N messages in total (half TCP byte streams, half FIFO message
channels, random sender/receiver pairs, each receive shortly after its send),
K methods per process whose first/last clocks are spread over the run.
"Load" is everything before the first answer: reading the msgpack logs,
matching, the happens-before sweep and the query indexes. "Impact"/"deps"
are medians over random single-method queries. Targets (DESIGN): load < 3 s
for 32 processes x 200,000 messages; a query < 100 ms. With ``--repeat N``
each run directory is loaded and queried N times, and the row of the load
with the median total time is reported (``load_s_runs`` lists all of them).

:func:`measure_analysis_scale` returns one dict per configuration, for the
benchmark suite.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack

from distea.rundir import PROCS_DIR, RUN_META
from distea.wire import FORMAT_VERSION, Tag, process_file_name

STANDARD = [
    (8, 10_000, 1_000),
    (32, 100_000, 5_000),
    (32, 200_000, 5_000),
    (128, 200_000, 1_000),
    (8, 1_000_000, 1_000),
]
QUICK = [(8, 10_000, 1_000), (32, 50_000, 1_000)]


def write_synthetic_run(path: Path, processes: int, messages: int, methods: int,
                        seed: int = 0) -> Path:
    """Write a run directory with the given shape; returns ``path``."""
    rng = random.Random(seed)
    clocks = [0] * processes
    records: list[list[list[Any]]] = [[] for _ in range(processes)]
    stream_off: dict[tuple[int, int], int] = {}
    for _ in range(messages):
        src = rng.randrange(processes)
        dst = rng.randrange(processes - 1)
        dst += dst >= src
        clocks[src] += 1 + rng.randrange(3)  # gaps leave room for method starts
        clocks[dst] = max(clocks[dst], 0) + 1 + rng.randrange(3)
        if rng.random() < 0.5:
            channel = f"10.0.0.{src}:4000>10.0.0.{dst}:5000"
            start = stream_off.get((src, dst), 0)
            end = start + 1 + rng.randrange(4096)
            stream_off[(src, dst)] = end
            records[src].append([Tag.SEND, clocks[src], "tcp", channel, start, end, -1, 1, None])
            records[dst].append([Tag.RECV, clocks[dst], "tcp", channel, start, end, -1, 1, None])
        else:
            channel = f"mp:{src}>{dst}"
            records[src].append([Tag.SEND, clocks[src], "mp", channel, 0, 1, -1, 1, None])
            records[dst].append([Tag.RECV, clocks[dst], "mp", channel, 0, 1, -1, 1, None])
    procs_dir = path / PROCS_DIR
    procs_dir.mkdir(parents=True, exist_ok=True)
    (path / RUN_META).write_text(json.dumps({"format": FORMAT_VERSION, "id": path.name,
                                             "finished_at": time.time()}))
    for p in range(processes):
        key = f"bench:{1000 + p}:0"
        header = {
            "format": FORMAT_VERSION, "key": key, "pid": 1000 + p, "ppid": 1, "host": "bench",
            "argv": ["python", "worker.py"], "executable": "python", "python": "3.12",
            "cwd": "/", "start_method": "spawn", "parent_token": None, "role": f"worker {p}",
            "rank": p, "world_size": processes, "mode": "compact", "started_ns": p,
        }
        horizon = max(clocks[p], 1)
        out = [msgpack.packb([Tag.HEADER, header])]
        for k in range(methods):
            out.append(msgpack.packb([Tag.METHOD, k, f"pkg.mod{k % 50}", f"func{k}",
                                      f"/src/pkg/mod{k % 50}.py", k, k + 3]))
            first = rng.randrange(horizon)
            out.append(msgpack.packb([Tag.FIRST, k, first]))
            out.append(msgpack.packb([Tag.LAST, k, first + rng.randrange(horizon - first + 1)]))
        # message records were appended with increasing clocks per process
        out.extend(msgpack.packb(rec) for rec in _numbered_channels(_renumber(records[p])))
        out.append(msgpack.packb([Tag.END, horizon + 1, "exit"]))
        (procs_dir / process_file_name(key)).write_bytes(b"".join(out))
    return path


def _numbered_channels(recs: list[list[Any]]) -> Iterator[list[Any]]:
    """The records as a tracer writes them (format 2): each channel declared once by
    a CHANNEL record, then named by its number."""
    numbers: dict[tuple[str, str], int] = {}
    for tag, clock, kind, channel, *rest in recs:
        number = numbers.get((kind, channel))
        if number is None:
            number = numbers[(kind, channel)] = len(numbers)
            yield [Tag.CHANNEL, number, kind, channel]
        yield [tag, clock, number, *rest]


def _renumber(recs: list[list[Any]]) -> list[list[Any]]:
    """Give message-kind events their per-channel index, as a tracer would."""
    counters: dict[tuple[int, str], int] = {}
    for rec in recs:
        if rec[2] == "mp":
            k = (rec[0], rec[3])
            rec[4] = counters.get(k, 0)
            rec[5] = rec[4] + 1
            counters[k] = rec[5]
    return recs


def measure_one(path: Path, queries: int = 20, seed: int = 1) -> dict[str, Any]:
    from distea.analyzer.run import Run

    c0 = time.process_time()
    t0 = time.perf_counter()
    run = Run.load(path)
    t1 = time.perf_counter()
    analysis = run.analysis  # matching + order + indexes
    t2 = time.perf_counter()
    c2 = time.process_time()
    rng = random.Random(seed)
    names = sorted(run.executed)
    picks = [rng.choice(names) for _ in range(queries)]
    a = time.perf_counter()
    run.impact(picks[0])  # the first query also builds the DistIA baseline's index
    first_ms = (time.perf_counter() - a) * 1000
    impact_times, deps_times, sizes = [], [], []
    for name in picks:
        a = time.perf_counter()
        res = run.impact(name)
        b = time.perf_counter()
        run.deps(name)
        c = time.perf_counter()
        impact_times.append(b - a)
        deps_times.append(c - b)
        sizes.append(res.size)
    return {
        "processes": len(run.processes),
        "messages": run.matching.recvs,
        "methods_per_process": analysis.mcov_size // max(1, len(run.processes)),
        "executions": analysis.mcov_size,
        "read_s": t1 - t0,
        "order_s": t2 - t1,
        "load_s": t2 - t0,
        # CPU time of this process: steadier than wall time on a busy machine
        "load_cpu_s": c2 - c0,
        "impact_first_ms": first_ms,
        "impact_median_ms": statistics.median(impact_times) * 1000,
        "deps_median_ms": statistics.median(deps_times) * 1000,
        "impact_median_size": statistics.median(sizes),
        "matched": run.matching.matched,
    }


def measure_analysis_scale(
    configs: list[tuple[int, int, int]] | None = None,
    queries: int = 20,
    workdir: Path | None = None,
    repeat: int = 1,
) -> list[dict[str, Any]]:
    """Write and analyse one synthetic run per (processes, messages, methods) config.

    ``repeat`` loads each run that many times; the row of the median load is kept.
    """
    results = []
    base = Path(tempfile.mkdtemp(prefix="distea-scale-", dir=workdir))
    try:
        for processes, messages, methods in configs or STANDARD:
            path = base / f"p{processes}-m{messages}-k{methods}"
            t0 = time.perf_counter()
            write_synthetic_run(path, processes, messages, methods)
            gen = time.perf_counter() - t0
            runs = [measure_one(path, queries) for _ in range(max(1, repeat))]
            row = sorted(runs, key=lambda r: r["load_s"])[(len(runs) - 1) // 2]
            row["load_s_runs"] = [r["load_s"] for r in runs]
            row["generate_s"] = gen
            row["loadavg_1m"] = os.getloadavg()[0]
            row["cpus"] = os.cpu_count()
            row["config"] = {"processes": processes, "messages": messages, "methods": methods}
            results.append(row)
            shutil.rmtree(path, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return results


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| processes | messages | methods/process | read (s) | match+order (s) | load total (s) "
        "| load CPU (s) | first impact (ms) | impact median (ms) | deps median (ms) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        c = r["config"]
        lines.append(
            f"| {c['processes']} | {c['messages']:,} | {c['methods']:,} | {r['read_s']:.2f} "
            f"| {r['order_s']:.2f} | {r['load_s']:.2f} | {r['load_cpu_s']:.2f} "
            f"| {r['impact_first_ms']:.1f} "
            f"| {r['impact_median_ms']:.1f} "
            f"| {r['deps_median_ms']:.1f} |"
        )
    if rows and len(rows[0].get("load_s_runs", ())) > 1:
        lines.append(f"\n(each row: the median of {len(rows[0]['load_s_runs'])} loads of the "
                     "same run directory)")
    if rows:
        loads = ", ".join(f"{r['loadavg_1m']:.1f}" for r in rows)
        lines.append(f"\n(load average during the rows: {loads} on {rows[0]['cpus']} CPUs; "
                     "timings on a busy machine are inflated)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="load each run N times and report the median load (default 1)")
    parser.add_argument("--json", action="store_true", help="print the raw rows as JSON")
    args = parser.parse_args()
    rows = measure_analysis_scale(QUICK if args.quick else STANDARD, args.queries,
                                  repeat=args.repeat)
    print(json.dumps(rows, indent=2) if args.json else markdown(rows))


if __name__ == "__main__":
    main()
