"""``distea run``'s work without click: trace the command, then summarise.

:mod:`distea.cli.run` is the click command; this module holds what it does,
plus a parser for the common form ``distea run [OPTIONS] -- CMD`` that the
console script uses without importing click (see :mod:`distea.cli`). The
parser accepts only forms whose meaning under click is certain, and returns
None for anything else (click then parses, reports errors, prints help):
``tests/reliability/test_quick_run.py`` checks it against click.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

from distea.launcher import LaunchError, RunOutcome, TraceOptions, die_like, trace_command

TYPE_CHECKING = False  # not typing's: nothing before the command needs typing (10 ms)

if TYPE_CHECKING:
    from typing import Any

    from rich.console import Console
    from rich.tree import Tree

    from distea.model import ProcessInfo, RunData

MODES = ("compact", "full")
VALUE_OPTIONS = {
    "-o": "output", "--output": "output", "--mode": "mode", "--include": "include",
    "--exclude": "exclude", "--flush-timeout": "flush_timeout", "--connect": "connect",
    "--key": "key_file", "--connect-timeout": "connect_timeout",
}
"""Options that take a value, as ``distea.cli.run.run`` declares them."""
FLAG_OPTIONS = {"-q": "quiet", "--quiet": "quiet"}


def default_run_args() -> dict[str, Any]:
    return {"output": None, "mode": "compact", "include": (), "exclude": (),
            "flush_timeout": 10.0, "connect": None, "key_file": None,
            "connect_timeout": 10.0, "quiet": False, "command": ()}


def parse_run_args(argv: list[str]) -> dict[str, Any] | None:
    """``run``'s parameters from ``argv`` (``["run", ..., "--", CMD...]``), or None.

    None whenever click might read the line differently or has something to
    say (help, an error): no ``--`` before the command, an unknown option,
    a value that is empty or starts with ``-``, a bad number or mode, shell
    completion.
    """
    if len(argv) < 3 or argv[0] != "run" or "--" not in argv:
        return None
    if any(name.startswith("_") and name.endswith("_COMPLETE") for name in os.environ):
        return None
    end = argv.index("--")
    options, command = argv[1:end], argv[end + 1:]
    if not command:
        return None
    args = default_run_args()
    include: list[str] = []
    exclude: list[str] = []
    i = 0
    while i < len(options):
        token = options[i]
        if token in FLAG_OPTIONS:
            args[FLAG_OPTIONS[token]] = True
            i += 1
            continue
        name, eq, value = token.partition("=")
        if eq and not name.startswith("--"):
            return None  # -o=DIR: click reads "=DIR"
        if name not in VALUE_OPTIONS:
            return None
        if not eq:
            if i + 1 >= len(options):
                return None
            value = options[i + 1]
            i += 1
        i += 1
        if not value or value.startswith("-"):
            return None
        key = VALUE_OPTIONS[name]
        if key in ("flush_timeout", "connect_timeout"):
            try:
                args[key] = float(value)
            except ValueError:
                return None
        elif key == "mode":
            if value not in MODES:
                return None
            args[key] = value
        elif key in ("output", "key_file"):
            args[key] = Path(value)
        elif key == "include":
            include.append(value)
        elif key == "exclude":
            exclude.append(value)
        else:
            args[key] = value
    args["include"], args["exclude"] = tuple(include), tuple(exclude)
    args["command"] = tuple(command)
    return args


def run_quickly(args: dict[str, Any]) -> None:
    """:func:`execute` as click's standalone mode would run it (never returns).

    At the end, this process does not tear its interpreter down (about 10 ms
    with ZeroMQ loaded, all of it after the command has ended): once the
    exit handlers have run and the output is flushed, it leaves with
    ``os._exit`` and the same status, unless a thread of someone else's is
    still running (Python would wait for it).
    """
    try:
        execute(**args)
    except (EOFError, KeyboardInterrupt):
        print(file=sys.stderr)
        print("Aborted!", file=sys.stderr)
        sys.exit(1)
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115  # as click does
        sys.exit(1)
    except SystemExit as exc:
        _exit_now(exc)
        raise
    sys.exit(0)


def _exit_now(exc: SystemExit) -> None:
    """``os._exit`` with ``exc``'s status, when nothing else would run at exit."""
    import atexit
    import threading

    code = exc.code
    if code is None:
        code = 0
    if not isinstance(code, int) or threading.active_count() > 1:
        return  # Python prints a message, or waits for the thread: let it
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        return  # let the ordinary exit report it
    os._exit(code)


