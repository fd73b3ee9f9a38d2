"""Query commands: ``impact``, ``deps``, ``explain``, ``methods``, ``show``.

Each reads one run (``--run DIR``, default the latest under ``.distea/runs``),
prints rich tables grouped by process, or with ``--json`` one JSON object
whose layout is documented in ``docs/json-output.md`` (``"schema": 1``).
Errors (missing or corrupt run, unknown name) are one line on stderr and a
non-zero exit status, never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

from distea.cli.words import command_line, count, run_failed, run_headline

if TYPE_CHECKING:
    from distea.analyzer.impact import DepsResult, Explanation, ImpactResult
    from distea.analyzer.run import Run

JSON_SCHEMA = 1


def _keep_no_relay(ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> None:
    ctx.meta["distea.no_relay"] = value


def run_option[F: Callable[..., Any]](func: F) -> F:
    func = click.option("--no-relay", "no_relay", multiple=True, metavar="ADDR",
                        expose_value=False, callback=_keep_no_relay,
                        help="Do not treat the untraced server at ADDR (as `distea show` "
                             "lists it) as a relay: its receives then order nothing.")(func)
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
    """What ``impact`` and ``deps`` share: --diff/--repo, --run/--json, --all, --verbose."""
    func = click.option("-v", "--verbose", is_flag=True,
                        help="Also print logical clocks per process and the MCov/DistIA "
                             "baselines.")(func)
    func = click.option("--all", "show_all", is_flag=True,
                        help="List every function, not the first 25 per process.")(func)
    return diff_options(run_option(func))


class QueryFailed(click.ClickException):
    """An analysis error: one line on stderr, or with ``--json`` one JSON object there.

    Scripts that asked for JSON get JSON whatever happens; the exit status
    (1) is the same either way.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        ctx = click.get_current_context(silent=True)
        self.as_json = bool(ctx is not None and ctx.params.get("as_json"))

    def show(self, file: Any = None) -> None:
        if not self.as_json:
            super().show(file)
            return
        click.echo(json.dumps({"schema": JSON_SCHEMA, "error": self.message}), err=True)


@contextmanager
def _errors() -> Iterator[None]:
    """Turn analysis errors into one clear line on stderr (click prints it, exits 1)."""
    from distea.analyzer.resolve import QueryError
    from distea.traceformat import TraceFormatError

    try:
        yield
    except (TraceFormatError, QueryError) as exc:
        raise QueryFailed(str(exc)) from None


def _load(run_dir: Path | None) -> Run:
    from distea.analyzer.run import Run
    from distea.traceformat import latest_run

    context = click.get_current_context(silent=True)
    no_relay = context.meta.get("distea.no_relay", ()) if context is not None else ()
    with _errors():
        run = Run.load(run_dir if run_dir is not None else latest_run(), no_relay)
    if run_failed(run.data.meta):
        # a failed or interrupted run is read like any other, but never silently
        click.echo(f"note: run {run.path}: {run_headline(run.data.meta)}", err=True)
    return run


PIPED_WIDTH = 400
"""Columns when stdout is not a terminal: wide enough that no name is cut or wrapped."""


def _console() -> Console:
    # markup off: names, channels and reasons are printed as they are, never parsed.
    # Piped (a file, grep, less), rich would assume 80 columns and cut names: don't.
    import sys

    width = None if sys.stdout.isatty() else PIPED_WIDTH
    return Console(highlight=False, soft_wrap=False, markup=False, width=width)


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
        "relayed": m.relayed,
        "by_kind": {
            kind: {"sends": c.sends, "recvs": c.recvs, "matched": c.matched,
                   "unmatched_sends": c.unmatched_sends, "external": c.external,
                   "ambiguous": c.ambiguous, **({"relayed": c.relayed} if c.relayed else {})}
            for kind, c in sorted(m.by_kind.items())
        },
        "relays": [
            {"address": r.address, "kind": r.kind, "protocol": r.protocol,
             "processes": r.processes, "sends": r.sends, "recvs": r.recvs,
             "bytes_sent": r.bytes_sent, "bytes_received": r.bytes_received,
             "relayed": r.relayed, "exact": r.exact, "unordered": r.unordered,
             "untimed": r.untimed,
             "disabled": r.disabled}
            for r in m.relays
        ],
    }


BLIND_SPOT_WORDS = ("not seen", "did not see", "not observed", "not traced", "unseen")
"""A problem line saying so names something the tracer could not see: every query shows it."""


def _print_problems(console: Console, run: Run, limit: int | None = 3) -> None:
    """Every blind spot (what the tracer could not see can change the answer), then up to
    ``limit`` other problems; ``distea show`` lists them all."""
    problems = run.problems
    if not problems:
        return
    if limit is None:
        shown = problems
    else:
        blind = [p for p in problems if any(word in p for word in BLIND_SPOT_WORDS)]
        others = [p for p in problems if p not in blind]
        shown = blind + others[:limit]
    console.print(f"{count(len(problems), 'problem')} in this run (nothing is dropped "
                  "silently):", style="yellow")
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


