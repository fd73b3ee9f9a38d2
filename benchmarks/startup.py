"""Start-up: what tracing adds to each process's start, and to whole short commands.

    uv run python -m benchmarks.startup [--repeats 5] [--no-samples] [--no-suite]

Each command runs untraced, under ``distea run`` and (for the multi-process
rows) under coverage.py (sysmon core, every process measured: see
``benchmarks/workloads/tools.py``), in rotation, so the drifts of a busy
machine hit all alike; figures are medians of ``repeats``, in wall time and
in CPU time (user + system of the whole process tree, from ``wait4``'s
resource usage, so the collector thread of ``distea run`` is counted):

- **per traced process**: a parent starts 20 ``python -c pass`` children one
  after the other; (traced - untraced - what ``distea run`` costs itself) / 21
  is what one traced process adds to its own start and exit (target: 10 ms);
- **``distea run`` itself**: ``distea run -q -- /bin/true`` against ``/bin/true``
  (the launcher, the collector, the final drain; target: 30 ms);
- **spawn ``Pool(4)``** and **a 6-process program** (target: 1.3x);
- **every sample system**, the whole command (target: 1.2x);
- **CPython's ``_test_multiprocessing``, spawn start method, its queue tests**
  (``python -m benchmarks.suites`` runs the whole of it; target: 1.3x).

A ratio row's verdict needs both its wall and its CPU ratio within the
target, and distea below coverage.py in both. The workloads' own modules are
given their bytecode first, as an installed program has it; distea's own are
not: the tracer caches them itself (``distea/tracer/bytecode.py``). The suite
(``python -m benchmarks``) prints this table as its "Start-up" section.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.workloads.registry import WORKLOADS
from benchmarks.workloads.tools import TOOLS

REPO = Path(__file__).resolve().parents[1]
DISTEA = Path(sys.executable).parent / "distea"
CHILDREN = 20
TIMEOUT_S = 300
PER_PROCESS_TARGET_MS = 10
RUN_ITSELF_TARGET_MS = 30
START_UP_TARGET = 1.3
SAMPLE_TARGET = 1.2
SUITE_SPEC = "mp:spawn/processes -m *Queue*"
"""The ``_test_multiprocessing`` subset timed here (``benchmarks/suites.py`` spec)."""

STARTER = f'''
import subprocess, sys
for _ in range({CHILDREN}):
    subprocess.run([sys.executable, "-c", "pass"], check=True)
'''


def timed_run(argv: list[str], cwd: Path, env: dict[str, str] | None = None,
              check: bool = True) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the whole waited-for tree) of one command."""
    began = time.perf_counter()
    pid = _spawn(argv, cwd, {**os.environ, **(env or {})})
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - began
    if check and os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({os.waitstatus_to_exitcode(status)})")
    return wall, usage.ru_utime + usage.ru_stime


def _spawn(argv: list[str], cwd: Path, env: dict[str, str]) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.chdir(cwd)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    return pid


def compared(argv: list[str], repeats: int, cwd: Path, scratch: Path,
             tools: tuple[str, ...] = ("untraced", "distea compact"),
             check: bool = True) -> dict[str, dict[str, float]]:
    """Tool → median wall and CPU seconds; one repetition runs every tool once, each
    repetition starting with the next tool."""
    samples: dict[str, dict[str, list[float]]] = {t: {"wall": [], "cpu": []} for t in tools}
    for i in range(repeats):
        for tool in tools[i % len(tools):] + tools[:i % len(tools)]:
            for attempt in (1, 2):  # a sample's own timeouts may expire on a loaded machine
                prepared = TOOLS[tool].prepare(argv, scratch / f"{time.monotonic_ns()}")
                try:
                    wall, cpu = timed_run(prepared.argv, cwd, prepared.env, check)
                    break
                except RuntimeError:
                    if attempt == 2:
                        raise
            samples[tool]["wall"].append(wall)
            samples[tool]["cpu"].append(cpu)
    return {t: {k: statistics.median(v) for k, v in s.items()} for t, s in samples.items()}


