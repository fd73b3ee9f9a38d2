"""Public test suites, untraced and under ``distea run``: one table row per suite.

    uv run python -m benchmarks.suites cpython:test_socketserver cpython:test_asyncio.test_streams
    uv run python -m benchmarks.suites "mp:spawn/processes -m *Queue*"
    uv run python -m benchmarks.suites --python SUITES/venv/bin/python pytest:SUITES/rpyc
    uv run python -m benchmarks.suites --json cpython:test_socketserver

A suite is ``cpython:TESTS [regrtest options]`` (CPython's own ``Lib/test``,
run as ``python -m test -u network,cpu TESTS``; the interpreter must ship it),
``mp:METHOD[/TYPE] [regrtest options]`` (``_test_multiprocessing`` for one
start method, e.g. ``mp:spawn/processes -m "*Queue*"``), or
``pytest:PATH [pytest options]`` (a fetched project's tests, run with
``--python``, an environment where the project, its test dependencies and
distea are installed). Each runs twice, untraced and traced, both writing
JUnit XML, so the runs are compared test by test. The traced run is then
analysed here: its processes, receives matched / ambiguous / external (each
external with a reason), pairings demoted because they closed a cycle
(:func:`distea.analyzer.order.compute_order`), and whether a query runs
(analysable). Nothing here is run in CI but through
tests/suites/test_cpython_suites.py.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks.workloads.tools import _bin
from distea.analyzer.run import Run

TIMEOUT_S = 1800


@dataclass(slots=True)
class Outcome:
    """Test results of one run, from its JUnit XML."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failing: list[str] = field(default_factory=list)
    exit_status: int = 0
    seconds: float = 0.0


@dataclass(slots=True)
class Analysis:
    """What the analyzer makes of the traced run."""

    processes: int = 0
    receives: int = 0
    matched: int = 0
    ambiguous: int = 0
    external: int = 0
    external_reasons: dict[str, int] = field(default_factory=dict)
    demoted: int = 0
    analysable: bool = False
    error: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def ambiguous_share(self) -> float:
        return self.ambiguous / self.receives if self.receives else 0.0


@dataclass(slots=True)
class Row:
    suite: str
    untraced: Outcome
    traced: Outcome
    analysis: Analysis

    @property
    def same_results(self) -> bool:
        """The same tests passed and failed, and some ran."""
        u, t = self.untraced, self.traced
        return u.passed + u.failed > 0 and \
            (u.passed, u.failed, sorted(u.failing)) == (t.passed, t.failed, sorted(t.failing))


MP_DRIVER = """\
from test._test_multiprocessing import install_tests_in_module_dict

install_tests_in_module_dict(globals(), {method!r}, only_type={only_type!r})
"""
"""``_test_multiprocessing``'s tests for one start method (and kind), as CPython 3.13's
``test_multiprocessing_spawn/test_processes.py`` collects them; 3.12.1 ships no such
module."""


def suite_command(spec: str, python: str, junit: Path) -> list[str]:
    """The command line of a suite spec (module docstring), writing JUnit XML to ``junit``
    (a driver module, where the suite needs one, is written beside it)."""
    kind, _, rest = spec.partition(":")
    words = shlex.split(rest)
    regrtest = [python, "-m", "test", "-u", "network,cpu", "--junit-xml", str(junit)]
    if kind == "cpython":
        return [*regrtest, *words]
    if kind == "mp":
        method, _, only_type = words[0].partition("/")
        name = f"test_mp_{method}_{only_type or 'all'}"
        (junit.parent / f"{name}.py").write_text(
            MP_DRIVER.format(method=method, only_type=only_type or None))
        return [*regrtest, "--testdir", str(junit.parent), name, *words[1:]]
    if kind == "pytest":
        return [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                *words]
    raise SystemExit(f"unknown suite kind {kind!r} in {spec!r}: use cpython:TESTS, "
                     "mp:METHOD[/TYPE] or pytest:PATH")


def read_junit(path: Path) -> Outcome:
    out = Outcome()
    if not path.is_file():
        return out
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}.{case.get('name', '')}"
        tags = {child.tag for child in case}
        if tags & {"failure", "error"}:
            out.failed += 1
            out.failing.append(name)
        elif "skipped" in tags:
            out.skipped += 1
        else:
            out.passed += 1
    return out


