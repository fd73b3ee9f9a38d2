"""Without Chromium the browser tests skip, saying why; with DISTEA_REQUIRE_BROWSER=1 they fail.

Runs pytest on one browser test in a subprocess whose PATH holds no browser,
so it checks the real collection and outcome, not the helper in isolation.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.report.browser import REQUIRE_VARIABLE

ROOT = Path(__file__).resolve().parents[2]
ONE_TEST = "tests/report/test_browser.py::test_small_report_renders"


def run_without_browser(tmp_path: Path, require: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != REQUIRE_VARIABLE}
    env["PATH"] = str(Path(sys.executable).parent)  # the venv's tools, no browser
    if require:
        env[REQUIRE_VARIABLE] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", ONE_TEST],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )


def test_missing_browser_skips_with_reason(tmp_path: Path) -> None:
    proc = run_without_browser(tmp_path, require=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 skipped" in proc.stdout
    assert "need a headless Chromium" in proc.stdout


def test_missing_browser_fails_when_required(tmp_path: Path) -> None:
    proc = run_without_browser(tmp_path, require=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed" in proc.stdout
    assert f"{REQUIRE_VARIABLE}=1" in proc.stdout
