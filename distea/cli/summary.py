"""What ``distea run`` prints when the command has ended: what was recorded, what was not.

Printed with a few ANSI styles of its own, not with rich: the summary is
printed after the command, on every run, and rich's console alone costs
tens of milliseconds to import (more than the rest of ``distea run``). The
words, the process tree and the styles (bold, yellow, red, cyan) are those
the rich console printed; styles only where a person reads them.
"""

from __future__ import annotations

import os

from distea.cli.words import command_line, count

TYPE_CHECKING = False  # not typing's: this module runs after the command, on every run
if TYPE_CHECKING:
    from typing import TextIO

    from distea.launcher import RunOutcome
    from distea.model import ProcessInfo, RunData

STYLES = {"bold": "1", "red": "31", "yellow": "33", "cyan": "36"}
BRANCH, LAST_BRANCH, GUIDE, SPACE = "├── ", "└── ", "│   ", "    "
"""The process tree's guides, as rich's tree draws them."""


class Terminal:
    """Whole lines to a stream, styled only on a terminal (and not with NO_COLOR or
    TERM=dumb, unless FORCE_COLOR asks: the conventions rich follows)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.styled = _wants_styles(stream)

    def line(self, text: str = "") -> None:
        print(text, file=self.stream)

    def style(self, text: str, style: str) -> str:
        if not self.styled:
            return text
        return f"\x1b[{STYLES[style]}m{text}\x1b[0m"

    def bold(self, text: str) -> str:
        return self.style(text, "bold")

    def red(self, text: str) -> str:
        return self.style(text, "red")

    def yellow(self, text: str) -> str:
        return self.style(text, "yellow")

    def cyan(self, text: str) -> str:
        return self.style(text, "cyan")


def _wants_styles(stream: TextIO) -> bool:
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") in ("dumb", "unknown"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def print_summary(outcome: RunOutcome, out: Terminal) -> None:
    from distea.traceformat import TraceFormatError, load_run

    if outcome.run_dir is None:
        out.line()
        out.line(f"{out.bold('distea')} sent this host's processes to the collector at "
                 f"{outcome.endpoint} ({outcome.duration_s:.1f}s)")
        return
    try:
        data = load_run(outcome.run_dir)
    except TraceFormatError as exc:
        out.line(out.red(f"distea: the run could not be read back: {exc}"))
        return
    messages = sum(len(m) for m in data.messages.values())
    methods = {name for execs in data.executions.values() for name in execs}
    out.line()
    out.line(f"{out.bold('distea')} recorded {out.bold(count(len(data.processes), 'process'))}, "
             f"{out.bold(count(len(methods), 'method'))}, "
             f"{out.bold(count(messages, 'message event'))} in {outcome.duration_s:.1f}s → "
             f"{outcome.run_dir}")
    if data.processes:
        for line in process_tree(data, out):
            out.line(line)
    for child in data.untraced:
        out.line(f"{out.yellow('untraced child')} pid {child.pid}: "
                 f"{' '.join(child.argv)[:60]} — {child.reason}")
    for problem in data.problems:
        out.line(f"{out.yellow('lost:')} {problem}")
    for key in outcome.still_open:
        if key not in data.processes:  # known processes are reported incomplete above
            out.line(f"{out.yellow('still running or unflushed at the end:')} {key}")
    if outcome.exit_code != 0:
        out.line(out.yellow(f"the command ended with exit status {outcome.exit_code}"))
    if not data.processes:
        _explain_empty_run(data, out)
        return
    if not methods:
        cwd = str(data.meta.get("cwd") or ".")
        out.line(f"{out.yellow('no function of the program ran inside the traced scope')} "
                 f"(code under {cwd}, where distea run was started): run it from the "
                 "project's directory, or add --include 'GLOB' (a module or file glob)")
        return
    example = command_line("distea", "impact", _example_query(data))
    out.line(f"next: {out.cyan(example)}   or   {out.cyan('distea show')}")


def _explain_empty_run(data: RunData, out: Terminal) -> None:
    """No process was traced: say so loudly, with the likely fix, and suggest no query."""
    out.line(f"{out.bold(out.red('distea: no process of this command was traced'))}; "
             "there is nothing to query.")
    reasons = " ".join(child.reason for child in data.untraced)
    if "cannot import the tracer" in reasons:
        out.line("  The command's Python cannot import distea. `distea run` puts its "
                 "own copy on the path; if this persists, install distea into the "
                 "program's environment (`pip install distea`).")
    elif "has no sys.monitoring" in reasons:
        out.line("  The command runs a Python older than 3.12; run it with Python "
                 "3.12 or newer.")
    elif not data.untraced:
        out.line("  Was the command a Python program? distea traces Python 3.12+ "
                 "processes started under `distea run` (not -I or -S).")


def process_tree(data: RunData, out: Terminal) -> list[str]:
    """Processes nested under the process that started them, one line each."""
    by_token: dict[str, str] = {}
    for key, events in data.messages.items():
        for event in events:
            if event.kind == "proc" and event.direction == "send":
                by_token[event.channel] = key
    children: dict[str | None, list[ProcessInfo]] = {}
    for info in data.processes.values():
        parent = by_token.get(info.parent_token or "")
        children.setdefault(parent, []).append(info)
    lines = ["run"]

    def add(parent: str | None, indent: str) -> None:
        below = sorted(children.get(parent, []), key=lambda p: p.started_ns)
        for i, info in enumerate(below):
            last = i == len(below) - 1
            methods = len(data.executions.get(info.key, {}))
            ending = "" if info.complete else " " + out.red("(incomplete)")
            lines.append(f"{indent}{LAST_BRANCH if last else BRANCH}{out.bold(info.role)} "
                         f"pid {info.pid} · {info.start_method} · {methods} methods{ending}")
            add(info.key, indent + (SPACE if last else GUIDE))

    add(None, "")
    return lines


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