def run_once(argv: list[str], cwd: Path, junit: Path, timeout: float) -> Outcome:
    """Run one suite; ``exit_status`` -1 when it ran past ``timeout`` (the whole process
    group is killed then, and the JUnit file is usually missing: no results)."""
    started = time.monotonic()
    with subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          start_new_session=True) as proc:
        try:
            status = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            status = -1
    outcome = read_junit(junit)
    outcome.exit_status = status
    outcome.seconds = round(time.monotonic() - started, 1)
    return outcome


def analyse(run_dir: Path) -> Analysis:
    """Counts, reasons and analysability of a traced run (never raises)."""
    out = Analysis()
    try:
        run = Run.load(run_dir)
        m = run.matching
        order = run.order
        out.processes = len(run.processes)
        out.receives, out.matched = m.recvs, m.matched
        out.ambiguous, out.external = m.ambiguous, m.external
        out.demoted = len(order.demoted_receives)
        out.external_reasons = dict(run.external_reasons)
        out.problems = run.problems
        methods = sorted(run.executed)
        if methods:
            run.impact(methods[0])
        out.analysable = True
    except Exception as exc:  # the point is to report it
        out.error = f"{type(exc).__name__}: {exc}"
    return out


def run_suite(spec: str, python: str, cwd: Path, include: list[str], keep: Path | None,
              timeout: float = TIMEOUT_S) -> Row:
    with tempfile.TemporaryDirectory(prefix="distea-suite-") as tmp:
        work = keep if keep is not None else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        plain = run_once(suite_command(spec, python, work / "untraced.xml"), cwd,
                         work / "untraced.xml", timeout)
        extra = [arg for glob in include for arg in ("--include", glob)]
        traced_argv = [_bin("distea"), "run", "-q", "-o", str(work / "run"), *extra, "--",
                       *suite_command(spec, python, work / "traced.xml")]
        traced = run_once(traced_argv, cwd, work / "traced.xml", timeout)
        return Row(spec, plain, traced, analyse(work / "run"))


def _results(o: Outcome) -> str:
    return "timed out" if o.exit_status == -1 else f"{o.passed}/{o.failed}"


def table(rows: list[Row]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="public suites: untraced vs distea run")
    for column in ("suite", "untraced pass/fail", "traced pass/fail", "same", "processes",
                   "receives", "matched", "ambiguous", "external (reasons)", "demoted",
                   "analysable", "time s (untraced/traced)"):
        t.add_column(column)
    for row in rows:
        a, u, tr = row.analysis, row.untraced, row.traced
        reasons = "; ".join(f"{n} {why}" for why, n in sorted(a.external_reasons.items()))
        t.add_row(row.suite, _results(u), _results(tr),
                  "yes" if row.same_results else "NO", str(a.processes), str(a.receives),
                  str(a.matched), f"{a.ambiguous} ({a.ambiguous_share:.1%})",
                  f"{a.external}" + (f" ({reasons})" if reasons else ""), str(a.demoted),
                  "yes" if a.analysable else f"NO: {a.error}", f"{u.seconds}/{tr.seconds}")
    Console(width=200).print(t)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.suites", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suites", nargs="+", metavar="SUITE",
                        help="cpython:TESTS [options] or pytest:PATH [options]")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter that runs the suites (default: this one)")
    parser.add_argument("--cwd", type=Path, default=Path.cwd(),
                        help="working directory of the suites (default: here)")
    parser.add_argument("--include", action="append", default=[], metavar="GLOB",
                        help="also trace modules matching GLOB (distea run --include)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep runs and JUnit files under this directory")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S,
                        help=f"seconds each run may take (default {TIMEOUT_S})")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    rows = []
    for n, spec in enumerate(args.suites):
        keep = args.keep / re.sub(r"\W+", "_", spec)[:60] / str(n) if args.keep else None
        rows.append(run_suite(spec, args.python, args.cwd, args.include, keep, args.timeout))
    if args.json:
        print(json.dumps([{**asdict(r), "same_results": r.same_results} for r in rows],
                         indent=2))
    else:
        table(rows)
    return 0 if all(r.same_results and r.analysis.analysable for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
