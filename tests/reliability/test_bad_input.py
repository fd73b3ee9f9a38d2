"""Bad input: every case one clear line, a non-zero exit, no traceback, data left intact."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from distea.traceformat import FORMAT_VERSION, TraceFormatError, load_run
from tests.reliability.helpers import PY
from tests.tracing import DISTEA, run_traced

APP = """
import socket, threading

def handle(conn):
    conn.sendall(conn.recv(5).upper())

def main():
    a, b = socket.socketpair()
    t = threading.Thread(target=handle, args=(b,))
    t.start()
    a.sendall(b"hello")
    print(a.recv(5).decode())
    t.join()

main()
"""


@pytest.fixture(scope="module")
def good_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("good")
    (base / "app.py").write_text(APP)
    traced = run_traced([PY, "app.py"], base, base / "run")
    assert traced.result.returncode == 0, traced.result.stderr
    return base / "run"


def copy_run(good_run: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(good_run, target)
    return target


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def distea(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(DISTEA), *args], capture_output=True, text=True, timeout=60,
                          cwd=cwd)


def assert_one_line_error(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]


def the_log(run_dir: Path) -> Path:
    (log,) = [p for p in (run_dir / "procs").iterdir()
              if load_run(run_dir) and p.stat().st_size > 0]
    return log


# -- distea run --------------------------------------------------------------------


def test_command_not_found(tmp_path: Path) -> None:
    result = distea("run", "--", "nosuchcmd-distea", cwd=tmp_path)
    assert result.returncode == 127
    assert_one_line_error(result, "command not found: nosuchcmd-distea")
    assert not (tmp_path / ".distea").exists()


def test_missing_and_non_executable_paths(tmp_path: Path) -> None:
    assert distea("run", "--", "./missing.sh", cwd=tmp_path).returncode == 127
    script = tmp_path / "plain.sh"
    script.write_text("echo hi\n")
    result = distea("run", "--", "./plain.sh", cwd=tmp_path)
    assert result.returncode == 126
    assert_one_line_error(result, "permission denied")


def test_no_command(tmp_path: Path) -> None:
    result = distea("run", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_output_directory_not_empty(good_run: Path, tmp_path: Path) -> None:
    run_dir = copy_run(good_run, tmp_path)
    before = digest(run_dir)
    result = distea("run", "-o", str(run_dir), "--", PY, "-c", "pass")
    assert_one_line_error(result, "not empty")
    assert digest(run_dir) == before


def test_output_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    result = distea("run", "-o", str(tmp_path / "file" / "run"), "--", PY, "-c", "pass")
    assert_one_line_error(result, "cannot create the run directory", "Not a directory")


def test_output_directory_not_writable(tmp_path: Path) -> None:
    target = tmp_path / "locked"
    target.mkdir()
    if os.geteuid() != 0:
        target.chmod(0o500)
        result = distea("run", "-o", str(target / "run"), "--", PY, "-c", "print(1)")
        target.chmod(0o700)
    else:  # root ignores modes: a read-only mount, private to one process
        if shutil.which("unshare") is None:
            pytest.skip("needs unshare(1) when run as root")
        result = subprocess.run(
            ["unshare", "-m", "sh", "-c",
             f'mount -t tmpfs -o ro none "{target}" && exec "{DISTEA}" run -o '
             f'"{target}/run" -- {PY} -c "print(1)"'],
            capture_output=True, text=True, timeout=60)
        if "mount" in result.stderr and "distea" not in result.stderr:
            pytest.skip(f"cannot mount here: {result.stderr.strip()}")
    assert result.returncode == 2
    assert result.stdout == ""          # the command did not run untraced behind our back
    assert_one_line_error(result, "cannot create the run directory")


def test_connect_without_a_usable_key(tmp_path: Path) -> None:
    result = distea("run", "--connect", "tcp://127.0.0.1:9", "--key", str(tmp_path / "none"),
                    "--", PY, "-c", "pass")
    assert result.returncode == 2
    assert_one_line_error(result, "no key file")
    (tmp_path / "bad.key").write_text("not json")
    result = distea("run", "--connect", "tcp://127.0.0.1:9", "--key",
                    str(tmp_path / "bad.key"), "--", PY, "-c", "pass")
    assert_one_line_error(result, "not a distea key file")


# -- reading runs -------------------------------------------------------------------


def test_missing_run(tmp_path: Path) -> None:
    for command in (["show"], ["impact", "app.main"]):
        result = distea(*command, "--run", str(tmp_path / "nope"))
        assert_one_line_error(result, "no run directory")
    result = distea("show", cwd=tmp_path)          # no runs at all under the default place
    assert_one_line_error(result, "no runs")


def test_foreign_directory(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    before = digest(tmp_path)
    assert_one_line_error(distea("show", "--run", str(tmp_path)), "not a distea run")
    assert digest(tmp_path) == before


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"format": "x"}', ""])
def test_corrupt_run_json(good_run: Path, tmp_path: Path, content: str) -> None:
    run_dir = copy_run(good_run, tmp_path)
    (run_dir / "run.json").write_text(content)
    before = digest(run_dir)
    assert_one_line_error(distea("show", "--run", str(run_dir)), "run.json")
    assert digest(run_dir) == before


def test_newer_format_run(good_run: Path, tmp_path: Path) -> None:
    run_dir = copy_run(good_run, tmp_path)
    meta = json.loads((run_dir / "run.json").read_text())
    meta["format"] = FORMAT_VERSION + 1
    (run_dir / "run.json").write_text(json.dumps(meta))
    before = digest(run_dir)
    result = distea("impact", "app.main", "--run", str(run_dir))
    assert_one_line_error(result, f"format {FORMAT_VERSION + 1}", f"format {FORMAT_VERSION}")
    assert digest(run_dir) == before


def test_newer_format_process_log(good_run: Path, tmp_path: Path) -> None:
    import msgpack

    run_dir = copy_run(good_run, tmp_path)
    log = the_log(run_dir)
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(log.read_bytes())
    records = list(unpacker)
    records[0][1]["format"] = FORMAT_VERSION + 1
    log.write_bytes(b"".join(msgpack.packb(r) for r in records))
    with pytest.raises(TraceFormatError, match="newer than this distea reads"):
        load_run(run_dir)
    assert_one_line_error(distea("show", "--run", str(run_dir)), "upgrade distea")


def test_truncated_log_keeps_what_came_before(good_run: Path, tmp_path: Path) -> None:
    run_dir = copy_run(good_run, tmp_path)
    log = the_log(run_dir)
    whole = load_run(run_dir)
    log.write_bytes(log.read_bytes()[:-3])
    before = digest(run_dir)
    data = load_run(run_dir)
    assert any("truncated" in p for p in data.problems), data.problems
    assert data.executions.keys() == whole.executions.keys()
    assert set(next(iter(data.executions.values()))) >= {"app.main", "app.handle"}
    result = distea("show", "--run", str(run_dir))
    assert result.returncode == 0 and "Traceback" not in result.stderr
    assert "truncated" in result.stdout + result.stderr
    assert digest(run_dir) == before


def test_garbage_in_a_log(good_run: Path, tmp_path: Path) -> None:
    run_dir = copy_run(good_run, tmp_path)
    log = the_log(run_dir)
    raw = log.read_bytes()
    log.write_bytes(raw[: len(raw) // 2] + b"\xc1\xc1\xc1garbage" + raw[len(raw) // 2:])
    data = load_run(run_dir)
    assert any("corrupt" in p or "unexpected data" in p for p in data.problems), data.problems
    assert len(data.processes) == 1
    result = distea("impact", "app.main", "--run", str(run_dir))
    assert "Traceback" not in result.stderr


def test_foreign_and_empty_files_in_procs(good_run: Path, tmp_path: Path) -> None:
    import msgpack

    run_dir = copy_run(good_run, tmp_path)
    (run_dir / "procs" / "empty.msgpack").write_bytes(b"")
    (run_dir / "procs" / "other.msgpack").write_bytes(msgpack.packb([0, {"format": "zz"}]))
    (run_dir / "procs" / "text.msgpack").write_bytes(b"hello world\n")
    (run_dir / "procs" / "types.msgpack").write_bytes(
        msgpack.packb([0, {"format": FORMAT_VERSION, "key": "h:1:2", "pid": "x"}])
        + msgpack.packb([1, "mid", 3, None, None, None, None])
        + msgpack.packb([2, 0, "clock"]) + msgpack.packb([8, "stats"])
        + msgpack.packb([6, None, 1, 2, 3, 4, 5, 6, 7]))
    data = load_run(run_dir)
    text = "\n".join(data.problems)
    assert "empty.msgpack: empty process log" in text
    assert "other.msgpack: not a distea process log" in text
    assert "text.msgpack" in text
    assert "types.msgpack: 4 malformed records skipped" in text
    assert len(data.processes) == 2
    result = distea("impact", "app.main", "--run", str(run_dir))
    assert "Traceback" not in result.stderr, result.stderr


def test_unreadable_notes(good_run: Path, tmp_path: Path) -> None:
    run_dir = copy_run(good_run, tmp_path)
    for folder in ("untraced", "lost"):
        (run_dir / folder).mkdir(exist_ok=True)
        (run_dir / folder / "1.json").write_text("{broken")
    data = load_run(run_dir)
    assert any(p.startswith("untraced/1.json") for p in data.problems)
    assert any(p.startswith("lost/1.json") for p in data.problems)


def test_unknown_query_name(good_run: Path) -> None:
    result = distea("impact", "no.such.function", "--run", str(good_run))
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "no.such.function" in result.stderr


def test_missing_procs_directory(good_run: Path, tmp_path: Path) -> None:
    run_dir = copy_run(good_run, tmp_path)
    shutil.rmtree(run_dir / "procs")
    data = load_run(run_dir)
    assert not data.processes
    assert any("no procs/" in p for p in data.problems)


def test_collect_bad_arguments(tmp_path: Path) -> None:
    assert_one_line_error(distea("collect", "--listen", "ipc:///tmp/x", "-o",
                                 str(tmp_path / "r1")), "tcp://")
    result = distea("collect", "--listen", "tcp://256.1.1.1:5", "-o", str(tmp_path / "r2"))
    assert_one_line_error(result, "cannot listen")
    (tmp_path / "file").write_text("x")
    result = distea("collect", "--listen", "tcp://127.0.0.1:0", "-o",
                    str(tmp_path / "file" / "run"))
    assert_one_line_error(result, "cannot create the run directory")
