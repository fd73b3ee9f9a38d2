"""The collector stuck, killed or gone: the program runs on unchanged, memory stays
bounded, and every lost record is counted where the user will see it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from distea.launcher import tracer_environment
from distea.rundir import create_run_dir, write_run_meta
from distea.traceformat import load_run
from distea.tracer.config import TracerConfig
from tests.reliability.helpers import (
    BURST,
    PY,
    burst_hwm,
    process_state,
    running,
    start_distea,
    wait_for,
)
from tests.tracing import run_untraced

CALLS, MESSAGES = 300_000, 50_000
"""Full mode: 600k CALL/RETURN records plus 100k message records."""
MEMORY_SLACK_KIB = 64 * 1024
"""What the tracer may add to the program's peak RSS, whatever the collector does."""


def finished_run(tmp_path: Path, endpoint: str) -> tuple[Path, dict[str, str]]:
    run_dir = create_run_dir(tmp_path / "old-run")
    write_run_meta(run_dir, {"run_id": "old-run", "command": ["x"], "started_at": 0,
                             "finished_at": 1, "collector": {"problems": []}})
    config = TracerConfig(run_dir=str(run_dir), endpoint=endpoint, mode="full",
                          root=str(tmp_path / "app"))
    return run_dir, tracer_environment(config, dict(os.environ))


def test_dead_collector_socket_bounded_memory_and_lost_note(program, tmp_path: Path) -> None:
    """The socket file is there but nobody listens (the collector was killed)."""
    script = program("burst.py", BURST)
    stale = tmp_path / "collector.ipc"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(stale))
    listener.close()                                # the file stays; connects are refused
    run_dir, env = finished_run(tmp_path, f"ipc://{stale}")
    args = [PY, script.name, str(CALLS), str(MESSAGES)]
    plain = run_untraced(args, script.parent)
    started = time.monotonic()
    traced = subprocess.run(args, cwd=script.parent, env=env, capture_output=True, text=True,
                            timeout=120)
    elapsed = time.monotonic() - started
    assert (traced.returncode, traced.stdout) == (plain.returncode, plain.stdout) == (
        7, f"done {CALLS} {MESSAGES}\n")
    _, plain_peak, plain_s = burst_hwm(plain.stderr)
    _, traced_peak, traced_s = burst_hwm(traced.stderr)
    print(f"\npeak RSS untraced {plain_peak} KiB, traced with a dead collector "
          f"{traced_peak} KiB; burst {plain_s:.2f}s vs {traced_s:.2f}s; exit after "
          f"{elapsed - traced_s:.2f}s")
    assert traced_peak - plain_peak < MEMORY_SLACK_KIB
    assert elapsed - traced_s < 10  # start-up plus a bounded wait at exit
    (note_file,) = (run_dir / "lost").glob("*.json")
    note = json.loads(note_file.read_text())
    assert note["dropped_records"] > CALLS  # most of the burst could not be queued
    assert note["end_reason"] == "exit"
    problems = load_run(run_dir).problems
    assert any("dropped" in p and "nothing of it reached the run" in p for p in problems), \
        problems


def test_finished_run_environment_is_not_traced(program, tmp_path: Path) -> None:
    """A program started with the environment of a run that has ended runs untraced."""
    script = program("burst.py", BURST)
    run_dir, env = finished_run(tmp_path, f"ipc://{tmp_path / 'gone.ipc'}")
    args = [PY, script.name, "1000", "10"]
    traced = subprocess.run(args, cwd=script.parent, env=env, capture_output=True, text=True,
                            timeout=60)
    assert (traced.returncode, traced.stdout) == (7, "done 1000 10\n")
    data = load_run(run_dir)
    assert not data.processes
    (child,) = data.untraced
    assert "collector is gone" in child.reason


def test_stuck_collector(program, tmp_path: Path) -> None:
    """`distea run` stopped (SIGSTOP) through the burst: drops counted, nothing blocks."""
    script = program("burst.py", BURST)
    gate = tmp_path / "gate"
    run_dir = tmp_path / "run"
    proc = start_distea(["run", "-q", "-o", str(run_dir), "--mode", "full", "--",
                         PY, script.name, str(CALLS), str(MESSAGES), str(gate)], script.parent)
    with running(proc):
        ready = Path(str(gate) + ".ready")
        wait_for(lambda: ready.exists() and ready.read_text() != "", what="program start")
        pid = int(ready.read_text())
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            gate.touch()
            # the program finishes on its own while its collector cannot read a byte
            wait_for(lambda: process_state(pid) in ("Z", None), timeout=60,
                     what="the traced program to exit")
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 7, err
    assert out == f"done {CALLS} {MESSAGES}\n"
    _, _, burst_s = burst_hwm(err)
    data = load_run(run_dir)
    (info,) = data.processes.values()
    calls = len(data.calls.get(info.key, []))
    lost_notes = list((run_dir / "lost").glob("*.json"))
    assert lost_notes, "a process that dropped records leaves a note"
    note = json.loads(lost_notes[0].read_text())
    print(f"\nstuck collector: {calls} call events kept, {note['dropped_records']} records "
          f"dropped, up to {note['undelivered_records']} undelivered; burst {burst_s:.2f}s")
    assert note["dropped_records"] > 0
    assert calls < 2 * CALLS
    assert any(f"process {info.pid} " in p and "dropped" in p for p in data.problems), \
        data.problems


def test_collector_killed_mid_run(program, tmp_path: Path) -> None:
    """`distea run` SIGKILLed: the program runs to its end; the run says it never finished."""
    script = program("burst.py", BURST)
    gate = tmp_path / "gate"
    run_dir = tmp_path / "run"
    proc = start_distea(["run", "-q", "-o", str(run_dir), "--",
                         PY, script.name, "20000", "20000", str(gate)], script.parent)
    with running(proc):
        ready = Path(str(gate) + ".ready")
        wait_for(lambda: ready.exists() and ready.read_text() != "", what="program start")
        pid = int(ready.read_text())
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        gate.touch()
        out, err = proc.communicate(timeout=60)  # EOF once the orphaned program is done
        wait_for(lambda: process_state(pid) in ("Z", None), timeout=30, what="program exit")
    assert out == "done 20000 20000\n"
    assert "Traceback" not in err
    data = load_run(run_dir)
    assert any("never finished" in p for p in data.problems), data.problems
    (info,) = data.processes.values()
    assert not info.complete
    # the orphan could not deliver its end: it said so in lost/
    wait_for(lambda: any((run_dir / "lost").glob("*.json")), timeout=10, what="lost note")
    data = load_run(run_dir)
    assert any(f"process {info.pid} " in p and "likely lost" in p for p in data.problems) or \
        any(f"process {info.pid} " in p and "dropped" in p for p in data.problems), data.problems
