"""Golden-file tests of the HTML report and the ShiViz export on the small synthetic run.

Volatile parts are scrubbed before comparing: the run directory (a tmp path),
the generation timestamp and the distea version. Pids, hosts and clocks come
from the trace builder and are fixed. The inlined stylesheet and script are
replaced by placeholders (the browser tests cover them) and the JSON island
is pretty-printed, so a change to the page shows up as a readable diff.

Regenerate after an intended change::

    DISTEA_UPDATE_GOLDEN=1 uv run pytest tests/report/test_golden.py

and review the diff of ``tests/report/golden/`` before committing it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from click.testing import CliRunner

from distea.cli import main
from tests.report.synthetic import SMALL_QUERY

GOLDEN = Path(__file__).parent / "golden"
ISLAND = re.compile(r'(<script type="application/json" id="distea-data">)(.*?)(</script>)', re.S)


def scrub(text: str, run_dir: Path) -> str:
    text = text.replace(str(run_dir), "<RUN>")
    text = re.sub(r'(<span class="generated">)[^<]*(</span>)', r"\1<GENERATED>\2", text)
    text = re.sub(r'(<meta name="generator" content="distea )[^"]*(">)', r"\1<VERSION>\2", text)
    text = re.sub(r"<style>\n.*?</style>", "<style>/* assets/report.css */</style>", text,
                  flags=re.S)
    text = re.sub(r"<script>\n.*?</script>", "<script>/* assets/report.js */</script>", text,
                  flags=re.S)

    def pretty(match: re.Match[str]) -> str:
        data = json.loads(match.group(2))
        return match.group(1) + "\n" + json.dumps(data, indent=1, sort_keys=True) + "\n" + \
            match.group(3)

    return ISLAND.sub(pretty, text)


def check_golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("DISTEA_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"no golden file {path}; run with DISTEA_UPDATE_GOLDEN=1 to create it"
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, (f"{name} differs from its golden file; if the change is "
                                "intended, regenerate with DISTEA_UPDATE_GOLDEN=1")


def test_report_html_golden(small_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["report", SMALL_QUERY, "--run", str(small_dir),
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")
    assert str(small_dir) in html and '<span class="generated">' in html
    check_golden("small_report.html", scrub(html, small_dir))


def test_shiviz_golden(small_dir: Path) -> None:
    result = CliRunner().invoke(main, ["export", "shiviz", SMALL_QUERY, "--run", str(small_dir)])
    assert result.exit_code == 0, result.output
    check_golden("small.shiviz.log", result.stdout)
