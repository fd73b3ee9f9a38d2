"""``distea demo``: the whole story on a built-in sample, in one command.

It traces a sample distributed system (by default the parameter server: a
ZeroMQ server and two numpy workers), asks for the impact of the gradient
computation across every process, writes the HTML report, and says what to
try next. It must work on a fresh clone: ``uv run distea demo``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
from rich.console import Console

from distea.cli.query import impact
from distea.cli.report import report
from distea.cli.words import command_line
from distea.launcher import LaunchError, TraceOptions, trace_command

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sample_systems import SampleInfo

SAMPLES_PACKAGE = "sample_systems"
FALLBACK_SAMPLE = "kvstore"
"""Traced instead of the default where numpy is missing (it needs only the stdlib)."""


def samples_root() -> Path:
    """The directory holding ``sample_systems``: the repository root in a clone, else the
    copy an installed wheel carries in ``distea/samples``."""
    package = Path(__file__).resolve().parents[1]
    for root in (package.parent, package / "samples"):
        if (root / SAMPLES_PACKAGE / "__init__.py").is_file():
            return root
    raise click.ClickException(
        f"the sample systems are missing from this distea ({package}); reinstall it, "
        "or run the demo from a clone of the distea repository")


def missing_module(info: SampleInfo) -> str | None:
    """A module ``info`` needs that this Python cannot import, or None."""
    from importlib.util import find_spec

    return next((name for name in info.requires if find_spec(name) is None), None)


@click.command()
@click.option("--sample", default="param_server", show_default=True,
              help="Which sample system to trace (see docs/samples.md).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Run directory (default: .distea/runs/<id> in the current directory).")
@click.option("--report-file", type=click.Path(path_type=Path), default=Path("distea-demo.html"),
              show_default=True, help="Where to write the HTML report.")
@click.pass_context
def demo(ctx: click.Context, sample: str, output: Path | None, report_file: Path) -> None:
    """Trace a sample distributed system and show an impact set across its processes."""
    root = samples_root()
    sys.path.insert(0, str(root))
    from sample_systems import SAMPLES

    info = SAMPLES.get(sample)
    if info is None or info.needs_torch:
        names = ", ".join(n for n, s in SAMPLES.items() if not s.needs_torch)
        raise click.ClickException(f"no CPU sample called {sample!r}; choose one of: {names}")
    console = Console(highlight=False, soft_wrap=True)
    missing = missing_module(info)
    if missing is not None:
        fallback = SAMPLES[FALLBACK_SAMPLE]
        console.print(f"[yellow]not tracing {sample}[/]: it needs {missing}, which "
                      f"{sys.executable} cannot import (pip install {missing}); tracing "
                      f"the {fallback.name} sample instead")
        info = fallback
    console.print(f"[bold]distea demo[/]: tracing [cyan]{info.name}[/] — {info.summary}")
    console.print(f"$ distea run -- python -m {info.module}\n")
    if output is None:
        output = Path.cwd() / ".distea" / "runs" / f"demo-{os.getpid()}"
        output.parent.mkdir(parents=True, exist_ok=True)
    previous = Path.cwd()
    os.chdir(root)
    try:
        outcome = trace_command([sys.executable, *info.command], output.resolve(),
                                TraceOptions(root=str(root)))
    except LaunchError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        os.chdir(previous)
    if outcome.exit_code != 0:
        raise click.ClickException(f"the sample failed (exit {outcome.exit_code})")
    query = info.interesting_queries[0]
    assert outcome.run_dir is not None  # a local run
    run_dir = Path(outcome.run_dir)
    console.print(f"\n$ distea impact {query}")
    ctx.invoke(impact, queries=(query,), diff_rev=None, repo=None, run_dir=run_dir,
               as_json=False, show_all=False, verbose=False)
    console.print(f"\n$ distea report {query} -o {report_file}")
    ctx.invoke(report, queries=(query,), output=report_file, run_dir=run_dir)
    console.print("\n[bold]next[/]:")
    run = str(run_dir)
    for line in (
        command_line("distea", "impact", *(info.interesting_queries[1:2] or (query,)),
                     "--run", run),
        command_line("distea", "explain", query, "TARGET", "--run", run),
        command_line("distea", "deps", query, "--run", run),
        command_line("open", str(report_file)),
        "distea run -- python your_app.py",
    ):
        console.print(f"  [cyan]{line}[/]")
