"""Microbenchmarks of the tracer hot path, in one process, no collector.

    uv run python -m benchmarks.workloads.hotpath [--repeats 7] [--json PATH]

Runs the same in-process workloads untraced, under the baseline monitor
(``benchmarks/workloads/monitor_baseline.py``: ``restart_events()`` at every
epoch, bound-method callbacks) and under ``distea.tracer.monitor`` (per-code
re-arming with ``set_local_events``, closures), and prints medians and
ratios. Also measures the primitives: the cost of one callback (empty
closure, closure doing the compact bookkeeping, bound method doing the same),
of ``restart_events()`` with the lazy re-instrumentation it causes, and of
re-arming one code object with two ``set_local_events`` calls.

Epochs are simulated as the session does at a receive: ``clock.tick()``
then ``monitor.new_epoch()``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.workloads import calls, cpu, monitor_baseline, tcp_loop
from distea.tracer import monitor as current_monitor
from distea.tracer.clock import LogicalClock
from distea.tracer.scope import Scope

MONITOR = sys.monitoring
ROOT = str(Path(__file__).resolve().parent)

Workload = Callable[[Any, LogicalClock | None], None]


def fib_workload(monitor: Any, clock: LogicalClock | None) -> None:
    cpu.fib(24)


def calls_workload(monitor: Any, clock: LogicalClock | None) -> None:
    scale = calls.make_scaler(0.5)
    for i in range(20_000):
        calls.step(i, scale)


def epochs_workload(monitor: Any, clock: LogicalClock | None) -> None:
    """A server loop: a receive (new epoch), then a few in-scope calls and some stdlib."""
    for i in range(5_000):
        if clock is not None:
            clock.tick()
            monitor.new_epoch()
        request = tcp_loop.encode_request(i)
        json.loads(json.dumps({"r": tcp_loop.handle(request).decode()}))


def epochs_many_codes_workload(monitor: Any, clock: LogicalClock | None) -> None:
    """Epochs with a call-heavy body: 40 calls of ~10 in-scope code objects per epoch."""
    scale = calls.make_scaler(0.5)
    for i in range(2_000):
        if clock is not None:
            clock.tick()
            monitor.new_epoch()
        for j in range(10):
            calls.step(i * 10 + j, scale)


WORKLOADS: dict[str, Workload] = {
    "fib(24)": fib_workload,
    "calls x20k": calls_workload,
    "5k epochs, small body": epochs_workload,
    "2k epochs, call-heavy body": epochs_many_codes_workload,
}

class DisableAtOnceMonitor(current_monitor.Monitor):
    """Per-code re-arming, but every local callback disables its location at once.

    The variant before the "second sighting at the same clock" rule: code
    that runs once per epoch is then re-armed at every epoch.
    """

    def _compact_callbacks(self) -> dict[int, Callable[..., Any]]:
        callbacks = super()._compact_callbacks()
        states_get = self.states.get
        clock = self.clock
        dirty_append = self.dirty_states.append
        rearm_append = self.to_rearm.append
        first_start = self._first_start
        disable = current_monitor.DISABLE

        def seen(code: Any, offset: int, value: object = None) -> Any:
            state = states_get(id(code))
            if state.last < 0:
                first_start(state)
            elif state.last != clock.value:
                state.last = clock.value
                if not state.dirty:
                    state.dirty = True
                    dirty_append(state)
            if state.armed:
                state.armed = False
                rearm_append(state)
            return disable

        events = MONITOR.events
        callbacks.update({events.PY_RESUME: seen, events.PY_RETURN: seen,
                          events.PY_YIELD: seen})
        return callbacks


class NeverDisableMonitor(current_monitor.Monitor):
    """Local events never disabled: no re-arming at all, one callback per event."""

    def _compact_callbacks(self) -> dict[int, Callable[..., Any]]:
        callbacks = super()._compact_callbacks()
        states_get = self.states.get
        clock = self.clock
        dirty_append = self.dirty_states.append
        first_start = self._first_start

        def seen(code: Any, offset: int, value: object = None) -> Any:
            state = states_get(id(code))
            if state.last < 0:
                first_start(state)
            elif state.last != clock.value:
                state.last = clock.value
                if not state.dirty:
                    state.dirty = True
                    dirty_append(state)
            return None

        events = MONITOR.events
        callbacks.update({events.PY_RESUME: seen, events.PY_RETURN: seen,
                          events.PY_YIELD: seen})
        return callbacks


STRATEGIES: dict[str, Any] = {
    "untraced": None,
    "A: restart_events per epoch (baseline)": monitor_baseline.Monitor,
    "B: set_local_events per code, DISABLE at once": DisableAtOnceMonitor,
    "C: local events, never DISABLE": NeverDisableMonitor,
    "D: set_local_events per code, DISABLE at 2nd sighting (distea)": current_monitor.Monitor,
}


def run_once(workload: Workload, monitor_class: Any, full: bool = False) -> float:
    # a previous run's DISABLEs outlive its tool id: start every run clean
    MONITOR.restart_events()
    if monitor_class is None:
        # the first run after a traced one pays for removing the instrumentation
        # (~10% of a short workload): not a cost of running untraced
        workload(None, None)
        start = time.perf_counter()
        workload(None, None)
        return time.perf_counter() - start
    clock = LogicalClock()
    records: list[Any] = []
    monitor = monitor_class(Scope(ROOT), clock, records.append, full=full)
    monitor.start()
    try:
        start = time.perf_counter()
        workload(monitor, clock)
        return time.perf_counter() - start
    finally:
        monitor.stop()


def measure_strategies(repeats: int) -> list[dict[str, Any]]:
    rows = []
    for name, workload in WORKLOADS.items():
        times: dict[str, list[float]] = {s: [] for s in STRATEGIES}
        order = list(STRATEGIES.items())
        for cls in STRATEGIES.values():  # warm-up: imports, caches, specialisation
            run_once(workload, cls)
        for rep in range(repeats):
            # interleaved and rotated, so drifts of a noisy machine hit all alike
            for strategy, cls in order[rep % len(order):] + order[:rep % len(order)]:
                times[strategy].append(run_once(workload, cls))
        medians = {s: statistics.median(t) for s, t in times.items()}
        base = medians["untraced"]
        rows.append({"workload": name, "median_s": medians,
                     "ratio": {s: m / base for s, m in medians.items()}})
    return rows


# -- primitives ------------------------------------------------------------------


def _target(x: int) -> int:
    return x


def callback_costs(n: int = 200_000, repeats: int = 5) -> dict[str, float]:
    """ns per PY_START+PY_RETURN pair for callbacks that never disable."""
    tool = current_monitor.claim_tool_id()
    events = MONITOR.events
    state = {"last": -1, "dirty": False}

    class Holder:
        def __init__(self) -> None:
            self.clock = LogicalClock()
            self.states = {id(_target.__code__): state}

        def start(self, code: Any, offset: int) -> Any:
            s = self.states.get(id(code))
            if s is not None and s["last"] != self.clock.value:
                s["last"] = self.clock.value
            return None

        def ret(self, code: Any, offset: int, value: object) -> Any:
            return self.start(code, offset)

    holder = Holder()
    states_get = holder.states.get
    clock = holder.clock

    def c_start(code: Any, offset: int) -> Any:
        s = states_get(id(code))
        if s is not None and s["last"] != clock.value:
            s["last"] = clock.value
        return None

    def c_ret(code: Any, offset: int, value: object) -> Any:
        s = states_get(id(code))
        if s is not None and s["last"] != clock.value:
            s["last"] = clock.value
        return None

    def e_start(code: Any, offset: int) -> Any:
        return None

    def e_ret(code: Any, offset: int, value: object) -> Any:
        return None

    variants = {
        "no callback": None,
        "empty closure": (e_start, e_ret),
        "closure, compact bookkeeping": (c_start, c_ret),
        "bound method, same bookkeeping": (holder.start, holder.ret),
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    try:
        for _ in range(repeats):
            for name, pair in variants.items():
                if pair is not None:
                    MONITOR.register_callback(tool, events.PY_START, pair[0])
                    MONITOR.register_callback(tool, events.PY_RETURN, pair[1])
                    MONITOR.set_local_events(tool, _target.__code__,
                                             events.PY_START | events.PY_RETURN)
                start = time.perf_counter()
                for i in range(n):
                    _target(i)
                samples[name].append(time.perf_counter() - start)
                MONITOR.set_local_events(tool, _target.__code__, 0)
        out = {name: statistics.median(t) / n * 1e9 for name, t in samples.items()}
    finally:
        MONITOR.register_callback(tool, events.PY_START, None)
        MONITOR.register_callback(tool, events.PY_RETURN, None)
        MONITOR.free_tool_id(tool)
    base = out.pop("no callback")
    return {name: cost - base for name, cost in out.items()}


def epoch_costs(rows: list[dict[str, Any]]) -> dict[str, float]:
    """µs per epoch, from the "small body" workload: (traced - untraced) / epochs.

    Each epoch runs the same small body (a few in-scope functions and some
    stdlib), so a restart_events() figure includes the lazy
    re-instrumentation and the re-fired, re-disabled out-of-scope callbacks
    it causes.
    """
    row = next(r for r in rows if r["workload"] == "5k epochs, small body")
    base = row["median_s"]["untraced"]
    return {name: (t - base) / 5_000 * 1e6 for name, t in row["median_s"].items()
            if name != "untraced"}


def primitive_costs(n: int = 20_000) -> dict[str, float]:
    """µs per call of the re-arming primitives themselves."""
    tool = current_monitor.claim_tool_id()
    code = tcp_loop.handle.__code__
    local = current_monitor.LOCAL_EVENTS
    try:
        start = time.perf_counter()
        for _ in range(n):
            MONITOR.restart_events()
        restart = (time.perf_counter() - start) / n * 1e6
        start = time.perf_counter()
        for _ in range(n):
            MONITOR.set_local_events(tool, code, 0)
            MONITOR.set_local_events(tool, code, local)
        toggle = (time.perf_counter() - start) / n * 1e6
        MONITOR.set_local_events(tool, code, 0)
    finally:
        MONITOR.free_tool_id(tool)
    return {"restart_events() alone": restart,
            "set_local_events off+on, one code": toggle}


def render(rows: list[dict[str, Any]], callbacks: dict[str, float],
           epochs: dict[str, float], primitives: dict[str, float]) -> str:
    names = list(STRATEGIES)[1:]
    lines = ["| workload (in-process) | untraced ms | " + " | ".join(names) + " |",
             "| --- | ---: | " + " | ".join("---:" for _ in names) + " |"]
    for row in rows:
        cells = [f"{row['ratio'][n]:.2f}x" for n in names]
        lines.append(f"| {row['workload']} | {row['median_s']['untraced'] * 1e3:.1f} | "
                     + " | ".join(cells) + " |")
    lines += ["", "| per-event cost (PY_START + PY_RETURN pair) | ns |", "| --- | ---: |"]
    lines += [f"| {k} | {v:.0f} |" for k, v in callbacks.items()]
    lines += ["", "| cost of one epoch (small server body), overhead included | µs |",
              "| --- | ---: |"]
    lines += [f"| {k} | {v:.2f} |" for k, v in epochs.items()]
    lines += ["", "| primitive | µs per call |", "| --- | ---: |"]
    lines += [f"| {k} | {v:.2f} |" for k, v in primitives.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    rows = measure_strategies(args.repeats)
    callbacks = callback_costs(repeats=args.repeats)
    epochs = epoch_costs(rows)
    primitives = primitive_costs()
    print(f"Python {sys.version.split()[0]}, median of {args.repeats}\n")
    print(render(rows, callbacks, epochs, primitives))
    if args.json:
        args.json.write_text(json.dumps({"strategies": rows, "callbacks_ns": callbacks,
                                         "epoch_us": epochs, "primitives_us": primitives},
                                        indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