def _where(run: Run, name: str) -> str:
    """``path/file.py:LINE`` of a method, relative to the run's directory where it lies inside."""
    method = run.methods.get(name)
    if method is None:
        return ""
    cwd = str(run.data.meta.get("cwd") or "")
    path = method.file
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        path = path[len(cwd.rstrip("/")) + 1:]
    return f"{path}:{method.firstline}"


def _method_tables(
    console: Console,
    run: Run,
    groups: dict[str, list[str]],
    clocks: dict[str, int],
    clock_label: str,
    limit: int | None,
    verbose: bool,
) -> None:
    """One table per process (in start order): function, file:line; clocks with --verbose."""
    for key in _ordered_keys(run, groups):
        names = groups[key]
        ex = run.executions.get(key, {})
        heading = f"{run.label(key)} — {count(len(names), 'function')}"
        if verbose:
            heading += f", {clock_label} {clocks.get(key, '-')}"
        console.print(heading, style="bold")
        table = Table(expand=False, box=None, show_header=verbose, pad_edge=False)
        table.add_column("function", no_wrap=True)
        table.add_column("where", no_wrap=True, style="dim")
        if verbose:
            table.add_column("first", justify="right")
            table.add_column("last", justify="right")
        rows = sorted(names, key=lambda n: (ex[n].first, n) if n in ex else (0, n))
        for name in rows if limit is None else rows[:limit]:
            cells = ["  " + name, _where(run, name)]
            if verbose:
                e = ex.get(name)
                cells += [str(e.first) if e else "", str(e.last) if e else ""]
            table.add_row(*cells)
        console.print(table)
        if limit is not None and len(rows) > limit:
            console.print(f"  … {len(rows) - limit} more (--all or --json)", style="dim")


def _resolved(console: Console, queries: Sequence[str], methods: list[str]) -> None:
    """Say what the query names resolved to when that is not just the names as given."""
    if list(queries) == methods:
        return
    shown = ", ".join(methods[:8]) + (f" and {len(methods) - 8} more" if len(methods) > 8 else "")
    console.print(f"{', '.join(queries)} → {count(len(methods), 'function')}: {shown}",
                  soft_wrap=True)


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
        "unseen": [{"from": sender, "to": receiver, "channel": channel}
                   for sender, receiver, channel in res.unseen],
        "messages": _messages_json(run),
        "through_relays": [r.address for r in run.relays_carrying(res)],
        "problems": run.problems,
    }


@click.command()
@click.argument("queries", nargs=-1)
@method_set_options
def impact(queries: tuple[str, ...], diff_rev: str | None, repo: Path | None,
           run_dir: Path | None, as_json: bool, show_all: bool, verbose: bool) -> None:
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
    _resolved(console, queries, res.methods)
    functions = count(len(res.method_names), "function")
    console.print(f"a change to {_named(res.methods)} can reach {functions} in "
                  f"{count(len(res.impacted), 'process', 'processes')}", style="bold",
                  soft_wrap=True)
    if verbose:
        console.print(f"{res.size} (process, function) pairs; baselines: MCov "
                      f"{res.mcov_size}, DistIA {res.distia_size}")
    _method_tables(console, run, res.impacted, res.starts, "impact from clock",
                   None if show_all else 25, verbose)
    for sender, receiver, channel in res.unseen:
        console.print(f"safe, not precise: the impact may cross tcp {channel} from "
                      f"{run.label(sender)} to {run.label(receiver)}, where bytes moved that "
                      "the tracer did not see", style="yellow")
    for relay in run.relays_carrying(res):
        console.print(f"impact passes through {relay.label}, not observed inside "
                      "(relay rule; --no-relay " + relay.address + " turns it off)",
                      style="yellow")
    for key, path in res.shared_memory.items():
        console.print(f"{run.label(key)}: the impact arrives through shared memory {path} "
                      "(ordered by time: no store is seen)", soft_wrap=True)
    _print_problems(console, run)
    target = next((n for n in res.method_names if n not in res.methods), None)
    if target:
        _hint(console, command_line("distea", "explain", res.methods[0], target)
              + "   (why is it impacted?)")
    else:
        _hint(console, "distea deps FUNCTION   (what a function depends on)")


