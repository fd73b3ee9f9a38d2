"""distea at another commit against this checkout, on the suite's workloads, interleaved.

    uv run python -m benchmarks.compare HEAD~1                 # every workload, 7 rounds
    uv run python -m benchmarks.compare 6fcca44 --only empty --only ring --rounds 9

Two suite runs an hour apart differ by more than most single changes, so a
change is measured against its base in one session: each round runs every
workload untraced, under the base commit's ``distea run`` and under this
checkout's, in turn. The base is checked out in a temporary ``git
worktree`` and put first on ``PYTHONPATH``, so its CLI, tracer and
bootstrap are the ones that run (dependencies come from this environment).
Prints wall-time ratios to the untraced median for both, and the change.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmarks.__main__ import REPO, RUN_TIMEOUT_S, compile_sources
from benchmarks.workloads.registry import WORKLOADS, Workload
from benchmarks.workloads.tools import distea_command

VARIANTS = ("untraced", "base", "head")


@contextmanager
def worktree(revision: str) -> Iterator[Path]:
    """A detached checkout of ``revision``, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="distea-compare-") as parent:
        path = Path(parent) / "base"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet",
                        str(path), revision], check=True)
        try:
            yield path
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)],
                           check=False)


def run_once(workload: Workload, variant: str, base: Path, quick: bool) -> float:
    """Wall seconds of one run; raises when the command fails."""
    argv = workload.argv(quick)
    env = dict(os.environ)
    cwd = REPO
    with tempfile.TemporaryDirectory(prefix="distea-compare-run-") as out:
        if variant != "untraced":
            argv = distea_command("compact", argv, Path(out))
        if variant == "base":
            env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(base),
                                                               env.get("PYTHONPATH"))))
            cwd = base
        started = time.perf_counter()
        result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                                timeout=RUN_TIMEOUT_S)
        elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"{workload.name} ({variant}) exited with {result.returncode}: "
                           f"{result.stderr.strip()[-500:]}")
    return elapsed


def measure(workloads: list[Workload], base: Path, rounds: int,
            quick: bool) -> dict[str, dict[str, list[float]]]:
    """Wall times by workload and variant; the variants' order rotates every round."""
    times: dict[str, dict[str, list[float]]] = {w.name: {v: [] for v in VARIANTS}
                                                for w in workloads}
    for index in range(rounds):
        order = VARIANTS[index % 3:] + VARIANTS[:index % 3]
        for workload in workloads:
            for variant in order:
                times[workload.name][variant].append(run_once(workload, variant, base, quick))
        print(f"round {index + 1}/{rounds} done", file=sys.stderr, flush=True)
    return times


def table(times: dict[str, dict[str, list[float]]], revision: str, rounds: int) -> str:
    lines = [f"Wall time traced / untraced, medians of {rounds} interleaved rounds "
             f"(base: {revision}; head: this checkout)",
             "",
             "| workload | untraced (s) | base | head | head / base |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for name, by_variant in times.items():
        untraced, base, head = (statistics.median(by_variant[v]) for v in VARIANTS)
        lines.append(f"| {name} | {untraced:.3f} | {base / untraced:.2f}x | "
                     f"{head / untraced:.2f}x | {head / base:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("revision", help="the base commit (anything git rev-parse takes)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds (default 7)")
    parser.add_argument("--only", action="append", default=[], metavar="WORKLOAD",
                        help="workloads whose module or name contains this (repeatable)")
    parser.add_argument("--quick", action="store_true", help="the workloads' small sizes")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    workloads = [w for w in WORKLOADS if not w.missing() and (
        not args.only or any(o in w.module or o in w.name for o in args.only))]
    if not workloads:
        parser.error(f"no workload matches {args.only}")
    compile_sources()
    with worktree(args.revision) as base:
        compile_sources(base)
        times = measure(workloads, base, args.rounds, args.quick)
    print(table(times, args.revision, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
