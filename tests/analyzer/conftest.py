"""Fixtures for analyzer tests: a fresh hand-written run directory per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from distea.analyzer.run import Run
from tests.analyzer.tracebuilder import TraceBuilder


@pytest.fixture
def tb(tmp_path: Path) -> TraceBuilder:
    return TraceBuilder(tmp_path / "run")


def load(builder: TraceBuilder) -> Run:
    return Run.load(builder.write())


def impacted(run: Run, *queries: str) -> set[tuple[str, str]]:
    """Impact as (role, method) pairs, for readable expectations."""
    res = run.impact(list(queries))
    return {(run.processes[k].role, m) for k, m in res.pairs()}


def starts(run: Run, *queries: str) -> dict[str, int]:
    res = run.impact(list(queries))
    return {run.processes[k].role: s for k, s in res.starts.items()}
