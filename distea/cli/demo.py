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
from distea.launcher import LaunchError, TraceOptions, trace_command

SAMPLES_PACKAGE = "sample_systems"


def samples_root() -> Path:
    """The directory holding ``sample_systems`` (the repository root)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / SAMPLES_PACKAGE / "__init__.py").is_file():
        raise click.ClickException(
            f"the sample systems are not next to this distea ({root}); "
            "run the demo from a clone of the distea repository")
    return root


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
    console = Console(highlight=False)
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
    console.print(f"\n$ distea impact {query}")
    ctx.invoke(impact, queries=(query,), diff_rev=None, repo=None, run_dir=outcome.run_dir,
               as_json=False, show_all=False)
    console.print(f"\n$ distea report {query} -o {report_file}")
    ctx.invoke(report, queries=(query,), output=report_file, run_dir=outcome.run_dir)
    console.print("\n[bold]next[/]:")
    for line in (
        f"distea impact {' '.join(info.interesting_queries[1:2]) or query} --run {outcome.run_dir}",
        f"distea explain {query} TARGET --run {outcome.run_dir}",
        f"distea deps {query} --run {outcome.run_dir}",
        f"open {report_file}",
        "distea run -- python your_app.py",
    ):
        console.print(f"  [cyan]{line}[/]")
