"""``distea export``: the run in a standard format (GraphML, ShiViz, Perfetto, JSON)."""

from __future__ import annotations

from pathlib import Path

import click

from distea.cli.query import _errors, _load
from distea.exports import FORMATS


@click.command()
@click.argument("fmt", metavar="FORMAT", type=click.Choice(FORMATS))
@click.argument("queries", nargs=-1)
@click.option("--run", "run_dir", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="Run directory (default: the latest under .distea/runs).")
@click.option("-o", "--output", "output", type=click.Path(path_type=Path, dir_okay=False),
              default=None, help="File to write (default: standard output).")
def export(fmt: str, queries: tuple[str, ...], run_dir: Path | None,
           output: Path | None) -> None:
    """Export the run as FORMAT; with QUERIES, mark what they impact.

    \b
    graphml   executions and messages as a graph (Gephi, yEd, networkx)
    shiviz    ShiViz log: one event per method start, send, receive, with
              vector clocks (paste or upload at ShiViz)
    perfetto  Chrome trace / Perfetto JSON: method slices per process,
              messages as flow arrows (ui.perfetto.dev, chrome://tracing)
    json      one JSON document (layout in docs/report.md)
    Example:  distea export perfetto app.server.handle -o run.json
    """
    from distea.exports import export as do_export

    run = _load(run_dir)
    with _errors():
        impact = run.impact(queries) if queries else None
        text = do_export(run, fmt, impact)
    if output is None:
        click.echo(text, nl=False)
        return
    output.write_text(text, encoding="utf-8")
    click.echo(f"wrote {output} ({fmt}" + (f", impact of {' '.join(queries)}" if queries
                                           else "") + ")", err=True)
