"""The benchmark runner, in its quickest mode, on the smallest workload: the
table and the result files are produced (no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from benchmarks import compare, startup_phases
from benchmarks.__main__ import main
from benchmarks.workloads import message_path


def test_quick_run_on_one_tiny_workload_produces_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--quick", "--repeats", "1", "--only", "empty",
                 "--tools", "untraced,distea compact,setprofile",
                 "--no-precision", "--no-scale", "--no-channels", "--no-startup",
                 "--out", str(tmp_path)])
    assert code == 0
    table = (tmp_path / "latest.md").read_text()
    assert "| workload | untraced (s) | distea compact | setprofile |" in table
    assert "| empty program (start-up) |" in table
    assert "failed" not in table
    assert table.splitlines()[0] in capsys.readouterr().out
    data = json.loads((tmp_path / "latest.json").read_text())
    (row,) = data["overhead"]
    assert set(row["median_s"]) == {"untraced", "distea compact", "setprofile"}
    assert row["errors"] == {}
    assert row["sizes"]["distea compact"]["processes"] == 1
    assert row["sizes"]["setprofile"]["files"] == 1, "the recorder wrote nothing"
    assert list(tmp_path.glob("latest.png")) or list(tmp_path.glob("latest.svg"))


def test_message_path_measures_both_loops_traced_and_untraced(
    capsys: pytest.CaptureFixture[str],
) -> None:
    message_path.main(["--repeats", "1", "--n", "300"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [row.split("|")[1].strip() for row in rows[2:]] == ["socket", "zmq"]
    for row in rows[2:]:
        untraced, traced = (float(cell) for cell in row.split("|")[3:5])
        assert untraced > 0 and traced > 0


def test_message_parts_are_timed_inside_a_traced_process(
    capsys: pytest.CaptureFixture[str],
) -> None:
    message_path.main(["--parts", "--n", "300"])
    rows = [line.split("|") for line in capsys.readouterr().out.splitlines()
            if line.startswith("| ")][2:]
    parts = {cells[1].strip(): float(cells[2]) for cells in rows}
    assert len(parts) == 6 and all(value > 0 for value in parts.values()), parts
    # the wrappers are in place: the traced calls cost more than the originals
    assert parts["socket send + recv, as traced"] > parts["socket send + recv, original"]


def test_compare_runs_a_base_commit_beside_this_checkout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert compare.main(["HEAD", "--only", "empty", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if line.startswith("| empty program")]
    untraced, base, head, change = (cell.strip() for cell in row.split("|")[2:6])
    assert float(untraced) > 0
    assert base.endswith("x") and head.endswith("x") and float(change) > 0
    listed = subprocess.run(["git", "worktree", "list"], capture_output=True, text=True,
                            check=True, cwd=Path(compare.__file__).parent.parent).stdout
    assert "distea-compare-" not in listed, "the base's worktree was left behind"


def test_startup_phases_times_each_phase_of_the_pool_traced_and_untraced(
    capsys: pytest.CaptureFixture[str],
) -> None:
    startup_phases.main(["--rounds", "1"])
    rows = [line.split("|") for line in capsys.readouterr().out.splitlines()
            if line.startswith("| ")][2:]
    assert [cells[1].strip() for cells in rows] == [
        *(name for name, _, _ in startup_phases.PHASES), "whole command"]
    for cells in rows:
        untraced, traced = (float(cell.split()[0]) for cell in cells[2:4])
        assert untraced > 0 and traced > 0, cells