def measure_startup(repeats: int = 7, samples: bool = True,
                    suite: bool = True) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="distea-startup-") as tmp:
        folder = Path(tmp)
        scratch = folder / "runs"
        scratch.mkdir()
        own = compared(["/bin/true"], repeats, folder, scratch)
        starter = folder / "starter.py"
        starter.write_text(STARTER)
        m = compared([sys.executable, str(starter)], repeats, folder, scratch)
        rows.append(_added("per traced process (20 x python -c pass)", m, own, CHILDREN + 1,
                           PER_PROCESS_TARGET_MS))
        rows.append(_added("distea run itself (distea run -q -- /bin/true)", own, None, 1,
                           RUN_ITSELF_TARGET_MS))
        print(markdown(rows), file=sys.stderr, flush=True)
        with_coverage = ("untraced", "distea compact", "coverage sysmon")
        for name, module in (("spawn Pool(4).map, 100 items", "benchmarks.workloads.spawn_pool"),
                             ("6-process multiprocessing program",
                              "benchmarks.workloads.six_procs")):
            m = compared([sys.executable, "-m", module], repeats, REPO, scratch, with_coverage)
            rows.append(_ratios(name, m, START_UP_TARGET))
            print(markdown(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
        if samples:
            for workload in WORKLOADS:
                if not workload.module.startswith("sample_systems.") or workload.missing():
                    continue
                what = f"{workload.module} (whole command)"
                try:
                    m = compared(workload.argv(quick=False), repeats, REPO, scratch,
                                 with_coverage)
                except RuntimeError as exc:
                    rows.append({"what": what, "failed": str(exc), "target": f"≤ {SAMPLE_TARGET}x",
                                 "met": False})
                    continue
                rows.append(_ratios(what, m, SAMPLE_TARGET))
                print(markdown(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
        if suite:
            rows.append(_suite_row(max(1, min(repeats, 3)), folder, scratch))
    return rows


def _suite_row(repeats: int, folder: Path, scratch: Path) -> dict[str, Any]:
    from benchmarks.suites import suite_command

    argv = suite_command(SUITE_SPEC, sys.executable, folder / "junit.xml")
    # a test that fails (or is skipped) fails alike untraced: the times still compare
    m = compared(argv, repeats, folder, scratch, check=False)
    return _ratios(f"_test_multiprocessing, spawn, `-m *Queue*` ({repeats} runs)", m,
                   START_UP_TARGET)


def _added(what: str, m: dict[str, dict[str, float]], own: dict[str, dict[str, float]] | None,
           processes: int, target_ms: int) -> dict[str, Any]:
    """(traced - untraced) per process, less what ``distea run`` costs itself (``own``)."""
    plain, traced = m["untraced"], m["distea compact"]
    wall = traced["wall"] - plain["wall"]
    cpu = traced["cpu"] - plain["cpu"]
    if own is not None:
        wall -= own["distea compact"]["wall"] - own["untraced"]["wall"]
        cpu -= own["distea compact"]["cpu"] - own["untraced"]["cpu"]
    wall_ms, cpu_ms = 1000 * wall / processes, 1000 * cpu / processes
    return {"what": what, "untraced wall s": plain["wall"], "untraced CPU s": plain["cpu"],
            "added wall ms": wall_ms, "added CPU ms": cpu_ms, "target": f"≤ {target_ms} ms",
            "met": wall_ms <= target_ms and cpu_ms <= target_ms}


def _ratios(what: str, m: dict[str, dict[str, float]], target: float) -> dict[str, Any]:
    plain, traced = m["untraced"], m["distea compact"]
    row: dict[str, Any] = {
        "what": what, "untraced wall s": plain["wall"], "untraced CPU s": plain["cpu"],
        "wall ratio": traced["wall"] / plain["wall"], "CPU ratio": traced["cpu"] / plain["cpu"],
        "target": f"≤ {target}x"}
    met = row["wall ratio"] <= target and row["CPU ratio"] <= target
    coverage = m.get("coverage sysmon")
    if coverage is not None:
        row["coverage wall ratio"] = coverage["wall"] / plain["wall"]
        row["coverage CPU ratio"] = coverage["cpu"] / plain["cpu"]
        met = met and row["wall ratio"] < row["coverage wall ratio"] \
            and row["CPU ratio"] < row["coverage CPU ratio"]
    row["met"] = met
    return row


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| what | untraced wall | untraced CPU | distea (wall) | distea (CPU) "
             "| coverage.py (wall / CPU) | target | met |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        coverage = ""
        if "failed" in r:
            lines.append(f"| {r['what']} | failed twice: {r['failed']} | | | | | {r['target']} "
                         "| no |")
            continue
        if "added wall ms" in r:
            wall, cpu = f"{r['added wall ms']:+.1f} ms", f"{r['added CPU ms']:+.1f} ms"
            if "per traced" in r["what"]:
                wall, cpu = wall + " per process", cpu + " per process"
        else:
            wall, cpu = f"{r['wall ratio']:.2f}x", f"{r['CPU ratio']:.2f}x"
            if "coverage wall ratio" in r:
                coverage = f"{r['coverage wall ratio']:.2f}x / {r['coverage CPU ratio']:.2f}x"
        lines.append(f"| {r['what']} | {r['untraced wall s']:.3f} s | {r['untraced CPU s']:.3f} s "
                     f"| {wall} | {cpu} | {coverage} | {r['target']} "
                     f"| {'yes' if r['met'] else 'no'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-samples", action="store_true",
                        help="leave out the sample systems' rows")
    parser.add_argument("--no-suite", action="store_true",
                        help="leave out the _test_multiprocessing row (a few minutes)")
    args = parser.parse_args()
    from benchmarks.__main__ import compile_sources

    compile_sources(packages=("benchmarks", "sample_systems"))
    print(markdown(measure_startup(args.repeats, not args.no_samples, not args.no_suite)))


if __name__ == "__main__":
    main()
