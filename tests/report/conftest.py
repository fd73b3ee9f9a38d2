"""Fixtures for report and export tests: the synthetic runs of :mod:`tests.report.synthetic`."""

from __future__ import annotations

from pathlib import Path

import pytest

from distea.analyzer.run import Run
from tests.report.synthetic import big_run, small_run


@pytest.fixture(scope="session")
def small_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_run(tmp_path_factory.mktemp("small") / "run")


@pytest.fixture(scope="session")
def big_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return big_run(tmp_path_factory.mktemp("big") / "run")


@pytest.fixture
def small(small_dir: Path) -> Run:
    return Run.load(small_dir)


@pytest.fixture
def big(big_dir: Path) -> Run:
    return Run.load(big_dir)
