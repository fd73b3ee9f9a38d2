"""distea's benchmarks, one command: overhead, trace size, precision, analysis scale.

    uv run python -m benchmarks              # the full suite (< 10 minutes)
    uv run python -m benchmarks --quick      # ~1-2 minutes, smaller sizes, one repetition
    uv run python -m benchmarks --only cpu --tools "untraced,distea compact" --repeats 5

Every workload runs untraced and under each tool in the same session,
interleaved and rotated (one repetition = every tool once, each repetition
starting with the next tool), so the drifts of a noisy machine hit all
alike; figures are medians of ``--repeats`` repetitions and ratios to the
untraced median. Results go to ``benchmarks/results/latest.md``
and ``latest.json`` (and ``latest.png`` with matplotlib, else ``latest.svg``).
How each tool is made to reach child processes: ``benchmarks/workloads/tools.py``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.workloads.registry import WORKLOADS, Workload
from benchmarks.workloads.timing import TIMING_ENV
from benchmarks.workloads.timing import read as read_loop_time
from benchmarks.workloads.tools import REPO, TOOLS, distea_process_sizes, tree_size

RESULTS = Path(__file__).resolve().parent / "results"
COMPILED_PACKAGES = ("distea", "benchmarks", "sample_systems")
"""Compiled to bytecode before measuring (see :func:`compile_sources`)."""


def compile_sources(root: Path = REPO, packages: tuple[str, ...] = COMPILED_PACKAGES) -> None:
    """Give the packages of this checkout (or of ``root``) their bytecode, as an
    installed wheel would have.

    uv installs dependencies with their bytecode (``compile-bytecode`` in
    pyproject.toml), but this project is an editable install: where
    ``PYTHONDONTWRITEBYTECODE`` is set, every process would compile distea's
    tracer (and the workloads) from source again, ~15 ms a process that no
    user of an installed distea pays. Untraced runs get the same bytecode.
    """
    import compileall

    for package in packages:
        if (root / package).is_dir():
            compileall.compile_dir(root / package, quiet=1)
RUN_TIMEOUT_S = 300
TARGET_DISTRIBUTED = 1.10
TARGET_CPU = 1.5
EMPTY_MODULE = "benchmarks.workloads.empty"


# -- environment ---------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "commit": commit,
    }


# -- overhead --------------------------------------------------------------------


def run_one(argv: list[str], env_extra: dict[str, str]) -> tuple[float, int, str]:
    env = dict(os.environ)
    env.pop("DISTEA_CONFIG", None)
    env.update(env_extra)
    start = time.perf_counter()
    try:
        result = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, -1, "timed out"
    elapsed = time.perf_counter() - start
    return elapsed, result.returncode, result.stderr.decode(errors="replace")[-400:]


def measure_overhead(workloads: list[Workload], tools: list[str], repeats: int, quick: bool,
                     keep: Path, log: Any) -> list[dict[str, Any]]:
    rows = []
    for workload in workloads:
        missing = workload.missing()
        if missing:
            rows.append({"workload": workload.name, "skipped": missing})
            print(f"  {workload.name}: skipped ({missing})", file=log)
            continue
        argv = workload.argv(quick)
        times: dict[str, list[float]] = {t: [] for t in tools}
        loops: dict[str, list[float]] = {t: [] for t in tools}
        errors: dict[str, str] = {}
        sizes: dict[str, Any] = {}
        for rep in range(repeats):
            last = rep == repeats - 1
            # every tool once per repetition, starting one further each time, so
            # that drifts of a noisy machine and run-after-run effects hit all alike
            shift = rep % len(tools)
            for tool_name in tools[shift:] + tools[:shift]:
                if tool_name in errors:
                    continue
                out = Path(tempfile.mkdtemp(prefix="bench-", dir=keep))
                prepared = TOOLS[tool_name].prepare(argv, out)
                timing_file = out / "loop-time.txt"
                elapsed, rc, stderr = run_one(prepared.argv,
                                              {**prepared.env, TIMING_ENV: str(timing_file)})
                loop = read_loop_time(str(timing_file))
                if rc == 0 and loop is not None:
                    loops[tool_name].append(loop)
                if rc != 0:
                    errors[tool_name] = f"exit {rc}: {stderr.strip().splitlines()[-1:]}"
                    print(f"  {workload.name} / {tool_name}: failed ({errors[tool_name]})",
                          file=log)
                else:
                    times[tool_name].append(elapsed)
                if last and rc == 0 and prepared.output is not None:
                    total, files = tree_size(prepared.output)
                    entry: dict[str, Any] = {"bytes": total, "files": files}
                    if tool_name.startswith("distea"):
                        per = distea_process_sizes(prepared.output)
                        entry.update(processes=len(per), per_process=per)
                        if tool_name == "distea compact" and workload.precision:
                            entry["run_dir"] = str(prepared.output)
                    sizes[tool_name] = entry
                if not (last and tool_name == "distea compact" and workload.precision):
                    shutil.rmtree(out, ignore_errors=True)
        medians = {t: statistics.median(v) for t, v in times.items() if v}
        base = medians.get("untraced")
        ratios = {t: m / base for t, m in medians.items()} if base else {}
        loop_medians = {t: statistics.median(v) for t, v in loops.items() if v}
        loop_base = loop_medians.get("untraced")
        row = {"workload": workload.name, "module": workload.module, "argv": argv[1:],
               "distributed": workload.distributed, "cpu_bound": workload.cpu_bound,
               "median_s": medians, "ratio": ratios, "samples_s": times,
               "loop_median_s": loop_medians, "loop_samples_s": loops,
               "loop_ratio": ({t: m / loop_base for t, m in loop_medians.items()}
                              if loop_base else None),
               "errors": errors, "sizes": sizes}
        rows.append(row)
        shown = ", ".join(f"{t} {r:.2f}x" for t, r in ratios.items() if t != "untraced")
        print(f"  {workload.name}: untraced {base or float('nan'):.2f}s; {shown}", file=log)
    return rows


def add_net_ratios(rows: list[dict[str, Any]]) -> None:
    """Ratios with each tool's fixed start-up cost taken out.

    ``net = (T_tool - E_tool) / (T_untraced - E_untraced)`` where E is the
    median wall time of the empty program under the same tool: what the tool
    costs while the program runs, without its one-time start and stop (for
    distea: the CLI, the collector, the final drain). Child processes still
    pay their own start-up inside T.
    """
    empty = next((r for r in rows if r.get("module") == EMPTY_MODULE), None)
    if not empty:
        return
    fixed = empty["median_s"]
    for row in rows:
        medians = row.get("median_s") or {}
        if row is empty or "untraced" not in medians or "untraced" not in fixed:
            continue
        base = medians["untraced"] - fixed["untraced"]
        if base <= 0:
            continue
        row["net_ratio"] = {t: max(m - fixed[t], 0.0) / base
                            for t, m in medians.items() if t in fixed}


def add_steady_ratios(rows: list[dict[str, Any]]) -> None:
    """The workload's own loop time where it reports one, else the start-up-excluded ratio."""
    for row in rows:
        if row.get("loop_ratio"):
            row["steady"], row["steady_kind"] = row["loop_ratio"], "loop"
        elif row.get("net_ratio"):
            row["steady"], row["steady_kind"] = row["net_ratio"], "start-up subtracted"


