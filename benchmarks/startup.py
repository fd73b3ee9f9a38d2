"""Start-up: what tracing adds to each process's start, and what ``distea run`` adds itself.

    uv run python -m benchmarks.startup [--repeats 7]

Three measurements, each run untraced and traced in alternation, medians of
``repeats``, in wall time and in CPU time (user + system of the whole
process tree, from ``wait4``'s resource usage, so the collector thread of
``distea run`` is counted):

- **per traced process**: a parent starts 20 ``python -c pass`` children one
  after the other; (traced - untraced) / 20 is what one traced process adds
  to its own start and exit (target: 10 ms);
- **``distea run`` itself**: ``distea run -- /bin/true`` against ``/bin/true``
  (nothing to trace: the launcher, the collector, the final drain; target:
  30 ms);
- **spawn ``Pool(4)``** and **a 6-process program**: the ratios (target: 1.3x).

CPU time is the steady figure on a busy machine; wall time hides the
workers' start-up behind each other on an idle one. The suite
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

REPO = Path(__file__).resolve().parents[1]
DISTEA = Path(sys.executable).parent / "distea"
CHILDREN = 20
TIMEOUT_S = 300

STARTER = f'''
import subprocess, sys
for _ in range({CHILDREN}):
    subprocess.run([sys.executable, "-c", "pass"], check=True)
'''


def timed_run(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the whole waited-for tree) of one command."""
    began = time.perf_counter()
    pid = _spawn(argv, cwd)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - began
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({os.waitstatus_to_exitcode(status)})")
    return wall, usage.ru_utime + usage.ru_stime


def _spawn(argv: list[str], cwd: Path) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.chdir(cwd)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    return pid


def paired(plain: list[str], traced_args: list[str], repeats: int, cwd: Path,
           run_dirs: Path) -> dict[str, float]:
    """Medians of untraced and traced runs, alternating, rotating which goes first."""
    samples: dict[str, list[float]] = {"wall": [], "cpu": [], "twall": [], "tcpu": []}
    for i in range(repeats):
        run_dir = run_dirs / f"run-{time.monotonic_ns()}"
        traced = [str(DISTEA), "run", "-q", "-o", str(run_dir), "--", *traced_args]
        order = [(plain, ""), (traced, "t")] if i % 2 == 0 else [(traced, "t"), (plain, "")]
        for argv, prefix in order:
            wall, cpu = timed_run(argv, cwd)
            samples[prefix + "wall"].append(wall)
            samples[prefix + "cpu"].append(cpu)
    return {k: statistics.median(v) for k, v in samples.items()}


def measure_startup(repeats: int = 7) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="distea-startup-") as tmp:
        folder = Path(tmp)
        true = "/bin/true"
        own = paired([true], [true], repeats, folder, folder)
        starter = folder / "starter.py"
        starter.write_text(STARTER)
        py = sys.executable
        m = paired([py, str(starter)], [py, str(starter)], repeats, folder, folder)
        # the starter and its children are traced; distea run's own cost is not theirs
        m = {**m, "twall": m["twall"] - (own["twall"] - own["wall"]),
             "tcpu": m["tcpu"] - (own["tcpu"] - own["cpu"])}
        rows.append(_added("per traced process (20 x python -c pass)", m, CHILDREN + 1, 10))
        rows.append(_added("distea run itself (distea run -- /bin/true)", own, 1, 30))
        for name, module in (("spawn Pool(4).map, 100 items", "benchmarks.workloads.spawn_pool"),
                             ("6-process multiprocessing program",
                              "benchmarks.workloads.six_procs")):
            argv = [py, "-m", module]
            m = paired(argv, argv, repeats, REPO, folder)
            rows.append({"what": name, "untraced wall s": m["wall"], "untraced CPU s": m["cpu"],
                         "wall ratio": m["twall"] / m["wall"], "CPU ratio": m["tcpu"] / m["cpu"],
                         "target": "≤ 1.3x"})
    return rows


def _added(what: str, m: dict[str, float], processes: int, target_ms: int) -> dict[str, Any]:
    return {"what": what, "untraced wall s": m["wall"], "untraced CPU s": m["cpu"],
            "added wall ms": 1000 * (m["twall"] - m["wall"]) / processes,
            "added CPU ms": 1000 * (m["tcpu"] - m["cpu"]) / processes,
            "target": f"≤ {target_ms} ms"}


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| what | untraced wall | untraced CPU | added (wall) | added (CPU) | target |",
             "| --- | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        if "added wall ms" in r:
            wall, cpu = f"{r['added wall ms']:+.1f} ms", f"{r['added CPU ms']:+.1f} ms"
            if "per traced" in r["what"]:
                wall, cpu = wall + " per process", cpu + " per process"
        else:
            wall, cpu = f"{r['wall ratio']:.2f}x", f"{r['CPU ratio']:.2f}x"
        lines.append(f"| {r['what']} | {r['untraced wall s']:.3f} s | {r['untraced CPU s']:.3f} s "
                     f"| {wall} | {cpu} | {r['target']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(markdown(measure_startup(args.repeats)))


if __name__ == "__main__":
    main()
