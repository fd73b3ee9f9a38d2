"""CPython's own suites under ``distea run``: same results, analysable.

``test_socketserver`` and ``test_asyncio.test_streams`` passed traced before,
but every query on their run failed ("the recorded order has a cycle"):
asyncio's self-pipe got the C signal handler's unseen wakeup bytes. They run
here through the public-suite runner (benchmarks/suites.py), with a spawn
subset of ``_test_multiprocessing``, where the
interpreter ships ``Lib/test`` (pyenv and python.org builds do; Debian's
python3 splits it into ``libpython3-testsuite``), and must give the same
test results traced as untraced, a run whose order needs no demoted pairing,
a query that runs, and few ambiguous receives (at most 1% on the spawn
subset).
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from benchmarks.suites import run_suite
from tests.tracing import REPO

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("test.support") is None,
    reason=f"{sys.executable} does not ship CPython's Lib/test (test.support)")


@pytest.mark.parametrize("suite", ["cpython:test_socketserver",
                                   "cpython:test_asyncio.test_streams"])
def test_cpython_suite_traced_as_untraced_and_analysable(suite: str) -> None:
    row = run_suite(suite, sys.executable, REPO, [], None)
    assert row.untraced.passed > 20 and row.untraced.exit_status == 0, row
    assert row.same_results, (row.untraced, row.traced)
    assert row.traced.exit_status == row.untraced.exit_status
    a = row.analysis
    assert a.analysable, a.error
    assert a.demoted == 0, a.problems  # no pairing closes a cycle any more
    assert a.receives > 0 and a.processes >= 1
    assert a.ambiguous_share <= 0.01, a  # issue 15: ambiguous <= 1% of receives


FOUND_FAILING_TRACED = {
    "cpython:test_signal": "a replaced builtin was no builtin to inspect",
    "cpython:test_importlib": "a subinterpreter's second tracer aborted the process",
    "cpython:test_builtin": "a finalizer's print after the module clean-up failed",
    "cpython:test_io": "an alarm handler's exception was swallowed: a loop for ever",
    "cpython:test_mmap": "the mmap subclass's repr",
    "cpython:test_traceback": "a RecursionError from the monitor's unwind callback",
}
"""Suites that failed traced (or never ended) until the fix named, each found by running
it traced against untraced (docs/performance.md, fifth round)."""


@pytest.mark.parametrize("suite", sorted(FOUND_FAILING_TRACED))
def test_a_suite_that_failed_traced_gives_the_untraced_results(suite: str) -> None:
    row = run_suite(suite, sys.executable, REPO, [], None)
    assert row.untraced.passed > 20 and row.untraced.exit_status == 0, row
    assert row.same_results, (FOUND_FAILING_TRACED[suite], row.untraced, row.traced)
    assert row.analysis.analysable, row.analysis.error


def test_multiprocessing_spawn_queues_traced_as_untraced_and_analysable() -> None:
    """A spawn subset of ``_test_multiprocessing`` (the queue tests, processes):
    ambiguous at most 1% of receives (the issue's bound).

    The queues pair by their brackets (every ``mp`` receive matched), and so
    does the one resource-tracker pipe that every spawned process writes its
    registrations to and the tracker reads line by line: several writers at
    once, placed in the pipe's order by their ``CLOCK_MONOTONIC`` brackets
    (about 60% of all receives were ambiguous before). Its writes made by a
    semaphore's finalizer inside a queue call are recorded too: were one
    missed, the pipe would hold bytes no recorded write carried, and every
    read of it would be ambiguous again.
    """
    row = run_suite("mp:spawn/processes -m *Queue*", sys.executable, REPO, [], None)
    assert row.untraced.passed >= 5 and row.untraced.exit_status == 0, row
    assert row.same_results, (row.untraced, row.traced)
    a = row.analysis
    assert a.analysable and a.demoted == 0, (a.error, a.problems)
    assert a.processes > 2 and a.receives > 0
    assert a.ambiguous_share <= 0.01, a
