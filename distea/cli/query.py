"""Query commands: ``impact``, ``deps``, ``explain``, ``methods``, ``show``.

Each reads one run (``--run DIR``, default the latest under ``.distea/runs``),
prints rich tables grouped by process, or with ``--json`` one JSON object
whose layout is documented in ``docs/json-output.md`` (``"schema": 1``).
Errors (missing or corrupt run, unknown name) are one line on stderr and a
non-zero exit status, never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from distea.analyzer.impact import DepsResult, Explanation, ImpactResult
    from distea.analyzer.run import Run

JSON_SCHEMA = 1


def run_option[F: Callable[..., Any]](func: F) -> F:
    func = click.option("--json", "as_json", is_flag=True,
                        help="Print one JSON object (see docs/json-output.md).")(func)
    return click.option("--run", "run_dir", type=click.Path(path_type=Path), default=None,
                        metavar="DIR",
                        help="Run directory (default: the latest under .distea/runs).")(func)


def diff_options[F: Callable[..., Any]](func: F) -> F:
    func = click.option("--repo", type=click.Path(path_type=Path, file_okay=False),
                        default=None, help="Git work tree for --diff (default: current dir).")(func)
    return click.option("--diff", "diff_rev", metavar="REV", default=None,
                        help="Also query every executed method whose lines changed since REV "
                             "(git diff -U0 REV).")(func)


def method_set_options[F: Callable[..., Any]](func: F) -> F:
    """What ``impact`` and ``deps`` share: --diff/--repo, --run/--json, --all."""
    func = click.option("--all", "show_all", is_flag=True,
                        help="List every method, not the first 25.")(func)
    return diff_options(run_option(func))


@contextmanager
def _errors() -> Iterator[None]:
    """Turn analysis errors into one clear line on stderr (click prints it, exits 1)."""
    from distea.analyzer.order import OrderCycleError
    from distea.analyzer.resolve import QueryError
    from distea.traceformat import TraceFormatError

    try:
        yield
    except (TraceFormatError, QueryError) as exc:
        raise click.ClickException(str(exc)) from None
    except OrderCycleError as exc:
        raise click.ClickException(f"cannot order this run: {exc}") from None


def _load(run_dir: Path | None) -> Run:
    from distea.analyzer.run import Run
    from distea.traceformat import latest_run

    with _errors():
        run = Run.load(run_dir if run_dir is not None else latest_run())
        run.order  # noqa: B018 - order now so that a cycle is reported as an error here
    return run


def _console() -> Console:
    # markup off: names, channels and reasons are printed as they are, never parsed
    return Console(highlight=False, soft_wrap=False, markup=False)


def _emit_json(obj: dict[str, Any]) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False, default=str))


def _process_json(run: Run, key: str) -> dict[str, Any]:
    info = run.processes.get(key)
    if info is None:
        return {"key": key, "pid": None, "role": None, "host": None}
    return {"key": key, "pid": info.pid, "role": info.role, "host": info.host}


def _messages_json(run: Run) -> dict[str, Any]:
    m = run.matching
    return {
        "sends": m.sends,
        "recvs": m.recvs,
        "matched": m.matched,
        "unmatched": m.unmatched_sends + m.external,
        "unmatched_sends": m.unmatched_sends,
        "external": m.external,
        "ambiguous": m.ambiguous,
        "by_kind": {
            kind: {"sends": c.sends, "recvs": c.recvs, "matched": c.matched,
                   "unmatched_sends": c.unmatched_sends, "external": c.external,
                   "ambiguous": c.ambiguous}
            for kind, c in sorted(m.by_kind.items())
        },
    }


def _print_problems(console: Console, run: Run, limit: int | None = 3) -> None:
    problems = run.problems
    if not problems:
        return
    shown = problems if limit is None else problems[:limit]
    console.print(f"{len(problems)} problem(s) in this run (nothing is dropped silently):",
                  style="yellow")
    for note in shown:
        console.print(f"  • {note}", style="yellow")
    if len(shown) < len(problems):
        console.print(f"  … {len(problems) - len(shown)} more: distea show")


def _hint(console: Console, text: str) -> None:
    console.print(f"next: {text}", style="dim")


def _ordered_keys(run: Run, keys: Any) -> list[str]:
    def sort_key(k: str) -> tuple[int, int, str]:
        info = run.processes.get(k)
        return (info.started_ns, info.pid, k) if info else (0, 0, k)

    return sorted(keys, key=sort_key)


def _method_tables(
    console: Console,
    run: Run,
    groups: dict[str, list[str]],
    clocks: dict[str, int],
    clock_label: str,
    limit: int | None,
) -> None:
    for key in _ordered_keys(run, groups):
        names = groups[key]
        ex = run.executions.get(key, {})
        console.print(f"{run.label(key)} — {len(names)} method(s), {clock_label} "
                      f"{clocks.get(key, '-')}", style="bold")
        table = Table(expand=False)
        table.add_column("method")
        table.add_column("first", justify="right")
        table.add_column("last", justify="right")
        rows = sorted(names, key=lambda n: (ex[n].first, n) if n in ex else (0, n))
        for name in rows if limit is None else rows[:limit]:
            e = ex.get(name)
            table.add_row(name, str(e.first) if e else "", str(e.last) if e else "")
        if limit is not None and len(rows) > limit:
            table.caption = f"… {len(rows) - limit} more (--all or --json)"
        console.print(table)


# -- impact ------------------------------------------------------------------


def impact_json(run: Run, res: ImpactResult) -> dict[str, Any]:
    return {
        "schema": JSON_SCHEMA,
        "command": "impact",
        "run": str(run.path),
        "queries": res.queries,
        "methods": res.methods,
        "size": res.size,
        "distinct_methods": len(res.method_names),
        "baselines": {"mcov": res.mcov_size, "distia": res.distia_size},
        "processes": [
            {**_process_json(run, key), "start": res.starts[key],
             "methods": res.impacted.get(key, []),
             "shared_memory": res.shared_memory.get(key)}
            for key in _ordered_keys(run, res.starts)
        ],
        "messages": _messages_json(run),
        "problems": run.problems,
    }


@click.command()
@click.argument("queries", nargs=-1)
@method_set_options
def impact(queries: tuple[str, ...], diff_rev: str | None, repo: Path | None,
           run_dir: Path | None, as_json: bool, show_all: bool) -> None:
    """Methods, per process, that changing QUERIES could affect.

    \b
    QUERIES: pkg.mod.func, pkg.mod.Class.meth, globs (pkg.mod.*),
    path/file.py:func, path/file.py:LINE; several are a union.
    Example:  distea impact app.server.handle --diff HEAD
    """
    if not queries and diff_rev is None:
        raise click.UsageError("give at least one QUERY or --diff REV")
    run = _load(run_dir)
    with _errors():
        res = run.impact(queries, diff=diff_rev, repo=repo)
    if as_json:
        _emit_json(impact_json(run, res))
        return
    console = _console()
    if not res.methods:
        console.print("no executed method matches the query (nothing changed since "
                      f"{diff_rev}?)" if diff_rev else "no executed method matches the query")
        return
    shown = ", ".join(res.methods[:5]) + (" …" if len(res.methods) > 5 else "")
    console.print(f"impact of {shown} ({len(res.methods)} method(s)): "
                  f"{res.size} (process, method) pairs, {len(res.method_names)} "
                  f"distinct methods in {len(res.impacted)} process(es)")
    console.print(f"baselines: MCov {res.mcov_size}, DistIA {res.distia_size} "
                  f"(distea {res.size})")
    _method_tables(console, run, res.impacted, res.starts, "impact from clock",
                   None if show_all else 25)
    for key, path in res.shared_memory.items():
        console.print(f"{run.label(key)}: the impact arrives through shared memory {path} "
                      "(ordered by time: no store is seen)", soft_wrap=True)
    _print_problems(console, run)
    target = next((n for n in res.method_names if n not in res.methods), None)
    if target:
        _hint(console, f"distea explain {res.methods[0]} {target}   (why is it impacted?)")
    else:
        _hint(console, "distea deps METHOD   (what a method depends on)")


# -- deps --------------------------------------------------------------------


def deps_json(run: Run, res: DepsResult) -> dict[str, Any]:
    return {
        "schema": JSON_SCHEMA,
        "command": "deps",
        "run": str(run.path),
        "targets": res.targets,
        "methods": res.methods,
        "size": res.size,
        "distinct_methods": len(res.method_names),
        "baselines": {"mcov": res.mcov_size},
        "processes": [
            {**_process_json(run, key), "end": res.ends[key], "methods": res.deps.get(key, [])}
            for key in _ordered_keys(run, res.ends)
        ],
        "messages": _messages_json(run),
        "problems": run.problems,
    }


@click.command()
@click.argument("targets", nargs=-1)
@method_set_options
def deps(targets: tuple[str, ...], diff_rev: str | None, repo: Path | None,
         run_dir: Path | None, as_json: bool, show_all: bool) -> None:
    """Methods, per process, that TARGETS' executions may depend on (backward)."""
    if not targets and diff_rev is None:
        raise click.UsageError("give at least one TARGET or --diff REV")
    run = _load(run_dir)
    with _errors():
        res = run.deps(targets, diff=diff_rev, repo=repo)
    if as_json:
        _emit_json(deps_json(run, res))
        return
    console = _console()
    shown = ", ".join(res.methods[:5]) + (" …" if len(res.methods) > 5 else "")
    console.print(f"dependencies of {shown}: {res.size} (process, method) "
                  f"pairs, {len(res.method_names)} distinct methods in {len(res.deps)} "
                  f"process(es); MCov {res.mcov_size}")
    _method_tables(console, run, res.deps, res.ends, "up to clock", None if show_all else 25)
    _print_problems(console, run)
    source = next((n for n in res.method_names if n not in res.methods), None)
    if source and res.methods:
        _hint(console, f"distea explain {source} {res.methods[0]}   (how it reaches the target)")


