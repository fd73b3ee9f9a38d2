"""The ``distea`` command line: one click group, one module per command family."""

from __future__ import annotations

import click

from distea.cli.collect import collect
from distea.cli.demo import demo
from distea.cli.export import export
from distea.cli.query import deps, explain, impact, methods, show
from distea.cli.report import report
from distea.cli.run import run


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="distea")
def main() -> None:
    """Distributed dynamic impact analysis for Python.

    Record a run with `distea run -- python app.py`, then ask
    `distea impact pkg.module.func`.
    """


for command in (run, collect, impact, deps, explain, methods, show, report, export, demo):
    main.add_command(command)