def overhead_table(rows: list[dict[str, Any]], tools: list[str], key: str = "ratio") -> str:
    traced = [t for t in tools if t != "untraced"]
    head = "| workload | untraced (s) | " + " | ".join(traced) + " | distea compact target |"
    lines = [head, "| --- | ---: | " + " | ".join("---:" for _ in traced) + " | --- |"]
    for row in rows:
        if "skipped" in row:
            lines.append(f"| {row['workload']} | skipped: {row['skipped']} |"
                         + " |" * (len(traced) + 1))
            continue
        ratios = row.get(key)
        if ratios is None:
            continue
        cells = []
        for t in traced:
            if t in row["errors"]:
                cells.append("failed")
            elif t in ratios:
                cells.append(f"{ratios[t]:.2f}x")
            else:
                cells.append("-")
        medians = row["loop_median_s"] if key == "steady" and row.get(
            "steady_kind") == "loop" else row["median_s"]
        base = medians.get("untraced")
        name = row["workload"] + (" †" if key == "steady" and row.get("steady_kind")
                                  != "loop" else "")
        lines.append(f"| {name} | {base:.2f} | " if base else f"| {name} | - | ")
        lines[-1] += " | ".join(cells) + f" | {target_verdict(row, ratios)} |"
    return "\n".join(lines)