# -- explain -----------------------------------------------------------------


def explain_json(run: Run, exp: Explanation) -> dict[str, Any]:
    return {
        "schema": JSON_SCHEMA,
        "command": "explain",
        "run": str(run.path),
        "query": exp.query,
        "target": exp.target,
        "process": _process_json(run, exp.process) if exp.process else None,
        "impacted": exp.impacted,
        "messages": exp.messages,
        "reason": exp.reason,
        "steps": [
            {**_process_json(run, s.process), "clock": s.clock, "action": s.action,
             "method": s.method, "detail": s.detail}
            for s in exp.steps
        ],
    }


@click.command()
@click.argument("query")
@click.argument("target")
@click.option("--process", "process", default=None, metavar="KEY|PID|ROLE",
              help="Explain the target's execution in this process only.")
@run_option
def explain(query: str, target: str, process: str | None, run_dir: Path | None,
            as_json: bool) -> None:
    """The shortest causal chain from QUERY to TARGET: methods and messages, process by
    process."""
    run = _load(run_dir)
    with _errors():
        exp = run.explain(query, target, process=process)
    if as_json:
        _emit_json(explain_json(run, exp))
        return
    console = _console()
    for key in run.processes:
        exp.reason = exp.reason.replace(key, run.label(key))
    if not exp.impacted:
        console.print(f"{exp.target} is not impacted by {query}: {exp.reason}")
        return
    console.print(f"{exp.target} is impacted by {query}: {exp.reason}")
    words = {"start": "starts", "send": "sends", "recv": "receives", "runs": "runs"}
    previous = None
    for k, s in enumerate(exp.steps, 1):
        if s.process != previous:
            console.print(run.label(s.process), style="bold")
            previous = s.process
        if s.action in ("send", "recv"):
            inside = f" (in {s.method})" if s.method else ""
            console.print(f"  {k}. clock {s.clock}: {words[s.action]} on {s.detail}{inside}",
                          soft_wrap=True)
        else:
            console.print(f"  {k}. clock {s.clock}: {s.method} {words[s.action]}",
                          soft_wrap=True)
    _hint(console, f"distea impact {query}   (everything it reaches)")


