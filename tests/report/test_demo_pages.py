"""The report of real sample runs, at a laptop's 1400x900, in a real Chromium.

ring_allreduce (726 messages between 5 processes) and kvstore (three copies
of one server role) are traced for real, their report rendered and loaded;
the screenshots are kept in the test's tmp_path (``ring.png``, ``kv.png``)
to be looked at when the page changes. What is checked is what a reader
needs: every lane has its own name, a thousand messages do not become a
thousand lines, one shared time axis, and the method explained first is a
far effect of the query reached through the program's own messages.
"""

from __future__ import annotations

import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from distea.analyzer.run import Run
from distea.report.render import render_report
from sample_systems import SAMPLES
from tests.report.browser import dump_dom, screenshot
from tests.tracing import REPO, run_traced

SIZE = "1400,900"


def traced_report(sample: str, tmp_path: Path) -> tuple[Run, Path]:
    info = SAMPLES[sample]
    if any(find_spec(m) is None for m in info.requires):
        pytest.skip(f"the {sample} sample needs {', '.join(info.requires)}")
    traced = run_traced([sys.executable, *info.command], REPO, tmp_path / "run")
    assert traced.result.returncode == 0, traced.result.stderr
    run = Run.load(traced.run_dir)
    page = tmp_path / f"{sample}.html"
    render_report(run, run.impact([info.interesting_queries[0]]), page)
    return run, page


@pytest.mark.parametrize("sample", ["ring_allreduce", "kvstore"])
def test_sample_report_reads_at_laptop_size(sample: str, tmp_path: Path) -> None:
    run, page = traced_report(sample, tmp_path)
    dom = dump_dom(page, "", tmp_path / "profile", size=SIZE)
    body = dom.select("body")[0]
    assert body.attrs.get("data-ready") == "1" and dom.console == []
    names = [el.text.strip("▾▸ ") for el in dom.select("div", "role")]
    assert len(names) == len(run.processes) and len(set(names)) == len(names), names
    timeline = dom.by_id("timeline")
    edges, lines = int(timeline.attrs["data-edges"]), int(timeline.attrs["data-lines"])
    if edges > 200:
        assert lines < edges / 3, (lines, edges)  # messages bundled, not one line each
    ticks = [el.text for el in dom.select("text", "tick-label")]
    assert len(ticks) >= 3 and all(t.startswith("t ") for t in ticks)
    # the method explained first: impacted, in another process than where the query
    # started, reached through a message of the program (not a process's exit)
    assert dom.by_id("panel-verdict").text == "impacted"
    steps = [li for li in dom.select("li") if li.attrs.get("data-action")]
    recvs = [li.text for li in steps if li.attrs["data-action"] == "recv"]
    assert recvs and " exit " not in recvs[-1] and " proc " not in recvs[-1]
    assert screenshot(page, tmp_path / f"{sample}.png", tmp_path / "profile", size=SIZE) == []
