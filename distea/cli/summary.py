"""What ``distea run`` prints when the command has ended: what was recorded, what was not.

Printed with a few ANSI styles of its own, not with rich: the summary is
printed after the command, on every run, and rich's console alone costs
tens of milliseconds to import (more than the rest of ``distea run``). The
words, the process tree and the styles (bold, yellow, red, cyan) are those
the rich console printed; styles only where a person reads them.
"""

from __future__ import annotations

import os

from distea.cli.runfacts import ProcessFacts, RunFacts, facts_of, glance
from distea.cli.words import command_line, count

TYPE_CHECKING = False  # not typing's: this module runs after the command, on every run
if TYPE_CHECKING:
    from typing import TextIO

    from distea.launcher import RunOutcome

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
    if outcome.run_dir is None:
        out.line()
        out.line(f"{out.bold('distea')} sent this host's processes to the collector at "
                 f"{outcome.endpoint} ({outcome.duration_s:.1f}s)")
        return
    facts = glance(outcome.run_dir)  # a clean run, without importing the trace model
    if facts is None:  # anything to report: the whole reading, as distea show's
        from distea.traceformat import TraceFormatError, load_run

        try:
            facts = facts_of(load_run(outcome.run_dir))
        except TraceFormatError as exc:
            out.line(out.red(f"distea: the run could not be read back: {exc}"))
            return
    for line in summary_lines(facts, outcome, out):
        out.line(line)


def summary_lines(facts: RunFacts, outcome: RunOutcome, out: Terminal) -> list[str]:
    """The summary of a run read back into ``facts``, one line each."""
    lines = [""]
    methods = facts.methods
    lines.append(
        f"{out.bold('distea')} recorded {out.bold(count(len(facts.processes), 'process'))}, "
        f"{out.bold(count(len(methods), 'method'))}, "
        f"{out.bold(count(facts.message_events, 'message event'))} in "
        f"{outcome.duration_s:.1f}s → {outcome.run_dir}")
    if facts.processes:
        lines.extend(process_tree(facts, out))
    for pid, argv, reason in facts.untraced:
        lines.append(f"{out.yellow('untraced child')} pid {pid}: {' '.join(argv)[:60]} — {reason}")
    for problem in facts.problems:
        lines.append(f"{out.yellow('lost:')} {problem}")
    for key in outcome.still_open:
        if key not in facts.processes:  # known processes are reported incomplete above
            lines.append(f"{out.yellow('still running or unflushed at the end:')} {key}")
    if outcome.exit_code != 0:
        lines.append(out.yellow(f"the command ended with exit status {outcome.exit_code}"))
    if not facts.processes:
        lines.extend(_explain_empty_run(facts, out))
    elif not methods:
        lines.append(f"{out.yellow('no function of the program ran inside the traced scope')} "
                     f"(code under {facts.cwd}, where distea run was started): run it from the "
                     "project's directory, or add --include 'GLOB' (a module or file glob)")
    else:
        example = command_line("distea", "impact", facts.example_query())
        lines.append(f"next: {out.cyan(example)}   or   {out.cyan('distea show')}")
    return lines


def _explain_empty_run(facts: RunFacts, out: Terminal) -> list[str]:
    """No process was traced: say so loudly, with the likely fix, and suggest no query."""
    lines = [f"{out.bold(out.red('distea: no process of this command was traced'))}; "
             "there is nothing to query."]
    reasons = " ".join(reason for _, _, reason in facts.untraced)
    if "cannot import the tracer" in reasons:
        lines.append("  The command's Python cannot import distea. `distea run` puts its "
                     "own copy on the path; if this persists, install distea into the "
                     "program's environment (`pip install distea`).")
    elif "has no sys.monitoring" in reasons:
        lines.append("  The command runs a Python older than 3.12; run it with Python "
                     "3.12 or newer.")
    elif not facts.untraced:
        lines.append("  Was the command a Python program? distea traces Python 3.12+ "
                     "processes started under `distea run` (not -I or -S).")
    return lines


def process_tree(facts: RunFacts, out: Terminal) -> list[str]:
    """Processes nested under the process that started them, one line each."""
    children: dict[str | None, list[ProcessFacts]] = {}
    for info in facts.processes.values():
        parent = facts.spawned_by.get(info.parent_token or "")
        children.setdefault(parent, []).append(info)
    lines = ["run"]

    def add(parent: str | None, indent: str) -> None:
        below = sorted(children.get(parent, []), key=lambda p: p.started_ns)
        for i, info in enumerate(below):
            last = i == len(below) - 1
            ending = "" if info.complete else " " + out.red("(incomplete)")
            lines.append(f"{indent}{LAST_BRANCH if last else BRANCH}{out.bold(info.role)} "
                         f"pid {info.pid} · {info.start_method} · {info.methods} methods{ending}")
            add(info.key, indent + (SPACE if last else GUIDE))

    add(None, "")
    return lines