# -- methods -----------------------------------------------------------------


@click.command()
@click.argument("pattern", required=False)
@run_option
def methods(pattern: str | None, run_dir: Path | None, as_json: bool) -> None:
    """Executed methods (optionally those matching a glob PATTERN) and where they ran."""
    import fnmatch

    run = _load(run_dir)
    where: dict[str, list[str]] = {}
    for key in _ordered_keys(run, run.executions):
        for name in run.executions[key]:
            where.setdefault(name, []).append(key)
    names = sorted(n for n in where if pattern is None or fnmatch.fnmatchcase(n, pattern)
                   or pattern in n)
    if as_json:
        _emit_json({
            "schema": JSON_SCHEMA,
            "command": "methods",
            "run": str(run.path),
            "methods": [
                {"name": n, "file": run.methods[n].file if n in run.methods else None,
                 "firstline": run.methods[n].firstline if n in run.methods else None,
                 "lastline": run.methods[n].lastline if n in run.methods else None,
                 "processes": where[n]}
                for n in names
            ],
        })
        return
    console = _console()
    console.print(f"{len(names)} executed method(s)")
    table = Table(expand=True)
    table.add_column("method", overflow="fold", ratio=5)
    table.add_column("file:lines", overflow="fold", ratio=3)
    table.add_column("pids", overflow="fold", ratio=2)
    for n in names:
        m = run.methods.get(n)
        loc = f"{Path(m.file).name}:{m.firstline}-{m.lastline}" if m else ""
        pids = [str(run.processes[k].pid) if k in run.processes else k for k in where[n]]
        table.add_row(n, loc, ", ".join(pids[:4]) + (f" +{len(pids) - 4}" if len(pids) > 4
                                                      else ""))
    console.print(table)
    if names:
        _hint(console, f"distea impact {names[0]}")