def target_verdict(row: dict[str, Any], ratios: dict[str, float]) -> str:
    ratio = ratios.get("distea compact")
    if ratio is None:
        return "-"
    notes = []
    if row["distributed"]:
        notes.append(("met" if ratio <= TARGET_DISTRIBUTED else "missed")
                     + f" (≤ {TARGET_DISTRIBUTED:.2f}x)")
        cov = ratios.get("coverage sysmon")
        if cov is not None:
            notes.append(("below" if ratio < cov else "not below") + " coverage")
    elif row["cpu_bound"]:
        notes.append(("met" if ratio <= TARGET_CPU else "missed") + f" (≤ {TARGET_CPU:.1f}x)")
    return "; ".join(notes) or "-"


def per_item_table(rows: list[dict[str, Any]], tools: list[str]) -> str:
    """Microseconds each tool adds per loop iteration (per round trip for the loops).

    Steadier than the ratios for the message loops: the untraced round trip of
    two processes on a virtual machine ranges from tens to ~100 µs with how
    idle the CPUs are (wake-up latency), the added cost much less.
    """
    traced = [t for t in tools if t != "untraced"]
    lines = ["| workload | iterations | untraced µs/iteration | "
             + " | ".join(f"{t} +µs" for t in traced) + " |",
             "| --- | ---: | ---: | " + " | ".join("---:" for _ in traced) + " |"]
    shown = 0
    for row in rows:
        loops = row.get("loop_median_s") or {}
        argv = row.get("argv") or []
        if "untraced" not in loops or "--n" not in argv:
            continue
        n = int(argv[argv.index("--n") + 1])
        if "--rounds" in argv:
            continue  # fib: iterations are not comparable units
        base = loops["untraced"]
        cells = [f"{(loops[t] - base) / n * 1e6:.1f}" if t in loops else "-" for t in traced]
        lines.append(f"| {row['workload']} | {n} | {base / n * 1e6:.1f} | "
                     + " | ".join(cells) + " |")
        shown += 1
    return "\n".join(lines) if shown else "_no loop timings._"


def size_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| workload | processes | compact run dir | compact per process (mean) "
             "| full run dir | full per process (mean) | full / compact |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in rows:
        sizes = row.get("sizes") or {}
        compact, full = sizes.get("distea compact"), sizes.get("distea full")
        if not compact and not full:
            continue

        def fmt(entry: dict[str, Any] | None) -> tuple[str, str]:
            if not entry:
                return "-", "-"
            per = entry.get("per_process") or [0]
            return human(entry["bytes"]), human(int(statistics.mean(per)))

        c_total, c_per = fmt(compact)
        f_total, f_per = fmt(full)
        ratio = (f"{full['bytes'] / compact['bytes']:.1f}x"
                 if compact and full and compact["bytes"] else "-")
        procs = (compact or full or {}).get("processes", "-")
        lines.append(f"| {row['workload']} | {procs} | {c_total} | {c_per} | {f_total} "
                     f"| {f_per} | {ratio} |")
    return "\n".join(lines)


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


# -- precision -------------------------------------------------------------------


