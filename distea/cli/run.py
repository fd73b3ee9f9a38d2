"""``distea run -- CMD``: record a run, then summarise what was recorded."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from distea.launcher import LaunchError, RunOutcome, TraceOptions, die_like, trace_command

if TYPE_CHECKING:
    from rich.console import Console
    from rich.tree import Tree

    from distea.model import ProcessInfo, RunData


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help="Run directory to write (default: .distea/runs/<id>).")
@click.option("--mode", type=click.Choice(["compact", "full"]), default="compact",
              show_default=True,
              help="compact: first/last clock per method; full: every entry and exit too.")
@click.option("--include", multiple=True, metavar="GLOB",
              help="Also trace modules or files matching GLOB (repeatable).")
@click.option("--exclude", multiple=True, metavar="GLOB",
              help="Do not trace modules or files matching GLOB (repeatable).")
@click.option("--flush-timeout", type=float, default=10.0, show_default=True,
              help="Seconds to wait after the command for processes still flushing.")
@click.option("--connect", metavar="tcp://HOST:PORT",
              help="Write to a `distea collect` on another host instead of a local run.")
@click.option("--key", "key_file", type=click.Path(path_type=Path), metavar="FILE",
              help="Client key file written by `distea collect` (with --connect).")
@click.option("--connect-timeout", type=float, default=10.0, show_default=True,
              help="Seconds to wait for the collector's handshake (with --connect).")
@click.option("-q", "--quiet", is_flag=True, help="Print no summary.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(output: Path | None, mode: str, include: tuple[str, ...], exclude: tuple[str, ...],
        flush_timeout: float, connect: str | None, key_file: Path | None,
        connect_timeout: float, quiet: bool, command: tuple[str, ...]) -> None:
    """Run COMMAND with every Python process it starts traced.

    \b
    Example:
      distea run -- python app.py --port 0
      distea run --connect tcp://node0:5555 --key run.key -- python worker.py
    The command's output and exit status are its own; the summary goes to stderr.
    """
    if (connect or key_file) and output is not None:
        click.echo("distea: -o does not go with --connect (the collector writes the run)",
                   err=True)
        sys.exit(2)
    options = TraceOptions(mode=mode, include=include, exclude=exclude,
                           flush_timeout=flush_timeout, connect=connect, key_file=key_file,
                           connect_timeout=connect_timeout)
    try:
        outcome = trace_command(list(command), output, options)
    except LaunchError as exc:
        click.echo(f"distea: {exc}", err=True)
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
    messages = sum(len(m) for m in data.messages.values())
    methods = {name for execs in data.executions.values() for name in execs}
    console.print(
        f"\n[bold]distea[/] recorded [bold]{len(data.processes)}[/] processes, "
        f"[bold]{len(methods)}[/] methods, [bold]{messages}[/] message events "
        f"in {outcome.duration_s:.1f}s → {outcome.run_dir}"
    )
    console.print(process_tree(data))
    for child in data.untraced:
        console.print(f"[yellow]untraced child[/] pid {child.pid}: {' '.join(child.argv)[:60]}"
                      f" — {child.reason}")
    for problem in data.problems:
        console.print(f"[yellow]lost:[/] {problem}", soft_wrap=True)
    for key in outcome.still_open:
        if key not in data.processes:  # known processes are reported incomplete above
            console.print(f"[yellow]still running or unflushed at the end:[/] {key}")
    example = _example_query(data)
    console.print(f"next: [cyan]distea impact {example}[/]   or   [cyan]distea show[/]")


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
    return names[0] if names else "module.function"