# -- show --------------------------------------------------------------------


def show_json(run: Run) -> dict[str, Any]:
    procs = []
    for key in _ordered_keys(run, run.processes):
        p = run.processes[key]
        procs.append({
            "key": key, "pid": p.pid, "ppid": p.ppid, "host": p.host, "role": p.role,
            "rank": p.rank, "world_size": p.world_size, "argv": list(p.argv),
            "start_method": p.start_method, "mode": p.mode, "complete": p.complete,
            "end_reason": p.end_reason, "dropped_events": p.dropped_events,
            "tracer_errors": p.tracer_errors,
            "methods": len(run.executions.get(key, {})),
            "messages": len(run.messages.get(key, [])),
        })
    return {
        "schema": JSON_SCHEMA,
        "command": "show",
        "run": str(run.path),
        "meta": dict(run.data.meta),
        "processes": procs,
        "methods": len(run.executed),
        "executions": sum(len(ex) for ex in run.executions.values()),
        "messages": _messages_json(run),
        "untraced": [{"parent": u.parent, "pid": u.pid, "argv": list(u.argv),
                      "reason": u.reason} for u in run.data.untraced],
        "problems": run.problems,
    }


@click.command()
@run_option
def show(run_dir: Path | None, as_json: bool) -> None:
    """What a run recorded: processes, methods, messages and every problem."""
    run = _load(run_dir)
    if as_json:
        _emit_json(show_json(run))
        return
    console = _console()
    data = show_json(run)
    console.print(f"run {run.path}")
    table = Table(title=f"{len(data['processes'])} process(es)", title_justify="left")
    for col in ("pid", "ppid", "role", "host", "start", "methods", "messages", "ended"):
        table.add_column(col, justify="right" if col in ("pid", "ppid", "methods",
                                                         "messages") else "left")
    for p in data["processes"]:
        ended = p["end_reason"] or "no final flush (killed?)"
        table.add_row(str(p["pid"]), str(p["ppid"]), p["role"], p["host"], p["start_method"],
                      str(p["methods"]), str(p["messages"]), ended)
    console.print(table)
    msg = data["messages"]
    console.print(f"methods executed: {data['methods']} ({data['executions']} "
                  "(process, method) pairs = MCov)")
    console.print(f"messages: {msg['sends']} sends, {msg['recvs']} receives — matched "
                  f"{msg['matched']}, ambiguous {msg['ambiguous']}, external {msg['external']}, "
                  f"unmatched sends {msg['unmatched_sends']}")
    if msg["by_kind"]:
        kinds = Table(title="by channel kind", title_justify="left")
        for col in ("kind", "sends", "recvs", "matched", "ambiguous", "external",
                    "unmatched sends"):
            kinds.add_column(col, justify="left" if col == "kind" else "right")
        for kind, c in msg["by_kind"].items():
            kinds.add_row(kind, str(c["sends"]), str(c["recvs"]), str(c["matched"]),
                          str(c["ambiguous"]), str(c["external"]), str(c["unmatched_sends"]))
        console.print(kinds)
    _print_problems(console, run, limit=None)
    _hint(console, "distea methods   |   distea impact METHOD")
