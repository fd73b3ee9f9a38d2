"""The ``distea`` click group: one module per command family, each imported on use.

Commands are imported only when invoked (or listed by ``--help``): ``distea
run`` should not pay for the analyzer, the report's templates or rich's
tables before the traced program even starts. (``distea run -- CMD`` with
plain options does not even import click: see :mod:`distea.cli`.)
"""

from __future__ import annotations

import importlib

import click

COMMANDS = {
    "run": "distea.cli.run:run",
    "collect": "distea.cli.collect:collect",
    "impact": "distea.cli.query:impact",
    "deps": "distea.cli.query:deps",
    "explain": "distea.cli.query:explain",
    "methods": "distea.cli.query:methods",
    "show": "distea.cli.query:show",
    "report": "distea.cli.report:report",
    "export": "distea.cli.export:export",
    "demo": "distea.cli.demo:demo",
}


class LazyGroup(click.Group):
    """A group whose subcommands are ``module:attribute`` paths, imported on use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each command's whole first sentence (click cuts them at ~45 columns with "…")."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=200)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="distea")
def main() -> None:
    """Distributed dynamic impact analysis for Python.

    Record a run with `distea run -- python app.py`, then ask
    `distea impact pkg.module.func`.
    """
