"""``distea report``: the impact of a query as one self-contained HTML file."""

from __future__ import annotations

from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import click

from distea.cli.query import _errors, _load, diff_options
from distea.cli.words import count


def _version() -> str:
    try:
        return version("distea")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"


@click.command()
@click.argument("queries", nargs=-1)
@diff_options
@click.option("-o", "--output", "output", type=click.Path(path_type=Path, dir_okay=False),
              default=Path("report.html"), show_default=True, help="HTML file to write.")
@click.option("--run", "run_dir", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="Run directory (default: the latest under .distea/runs).")
@click.option("--title", default=None, help="Page title (default: the query).")
def report(queries: tuple[str, ...], diff_rev: str | None, repo: Path | None, output: Path,
           run_dir: Path | None, title: str | None) -> None:
    """Write the impact of QUERIES as an HTML impact graph (one file, works offline).

    \b
    One swimlane per process, impacted methods highlighted, the messages that
    carry the impact drawn between lanes; click a method to see why.
    Example:  distea report app.server.handle -o impact.html
    """
    from distea.report.render import render_report

    if not queries and diff_rev is None:
        raise click.UsageError("give at least one QUERY or --diff REV")
    run = _load(run_dir)
    with _errors():
        res = run.impact(queries, diff=diff_rev, repo=repo)
        generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        model = render_report(run, res, output, title=title, generated=generated,
                              version=_version())
    reached = sum(1 for lane in model.lanes if lane.impacted)
    carrying = sum(1 for e in model.edges if e.carries)
    click.echo(f"wrote {output}: {count(len(res.method_names), 'function')} reached in "
               f"{reached} of {count(len(model.lanes), 'process', 'processes')}, "
               f"{count(carrying, 'message')} carrying the impact")
