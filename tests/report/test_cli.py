"""``distea report`` and ``distea export`` through click."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from distea.cli import main
from tests.report.synthetic import SMALL_QUERY


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_report_writes_one_self_contained_file(small_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "impact.html"
    result = invoke("report", SMALL_QUERY, "--run", str(small_dir), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert f"wrote {out}: 10 functions reached in 4 of 5 processes" in result.output
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>")
    # nothing is fetched when the page opens: no external script, style, font or image
    for needle in ("src=", "href=\"http", "@import", "url(http", "//cdn"):
        assert needle not in html, needle
    assert len(html) < 150_000


def test_report_default_output_and_title(small_dir: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("report", SMALL_QUERY, "app.worker.push", "--run", str(small_dir),
                    "--title", "two <queries>")
    assert result.exit_code == 0, result.output
    html = (tmp_path / "report.html").read_text()
    assert "<h1>two &lt;queries&gt;</h1>" in html


def test_report_errors(small_dir: Path, tmp_path: Path) -> None:
    result = invoke("report", "--run", str(small_dir))
    assert result.exit_code == 2 and "give at least one QUERY" in result.output
    result = invoke("report", "app.nope", "--run", str(small_dir), "-o", str(tmp_path / "x"))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "app.nope" in result.output
    result = invoke("report", SMALL_QUERY, "--run", str(tmp_path / "missing"))
    assert result.exit_code == 1 and "Traceback" not in result.output


def test_export_to_stdout_and_file(small_dir: Path, tmp_path: Path) -> None:
    result = invoke("export", "json", "--run", str(small_dir))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["impact"] is None
    out = tmp_path / "trace.json"
    result = invoke("export", "perfetto", SMALL_QUERY, "--run", str(small_dir), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["otherData"]["queries"] == [SMALL_QUERY]
    assert "wrote" in result.stderr


def test_export_errors(small_dir: Path) -> None:
    result = invoke("export", "dot", "--run", str(small_dir))
    assert result.exit_code == 2 and "graphml" in result.output
    result = invoke("export", "shiviz", "app.nope", "--run", str(small_dir))
    assert result.exit_code == 1 and "Traceback" not in result.output