def measure_precision(rows: list[dict[str, Any]], log: Any) -> list[dict[str, Any]]:
    """Every executed method as a query: impact size / MCov, distea vs DistIA's rule."""
    try:
        import distea
    except ImportError as exc:  # pragma: no cover
        return [{"skipped": f"distea.load unavailable: {exc}"}]
    out = []
    for row in rows:
        run_dir = ((row.get("sizes") or {}).get("distea compact") or {}).get("run_dir")
        if not run_dir:
            continue
        try:
            run = distea.load(run_dir)
            methods = sorted(run.executed)
            exact, distia, sizes = [], [], []
            start = time.perf_counter()
            for name in methods:
                result = run.impact([name])
                if not result.mcov_size:
                    continue
                exact.append(result.size / result.mcov_size)
                distia.append(result.distia_size / result.mcov_size)
                sizes.append(result.size)
            elapsed = time.perf_counter() - start
        except Exception as exc:
            out.append({"workload": row["workload"], "skipped": f"{type(exc).__name__}: {exc}"})
            print(f"  precision {row['workload']}: {exc}", file=log)
            continue
        entry = {
            "workload": row["workload"],
            "queries": len(exact),
            "mcov_size": run.impact([methods[0]]).mcov_size if methods else 0,
            "processes": len(run.processes),
            "distea_mean_ratio": statistics.mean(exact) if exact else None,
            "distia_mean_ratio": statistics.mean(distia) if distia else None,
            "distea_mean_size": statistics.mean(sizes) if sizes else None,
            "query_seconds": elapsed,
        }
        out.append(entry)
        print(f"  precision {row['workload']}: {entry['queries']} queries, distea "
              f"{fmt_ratio(entry['distea_mean_ratio'])}, DistIA "
              f"{fmt_ratio(entry['distia_mean_ratio'])} of MCov", file=log)
    return out


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def precision_table(entries: list[dict[str, Any]]) -> str:
    lines = ["| subject | processes | queries (executed methods) | MCov size "
             "| distea / MCov | DistIA first-receipt / MCov | distea / DistIA |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for e in entries:
        if "skipped" in e:
            lines.append(f"| {e.get('workload', '?')} | skipped: {e['skipped']} | | | | | |")
            continue
        d, i = e["distea_mean_ratio"], e["distia_mean_ratio"]
        rel = f"{d / i:.3f}" if d is not None and i else "-"
        lines.append(f"| {e['workload']} | {e['processes']} | {e['queries']} | {e['mcov_size']} "
                     f"| {fmt_ratio(d)} | {fmt_ratio(i)} | {rel} |")
    return "\n".join(lines)


# -- other engineers' measurements (optional modules) ------------------------------


def optional_section(module_name: str, call: Any, log: Any) -> tuple[str, Any]:
    """Run a measurement from a module that may not exist yet; never fail the suite."""
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name in (module_name, module_name.rsplit(".", 1)[0]) or module_name in str(exc):
            return f"_not run: `{module_name}` is not there yet._", None
        raise
    try:
        data = call(module)
    except Exception as exc:
        print(f"  {module_name}: {type(exc).__name__}: {exc}", file=log)
        return f"_`{module_name}` failed: {type(exc).__name__}: {exc}_", None
    render = getattr(module, "markdown", None)
    if isinstance(data, str):
        return data, data
    if callable(render):
        try:
            return render(data), data
        except Exception:
            pass
    return generic_table(data), data


def generic_table(data: Any) -> str:
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        return f"```\n{json.dumps(data, indent=2, default=str)}\n```"
    keys = list(dict.fromkeys(k for row in data for k in row))
    lines = ["| " + " | ".join(keys) + " |", "|" + " --- |" * len(keys)]
    for row in data:
        cells = []
        for k in keys:
            v = row.get(k, "")
            cells.append(f"{v:.3g}" if isinstance(v, float) else json.dumps(v, default=str)
                         if isinstance(v, dict | list) else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def scale_call(quick: bool) -> Any:
    def call(module: Any) -> Any:
        configs = getattr(module, "QUICK" if quick else "STANDARD", None)
        return module.measure_analysis_scale(configs)

    return call


def startup_call(repeats: int, quick: bool) -> Any:
    def call(module: Any) -> Any:
        return module.measure_startup(max(repeats, 3), samples=not quick, suite=not quick)

    return call


def channels_call(repeats: int) -> Any:
    def call(module: Any) -> Any:
        return module.measure_channels(repeats)

    return call


# -- plot ----------------------------------------------------------------------


def plot(rows: list[dict[str, Any]], tools: list[str], stem: Path) -> Path | None:
    traced = [t for t in tools if t != "untraced"]
    data = [(r["workload"], [r["ratio"].get(t) for t in traced])
            for r in rows if r.get("ratio")]
    if not data or not traced:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return svg_bars(data, traced, stem.with_suffix(".svg"))
    fig, ax = plt.subplots(figsize=(11, 5))
    width = 0.8 / len(traced)
    for i, tool in enumerate(traced):
        xs = [j + i * width for j in range(len(data))]
        ax.bar(xs, [v[i] or 0 for _, v in data], width, label=tool)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(data))])
    ax.set_xticklabels([n for n, _ in data], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("wall time / untraced")
    ax.set_yscale("log")
    ax.axhline(1.0, color="black", linewidth=0.5)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = stem.with_suffix(".png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def svg_bars(data: list[tuple[str, list[float | None]]], tools: list[str], path: Path) -> Path:
    """A grouped bar chart of ratios (log scale), drawn by hand: no dependency."""
    import math

    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    values = [v for _, vs in data for v in vs if v]
    top = max(2.0, max(values, default=2.0))
    height, left, bar_w, gap = 300, 60, 14, 24
    group_w = bar_w * len(tools) + gap
    width = left + group_w * len(data) + 200

    def y(v: float) -> float:
        return 20 + height * (1 - math.log10(max(v, 1.0)) / math.log10(top))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 140}" '
           'font-family="sans-serif" font-size="10">',
           f'<text x="{left}" y="12">wall time / untraced (log scale)</text>']
    for tick in (1, 1.1, 1.5, 2, 5, 10, 20, 50, 100):
        if tick <= top:
            out.append(f'<line x1="{left}" x2="{left + group_w * len(data)}" y1="{y(tick):.1f}" '
                       f'y2="{y(tick):.1f}" stroke="#ddd"/><text x="{left - 30}" '
                       f'y="{y(tick) + 3:.1f}">{tick}x</text>')
    for g, (name, vs) in enumerate(data):
        x0 = left + g * group_w
        for i, v in enumerate(vs):
            if v:
                out.append(f'<rect x="{x0 + i * bar_w}" y="{y(v):.1f}" width="{bar_w - 2}" '
                           f'height="{20 + height - y(v):.1f}" fill="{colors[i % 6]}">'
                           f'<title>{tools[i]}: {v:.2f}x</title></rect>')
        out.append(f'<text transform="translate({x0 + 4},{height + 28}) rotate(30)">'
                   f'{name[:34]}</text>')
    for i, tool in enumerate(tools):
        lx = left + group_w * len(data) + 20
        out.append(f'<rect x="{lx}" y="{30 + i * 16}" width="10" height="10" '
                   f'fill="{colors[i % 6]}"/><text x="{lx + 14}" y="{39 + i * 16}">{tool}</text>')
    out.append("</svg>")
    path.write_text("\n".join(out))
    return path


