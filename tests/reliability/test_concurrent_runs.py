"""Two `distea run`s at once in one directory: two runs, no cross-talk."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from distea import launcher
from distea.traceformat import load_run
from tests.reliability.helpers import PY
from tests.tracing import DISTEA

PINGPONG = """
import socket, subprocess, sys

def serve(tag):
    listener = socket.create_server(("127.0.0.1", 0))
    child = subprocess.Popen([sys.executable, __file__, tag, str(listener.getsockname()[1])])
    conn, _ = listener.accept()
    for _ in range(200):
        conn.sendall(conn.recv(8))
    child.wait()
    print(tag, "served", flush=True)

def ping(tag, port):
    conn = socket.create_connection(("127.0.0.1", port))
    for _ in range(200):
        conn.sendall(tag.encode()[:8].ljust(8))
        conn.recv(8)

if len(sys.argv) > 2:
    ping(sys.argv[1], int(sys.argv[2]))
else:
    serve(sys.argv[1])
"""


def test_two_runs_at_once(program, tmp_path: Path) -> None:
    script = program("pingpong.py", PINGPONG)
    procs = [subprocess.Popen([str(DISTEA), "run", "-q", "--", PY, script.name, tag],
                              cwd=script.parent, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for tag in ("alpha", "beta")]
    try:
        outs = [p.communicate(timeout=90) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], outs
    assert [o[0] for o in outs] == ["alpha served\n", "beta served\n"]
    runs = sorted((script.parent / ".distea" / "runs").iterdir())
    assert len(runs) == 2
    tags = set()
    for run_dir in runs:
        data = load_run(run_dir)
        assert not data.problems, data.problems
        assert len(data.processes) == 2
        (tag,) = {p.argv[2] for p in data.processes.values()}
        tags.add(tag)
        sends = sum(m.end - m.start for ms in data.messages.values() for m in ms
                    if m.kind == "tcp" and m.direction == "send")
        assert sends == 2 * 200 * 8   # only this run's own traffic
    assert tags == {"alpha", "beta"}


def test_run_id_collision_gets_a_fresh_directory(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(launcher, "new_run_id", lambda: "20260101-000000-00001")
    first = Path(launcher.allocate_run_dir(None))
    second = Path(launcher.allocate_run_dir(None))
    assert first != second and second.name == "20260101-000000-00001-1"
    for run_dir in (first, second):
        assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700


def test_ipc_endpoint_is_private(program, tmp_path: Path) -> None:
    """The collector's socket lives in a 0700 directory while the run goes on."""
    script = program("peek.py", """
        import json, os, stat
        endpoint = json.loads(os.environ["DISTEA_CONFIG"])["endpoint"]
        path = endpoint[len("ipc://"):]
        folder = os.path.dirname(path)
        print(oct(stat.S_IMODE(os.stat(folder).st_mode)), stat.S_ISSOCK(os.stat(path).st_mode))
    """)
    result = subprocess.run([str(DISTEA), "run", "-q", "-o", str(tmp_path / "run"), "--",
                             PY, script.name], cwd=script.parent, capture_output=True,
                            text=True, timeout=60)
    assert result.stdout == "0o700 True\n", result.stderr
    assert not (tmp_path / "run" / "collector.ipc").exists()   # removed at the end


def test_long_run_directory_gets_a_private_socket(program, tmp_path: Path) -> None:
    """A run directory too deep for a Unix socket path still works (socket in a 0700 temp)."""
    script = program("peek.py", """
        import json, os, stat
        endpoint = json.loads(os.environ["DISTEA_CONFIG"])["endpoint"]
        folder = os.path.dirname(endpoint[len("ipc://"):])
        print(oct(stat.S_IMODE(os.stat(folder).st_mode)))
        def traced():
            pass
        traced()
    """)
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "run"
    result = subprocess.run([str(DISTEA), "run", "-q", "-o", str(deep), "--", PY, script.name],
                            cwd=script.parent, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (0, "0o700\n"), result.stderr
    data = load_run(deep)
    assert any("peek.traced" in ex for ex in data.executions.values())


assert sys.platform.startswith("linux")
