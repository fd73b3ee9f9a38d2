"""The report in a real headless Chromium: the script runs, draws what it should, no errors.

The page is driven through its address fragment (``#filter=…&hide=1&select=…``,
documented in docs/report.md), and the DOM is read back after the script
ran. Screenshots are saved under the test's tmp_path (``small.png``,
``big.png``); look at them when changing the page.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from distea.analyzer.run import Run
from distea.report.render import render_report
from tests.report.browser import Dom, dump_dom, screenshot
from tests.report.synthetic import BIG_QUERY, SMALL_QUERY


@pytest.fixture
def small_page(small: Run, tmp_path: Path) -> Path:
    out = tmp_path / "small.html"
    render_report(small, small.impact(SMALL_QUERY), out)
    return out


@pytest.fixture
def big_page(big: Run, tmp_path: Path) -> Path:
    out = tmp_path / "big.html"
    render_report(big, big.impact(BIG_QUERY), out)
    return out


def load(page: Path, tmp_path: Path, fragment: str = "") -> Dom:
    dom = dump_dom(page, fragment, tmp_path / "profile")
    body = dom.select("body")[0]
    assert "data-error" not in body.attrs, body.attrs["data-error"]
    assert body.attrs.get("data-ready") == "1", "the page's script did not finish"
    assert dom.console == [], f"console output: {dom.console}"
    return dom


def test_small_report_renders(small_page: Path, tmp_path: Path) -> None:
    dom = load(small_page, tmp_path)
    # counts per process exist only once the script ran
    assert [e.text for e in dom.select("span", "lane-count")] == ["3/5", "3/5", "4/7", "3/6", "0/3"]
    heads = dom.select("div", "lane-head")
    assert len(heads) == 5 and "launcher" in heads[0].text and "pid 1 · h" in heads[0].text
    assert "worker · rank 0/2" in heads[2].text
    nodes = dom.select("g", "node")
    assert len(nodes) == 26
    assert {n.attrs["data-method"] for n in nodes} >= {
        "app.server.apply_update", "app.launcher.summarize", "app.worker.load_shard"}
    assert [n.attrs["data-method"] for n in dom.select("g", "node query")] == [
        "app.server.apply_update"]
    assert len(dom.select("g", "node impacted")) == 12
    assert len(dom.select("g", "node other")) == 13
    edges = {(e.attrs["data-src"], e.attrs["data-dst"]) for e in dom.select("path", "edge carries")}
    assert edges == {("1", "2"), ("1", "3"), ("2", "0")}
    assert len(dom.select("path", "edge")) == 3  # only impact-carrying messages by default
    assert len(dom.select("line", "start-line")) == 4
    # a first explanation is open: the method reached through the most messages
    assert dom.by_id("panel-verdict").text == "impacted"
    assert len(dom.select("li", None, data_action="recv")) == 2
    assert dom.select("path", "chain-path")
    assert dom.by_id("n-size").text == "13"
    assert dom.by_id("n-mcov").text == "26" and dom.by_id("n-distia").text == "15"


def test_click_explains(small_page: Path, tmp_path: Path) -> None:
    dom = load(small_page, tmp_path, "select=app.launcher.summarize")
    steps = [li.attrs["data-action"] for li in dom.select("li") if "data-action" in li.attrs]
    assert steps == ["start", "send", "recv", "send", "recv", "runs"]
    chain = dom.by_id("chain").text
    assert "server (pid 2)" in chain and "worker (pid 3)" in chain and "tcp w0>l" in chain
    assert dom.select("g", "node selected", data_method="app.launcher.summarize")

    dom = load(small_page, tmp_path, "select=app.launcher.setup")
    assert dom.by_id("panel-verdict").text == "not impacted"
    assert "before the impact arrived" in dom.select("p", "why")[0].text

    dom = load(small_page, tmp_path, "select=app.worker.evaluate@4")
    assert "worker (pid 4)" in dom.select("dl", "facts")[0].text

    dom = load(small_page, tmp_path, "select=app.monitor.log_stats")
    facts = dom.select("dl", "facts")[0].text
    assert "never, in this process" in facts and "DistIA start" in facts


def test_filter_and_toggles(small_page: Path, tmp_path: Path) -> None:
    dom = load(small_page, tmp_path, "filter=evaluate")
    assert dom.by_id("match-count").text == "2 executions match"
    assert {n.attrs["data-method"] for n in dom.select("g", "node match")} == {
        "app.worker.evaluate"}
    assert len(dom.select("g", "node faded")) == 24

    dom = load(small_page, tmp_path, "hide=1")
    assert not dom.select("g", "node other") and len(dom.select("g", "node")) == 13

    dom = load(small_page, tmp_path, "module=1")
    modules = dom.select("g", "node", data_kind="module")
    assert len(modules) == len(dom.select("g", "node")) == 5
    assert {m.attrs["data-method"] for m in modules} == {"app.launcher", "app.server", "app.worker",
                                                        "app.monitor"}

    dom = load(small_page, tmp_path, "all=1")
    assert len(dom.select("path", "edge")) == 9


def test_small_screenshot(small_page: Path, tmp_path: Path) -> None:
    assert screenshot(small_page, tmp_path / "small.png", tmp_path / "profile") == []


def test_big_report_is_readable(big_page: Path, tmp_path: Path) -> None:
    dom = load(big_page, tmp_path)
    assert dom.select("body")[0].attrs["data-lanes"] == "18"
    assert len(dom.select("div", "lane-head")) == 18
    # 636 executions start grouped per module (one bar per module and process)
    nodes = dom.select("g", "node")
    assert nodes and all(n.attrs["data-kind"] == "module" for n in nodes)
    assert len(nodes) < 100

    dom = load(big_page, tmp_path, "module=0&hide=1")
    assert len(dom.select("g", "node", data_kind="method")) == 436
    dom = load(big_page, tmp_path, "select=lib.m11.f09@16")
    assert len([li for li in dom.select("li") if li.attrs.get("data-action") == "recv"]) == 4
    assert screenshot(big_page, tmp_path / "big.png", tmp_path / "profile") == []