# -- main ------------------------------------------------------------------------


def select_workloads(only: list[str]) -> list[Workload]:
    if not only:
        return list(WORKLOADS)
    chosen = [w for w in WORKLOADS
              if any(o in w.module.rsplit(".", 1)[-1] or o.lower() in w.name.lower()
                     for o in only)]
    if not chosen:
        raise SystemExit(f"no workload matches {only}; known: "
                         + ", ".join(w.module.rsplit('.', 1)[-1] for w in WORKLOADS))
    empty = next(w for w in WORKLOADS if w.module == EMPTY_MODULE)
    if empty not in chosen and any(w.distributed for w in chosen):
        chosen.insert(0, empty)  # the samples' start-up-excluded ratios need it
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="smaller sizes, one repetition, quick analysis scale (~1-2 min)")
    parser.add_argument("--repeats", type=int, help="repetitions per measurement "
                        "(default 3, or 1 with --quick)")
    parser.add_argument("--only", action="append", default=[], metavar="WORKLOAD",
                        help="run only workloads whose module or name contains this "
                             "(repeatable): " + ", ".join(w.module.rsplit(".", 1)[-1]
                                                          for w in WORKLOADS))
    parser.add_argument("--tools", help="comma-separated subset of: " + ", ".join(TOOLS))
    parser.add_argument("--no-precision", action="store_true")
    parser.add_argument("--no-scale", action="store_true", help="skip analysis scale")
    parser.add_argument("--no-channels", action="store_true", help="skip channel costs")
    parser.add_argument("--no-startup", action="store_true",
                        help="skip the start-up section (per-process and distea run costs)")
    parser.add_argument("--out", type=Path, default=RESULTS,
                        help="where latest.md/json/png go (default benchmarks/results)")
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    tools = [t.strip() for t in args.tools.split(",")] if args.tools else list(TOOLS)
    unknown = [t for t in tools if t not in TOOLS]
    if unknown:
        parser.error(f"unknown tools {unknown}; known: {', '.join(TOOLS)}")
    if "untraced" not in tools:
        tools.insert(0, "untraced")
    for name in list(tools):
        why = TOOLS[name].available()
        if why:
            print(f"{name}: skipped ({why})", file=sys.stderr)
            tools.remove(name)
    workloads = select_workloads(args.only)
    log = sys.stderr
    compile_sources()
    began = time.perf_counter()
    env = machine()
    print(f"benchmarks: {len(workloads)} workloads x {len(tools)} tools x {repeats} "
          f"repetitions{' (quick)' if args.quick else ''}", file=log)

    keep = Path(tempfile.mkdtemp(prefix="distea-bench-"))
    try:
        rows = measure_overhead(workloads, tools, repeats, args.quick, keep, log)
        add_net_ratios(rows)
        add_steady_ratios(rows)
        precision = ([] if args.no_precision else measure_precision(rows, log))
    finally:
        shutil.rmtree(keep, ignore_errors=True)
    scale_md, scale_data = ("_skipped (--no-scale)._", None) if args.no_scale else \
        optional_section("benchmarks.analysis_scale", scale_call(args.quick), log)
    chan_md, chan_data = ("_skipped (--no-channels)._", None) if args.no_channels else \
        optional_section("benchmarks.channels", channels_call(repeats), log)
    start_md, start_data = ("_skipped (--no-startup)._", None) if args.no_startup else \
        optional_section("benchmarks.startup", startup_call(repeats, args.quick), log)
    elapsed = time.perf_counter() - began

    md = [
        "## Run-time overhead (wall time traced / untraced, median of "
        f"{repeats}{', quick sizes' if args.quick else ''})",
        "",
        overhead_table(rows, tools),
        "",
        "Steady state: the workload's own timing of its main loop (client side for the "
        "two-process loops), free of interpreter and tool start-up and shutdown; † the "
        "samples time nothing themselves: their wall time minus each tool's empty-program "
        "time, on both sides (child processes still pay their own start-up). Untraced "
        "column: seconds of that loop.",
        "",
        overhead_table(rows, tools, "steady"),
        "",
        "Added cost per loop iteration (steady state; per round trip for the two-process "
        "loops):",
        "",
        per_item_table(rows, tools),
        "",
        f"{env['date']}; {env['nproc']} CPUs ({env['cpu']}); Python {env['python']}; "
        f"commit {env['commit'] or '?'}; suite took {elapsed:.0f} s. "
        "Commands: `uv run python -m benchmarks"
        f"{' --quick' if args.quick else ''}`; how each tool reaches child processes: "
        "`benchmarks/workloads/tools.py`.",
        "",
        "## Trace size (bytes of the run directory, last repetition)",
        "",
        size_table(rows),
        "",
        "## Precision (every executed method as a query; mean impact-set size / MCov)",
        "",
        precision_table(precision) if precision else "_not measured._",
        "",
        "## Analysis scale",
        "",
        scale_md,
        "",
        "## Channel costs",
        "",
        chan_md,
        "",
        "## Start-up (CPU and wall time; `python -m benchmarks.startup`)",
        "",
        start_md,
        "",
    ]
    text = "\n".join(md)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.md").write_text(text)
    for row in rows:  # run dirs are gone; keep the JSON free of dead paths
        for entry in (row.get("sizes") or {}).values():
            entry.pop("run_dir", None)
    (args.out / "latest.json").write_text(json.dumps({
        "machine": env, "quick": args.quick, "repeats": repeats, "tools": tools,
        "elapsed_s": elapsed, "overhead": rows, "precision": precision,
        "analysis_scale": scale_data, "channels": chan_data, "startup": start_data,
    }, indent=2, default=str))
    figure = plot(rows, tools, args.out / "latest")
    print(text)
    print(f"saved {args.out / 'latest.md'}, {args.out / 'latest.json'}"
          + (f", {figure}" if figure else ""), file=log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