def execute(output: Path | None, mode: str, include: tuple[str, ...], exclude: tuple[str, ...],
            flush_timeout: float, connect: str | None, key_file: Path | None,
            connect_timeout: float, quiet: bool, command: tuple[str, ...]) -> None:
    """Trace ``command``, print the summary, exit as the command did (never returns)."""
    if (connect or key_file) and output is not None:
        print("distea: -o does not go with --connect (the collector writes the run)",
              file=sys.stderr)
        sys.exit(2)
    options = TraceOptions(mode=mode, include=include, exclude=exclude,
                           flush_timeout=flush_timeout, connect=connect, key_file=key_file,
                           connect_timeout=connect_timeout)
    try:
        outcome = trace_command(list(command), output, options)
    except LaunchError as exc:
        print(f"distea: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    if outcome.notes or not quiet:
        # only now, and only when there is something to say: the program has run,
        # and with -q rich (and the trace reader) would only delay the exit
        from rich.console import Console

        console = Console(stderr=True)
        for note in outcome.notes:
            console.print(f"[yellow]distea:[/] {note}", soft_wrap=True)
        if not quiet:
            try:
                print_summary(outcome, console)
            except Exception as exc:  # a summary must never cost the command's exit status
                console.print(f"distea: no summary ({type(exc).__name__}: {exc})",
                              soft_wrap=True)
    if outcome.signal is not None:
        die_like(outcome.signal)
    sys.exit(outcome.exit_code)


def print_summary(outcome: RunOutcome, console: Console) -> None:
    from distea.traceformat import TraceFormatError, load_run

    if outcome.run_dir is None:
        console.print(f"\n[bold]distea[/] sent this host's processes to the collector at "
                      f"{outcome.endpoint} ({outcome.duration_s:.1f}s)", soft_wrap=True)
        return
    try:
        data = load_run(outcome.run_dir)
    except TraceFormatError as exc:
        console.print(f"[red]distea: the run could not be read back: {exc}[/]")
        return
    from distea.cli.words import command_line, count

    messages = sum(len(m) for m in data.messages.values())
    methods = {name for execs in data.executions.values() for name in execs}
    console.print(
        f"\n[bold]distea[/] recorded [bold]{count(len(data.processes), 'process')}[/], "
        f"[bold]{count(len(methods), 'method')}[/], "
        f"[bold]{count(messages, 'message event')}[/] in {outcome.duration_s:.1f}s → "
        f"{outcome.run_dir}", soft_wrap=True)
    if data.processes:
        console.print(process_tree(data))
    for child in data.untraced:
        console.print(f"[yellow]untraced child[/] pid {child.pid}: {' '.join(child.argv)[:60]}"
                      f" — {child.reason}", soft_wrap=True)
    for problem in data.problems:
        console.print(f"[yellow]lost:[/] {problem}", soft_wrap=True)
    for key in outcome.still_open:
        if key not in data.processes:  # known processes are reported incomplete above
            console.print(f"[yellow]still running or unflushed at the end:[/] {key}")
    if outcome.exit_code != 0:
        console.print(f"[yellow]the command ended with exit status {outcome.exit_code}[/]")
    if not data.processes:
        _explain_empty_run(data, console)
        return
    if not methods:
        cwd = str(data.meta.get("cwd") or ".")
        console.print(f"[yellow]no function of the program ran inside the traced scope[/] "
                      f"(code under {cwd}, where distea run was started): run it from the "
                      "project's directory, or add --include 'GLOB' (a module or file glob)",
                      soft_wrap=True)
        return
    example = command_line("distea", "impact", _example_query(data))
    console.print(f"next: [cyan]{example}[/]   or   [cyan]distea show[/]", soft_wrap=True)


def _explain_empty_run(data: RunData, console: Console) -> None:
    """No process was traced: say so loudly, with the likely fix, and suggest no query."""
    console.print("[bold red]distea: no process of this command was traced[/]; "
                  "there is nothing to query.", soft_wrap=True)
    reasons = " ".join(child.reason for child in data.untraced)
    if "cannot import the tracer" in reasons:
        console.print("  The command's Python cannot import distea. `distea run` puts its "
                      "own copy on the path; if this persists, install distea into the "
                      "program's environment (`pip install distea`).", soft_wrap=True)
    elif "has no sys.monitoring" in reasons:
        console.print("  The command runs a Python older than 3.12; run it with Python "
                      "3.12 or newer.", soft_wrap=True)
    elif not data.untraced:
        console.print("  Was the command a Python program? distea traces Python 3.12+ "
                      "processes started under `distea run` (not -I or -S).", soft_wrap=True)


def process_tree(data: RunData) -> Tree:
    """Processes nested under the process that started them."""
    by_token: dict[str, str] = {}
    for key, events in data.messages.items():
        for event in events:
            if event.kind == "proc" and event.direction == "send":
                by_token[event.channel] = key
    children: dict[str | None, list[ProcessInfo]] = {}
    for info in data.processes.values():
        parent = by_token.get(info.parent_token or "")
        children.setdefault(parent, []).append(info)
    from rich.tree import Tree

    tree = Tree("run")

    def add(node: Tree, parent: str | None) -> None:
        for info in sorted(children.get(parent, []), key=lambda p: p.started_ns):
            count = len(data.executions.get(info.key, {}))
            ending = "" if info.complete else " [red](incomplete)[/]"
            branch = node.add(f"[bold]{info.role}[/] pid {info.pid} · {info.start_method} · "
                              f"{count} methods{ending}")
            add(branch, info.key)

    add(tree, None)
    return tree


def _example_query(data: RunData) -> str:
    """A query worth trying: a method that sent a message (its impact can cross
    processes), else any method that ran, else a placeholder."""
    senders = sorted(
        (event.clock, event.method)
        for events in data.messages.values() for event in events
        if event.direction == "send" and event.kind not in ("proc", "exit")
        and event.method and not event.method.endswith("<module>"))
    if senders:
        return senders[0][1]
    names = sorted({n for execs in data.executions.values() for n in execs
                    if not n.endswith("<module>")})
    return names[0] if names else min(n for execs in data.executions.values() for n in execs)