def _named(methods: list[str]) -> str:
    return methods[0] if len(methods) == 1 else count(len(methods), "function")


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
         run_dir: Path | None, as_json: bool, show_all: bool, verbose: bool) -> None:
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
    if not res.methods:
        console.print("no executed method matches the target")
        return
    _resolved(console, targets, res.methods)
    console.print(f"{_named(res.methods)} can depend on "
                  f"{count(len(res.method_names), 'function')} in "
                  f"{count(len(res.deps), 'process', 'processes')}", style="bold", soft_wrap=True)
    if verbose:
        console.print(f"{res.size} (process, function) pairs; baseline: MCov {res.mcov_size}")
    _method_tables(console, run, res.deps, res.ends, "up to clock", None if show_all else 25,
                   verbose)
    _print_problems(console, run)
    source = next((n for n in res.method_names if n not in res.methods), None)
    if source and res.methods:
        _hint(console, command_line("distea", "explain", source, res.methods[0])
              + "   (how it reaches the target)")


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
    _hint(console, command_line("distea", "impact", query) + "   (everything it reaches)")


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
    console.print(f"{count(len(names), 'executed function')}")
    table = Table(expand=False, box=None, pad_edge=False)
    table.add_column("function", no_wrap=True)
    table.add_column("where", no_wrap=True)
    table.add_column("processes", no_wrap=True)
    for n in names:
        roles = [run.label(k) for k in where[n]]
        table.add_row(n, _where(run, n), ", ".join(roles[:3]) + (f" +{len(roles) - 3}"
                                                                 if len(roles) > 3 else ""))
    console.print(table)
    if names:
        _hint(console, command_line("distea", "impact", names[0]))


# -- show --------------------------------------------------------------------


def _print_not_python(console: Console, run: Run) -> None:
    """Children that are no Python program: named, never traced."""
    children = run.not_python
    if not children:
        return
    table = Table(title="children that are not Python (not traced)", title_justify="left")
    for col in ("pid", "program", "started by", "command"):
        table.add_column(col, justify="right" if col == "pid" else "left")
    for child in children:
        program = Path(child.argv[0]).name if child.argv else "?"
        table.add_row(str(child.pid), program, run.label(child.parent),
                      " ".join(child.argv)[:60])
    console.print(table)


def _print_relays(console: Console, relays: list[dict[str, Any]]) -> None:
    """Untraced servers in the middle, with their traffic."""
    if not relays:
        return
    table = Table(title="untraced servers in the middle (relays: not observed inside)",
                  title_justify="left")
    for col in ("address", "protocol", "processes", "sends", "recvs", "bytes out/in",
                "relayed", "exact", "after nothing", "state"):
        table.add_column(col, justify="left" if col in ("address", "protocol", "state")
                         else "right")
    for r in relays:
        table.add_row(r["address"], r["protocol"] or "?", str(len(r["processes"])),
                      str(r["sends"]), str(r["recvs"]),
                      f"{r['bytes_sent']}/{r['bytes_received']}", str(r["relayed"]),
                      str(r["exact"]), str(r["unordered"]),
                      "off (--no-relay)" if r["disabled"] else "relay")
    console.print(table)


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
        "notes": run.notes,
        "external_reasons": dict(run.external_reasons),
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
    console.print(f"run {run.path}", style="bold", soft_wrap=True)
    console.print(f"  {run_headline(run.data.meta)}", soft_wrap=True)
    problems = run.problems
    verdict = ("complete: nothing was lost" if not problems
               else f"{count(len(problems), 'problem')}: see below")
    console.print(f"  {verdict}", style="green" if not problems else "yellow")
    table = Table(title=count(len(data["processes"]), "process", "processes"),
                  title_justify="left")
    for col in ("pid", "ppid", "role", "host", "start", "methods", "messages", "ended"):
        table.add_column(col, justify="right" if col in ("pid", "ppid", "methods",
                                                         "messages") else "left",
                         no_wrap=True)
    for p in data["processes"]:
        ended = p["end_reason"] or "no final flush (killed?)"
        table.add_row(str(p["pid"]), str(p["ppid"]), p["role"], p["host"], p["start_method"],
                      str(p["methods"]), str(p["messages"]), ended)
    console.print(table)
    msg = data["messages"]
    console.print(f"functions executed: {data['methods']} ({data['executions']} "
                  "(process, function) pairs)")
    console.print(f"messages: {msg['sends']} sends, {msg['recvs']} receives — matched "
                  f"{msg['matched']}, ambiguous {msg['ambiguous']}, external {msg['external']}, "
                  + (f"relayed {msg['relayed']}, " if msg["relayed"] else "")
                  + f"unmatched sends {msg['unmatched_sends']}")
    if msg["by_kind"]:
        kinds = Table(title="by channel kind", title_justify="left")
        for col in ("kind", "sends", "recvs", "matched", "ambiguous", "external",
                    "unmatched sends"):
            kinds.add_column(col, justify="left" if col == "kind" else "right")
        for kind, c in msg["by_kind"].items():
            kinds.add_row(kind, str(c["sends"]), str(c["recvs"]), str(c["matched"]),
                          str(c["ambiguous"]), str(c["external"]), str(c["unmatched_sends"]))
        console.print(kinds)
    _print_relays(console, msg["relays"])
    _print_not_python(console, run)
    for note in data["notes"]:
        console.print(f"  note: {note}", style="dim", soft_wrap=True)
    _print_problems(console, run, limit=None)
    _hint(console, "distea methods   |   distea impact FUNCTION")
