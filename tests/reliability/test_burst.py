"""A burst of 10^6 events and 10^5 messages: no deadlock, bounded memory on both sides."""

from __future__ import annotations

import json
import time
from pathlib import Path

from distea.traceformat import load_run
from tests.reliability.helpers import BURST, PY, PeakWatcher, burst_hwm, running, start_distea
from tests.tracing import run_untraced

CALLS, MESSAGES = 500_000, 100_000
"""--mode full: 10^6 CALL/RETURN records; 10^5 sends and 10^5 receives."""
TRACED_SLACK_KIB = 64 * 1024
COLLECTOR_LIMIT_KIB = 256 * 1024


def test_burst_bounded_memory(program, tmp_path: Path, record_property) -> None:
    script = program("burst.py", BURST)
    args = [PY, script.name, str(CALLS), str(MESSAGES)]
    plain = run_untraced(args, script.parent, timeout=60)
    run_dir = tmp_path / "run"
    started = time.monotonic()
    proc = start_distea(["run", "-q", "-o", str(run_dir), "--mode", "full", "--", *args],
                        script.parent)
    with running(proc):
        collector = PeakWatcher(proc.pid)
        out, err = proc.communicate(timeout=50)
        collector_peak = collector.stop()
    elapsed = time.monotonic() - started
    assert proc.returncode == 7, err
    assert out == plain.stdout == f"done {CALLS} {MESSAGES}\n"
    _, plain_peak, plain_s = burst_hwm(plain.stderr)
    _, traced_peak, traced_s = burst_hwm(err)

    data = load_run(run_dir)
    (info,) = data.processes.values()
    calls = len(data.calls[info.key])
    messages = len(data.messages[info.key])
    meta = json.loads((run_dir / "run.json").read_text())
    report = {
        "untraced_peak_rss_kib": plain_peak, "traced_peak_rss_kib": traced_peak,
        "collector_peak_rss_kib": collector_peak, "burst_untraced_s": plain_s,
        "burst_traced_s": traced_s, "distea_run_s": round(elapsed, 2),
        "call_events": calls, "message_events": messages,
        "dropped": info.dropped_events, "batches": meta["collector"]["batches"],
    }
    for key, value in report.items():
        record_property(key, value)
    print("\nburst:", json.dumps(report))
    assert traced_peak - plain_peak < TRACED_SLACK_KIB
    assert 0 < collector_peak < COLLECTOR_LIMIT_KIB
    assert info.complete
    # every event is either recorded or counted as dropped, and the run says so
    assert calls + info.dropped_events >= 2 * CALLS
    assert messages + info.dropped_events >= 2 * MESSAGES
    if info.dropped_events:
        assert any("dropped" in p for p in data.problems)
    assert elapsed < 45
