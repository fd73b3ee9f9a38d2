"""``distea run -- CMD``: record a run, then summarise what was recorded."""

from __future__ import annotations

import click

from distea.cli.running import execute

__all__ = ["run"]


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("-o", "--output", type=click.Path(),
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
@click.option("--key", "key_file", type=click.Path(), metavar="FILE",
              help="Client key file written by `distea collect` (with --connect).")
@click.option("--connect-timeout", type=float, default=10.0, show_default=True,
              help="Seconds to wait for the collector's handshake (with --connect).")
@click.option("-q", "--quiet", is_flag=True, help="Print no summary.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(output: str | None, mode: str, include: tuple[str, ...], exclude: tuple[str, ...],
        flush_timeout: float, connect: str | None, key_file: str | None,
        connect_timeout: float, quiet: bool, command: tuple[str, ...]) -> None:
    """Run COMMAND with every Python process it starts traced.

    \b
    Example:
      distea run -- python app.py --port 0
      distea run --connect tcp://node0:5555 --key run.key -- python worker.py
    The command's output and exit status are its own; the summary goes to stderr.
    """
    execute(output, mode, include, exclude, flush_timeout, connect, key_file, connect_timeout,
            quiet, command)
