"""``distea collect --listen tcp://HOST:PORT``: one run directory for processes on many hosts.

The collector binds a CURVE-encrypted ZeroMQ PULL socket and writes a key
file (mode 0600) holding the run's client credentials; ``distea run
--connect tcp://HOST:PORT --key FILE -- CMD`` on every other node reads it.
Only that key may write: any other writer is refused, counted, and shown in
the summary and in ``run.json``. Collection ends on SIGINT or SIGTERM, or
after ``--until-idle`` seconds without a message (counted once the first
message has arrived).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import NoReturn

import click
import zmq
from rich.console import Console

from distea.collector import Collector, CurveKeys
from distea.launcher import LaunchError, make_run_dir
from distea.rundir import write_run_meta
from distea.traceformat import TraceFormatError, load_run

KEY_FILE_NAME = "client.key"


def write_key_file(path: Path, endpoint: str, keys: CurveKeys, run_id: str) -> None:
    """The client credentials, readable by this user only (created 0600, never widened)."""
    content = json.dumps({
        "endpoint": endpoint,
        "run_id": run_id,
        "server_public": keys.server_public.decode(),
        "client_public": keys.client_public.decode(),
        "client_secret": keys.client_secret.decode(),
    })
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as stream:
        stream.write(content + "\n")


@click.command()
@click.option("--listen", required=True, metavar="tcp://HOST:PORT",
              help="Address to serve (port 0: any free port, printed at start).")
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help="Run directory to write (default: .distea/runs/<id>).")
@click.option("--key-file", type=click.Path(path_type=Path), metavar="FILE",
              help="Where to write the client key (default: RUN_DIR/client.key, "
                   "removed at the end).")
@click.option("--until-idle", type=float, metavar="SECONDS",
              help="End once this many seconds pass without a message, counted from the "
                   "first one (default: until SIGINT/SIGTERM).")
@click.option("-q", "--quiet", is_flag=True, help="Print no summary.")
def collect(listen: str, output: Path | None, key_file: Path | None, until_idle: float | None,
            quiet: bool) -> None:
    """Collect one run from `distea run --connect` on other hosts.

    \b
    Example (on node0, then on every node):
      distea collect --listen tcp://0.0.0.0:5555 -o run1
      distea run --connect tcp://node0:5555 --key run1/client.key -- python train.py
    Ends on Ctrl-C / SIGTERM or after --until-idle seconds without a message.
    """
    err = Console(stderr=True)
    if not listen.startswith("tcp://"):
        _fail("--listen takes tcp://HOST:PORT")
    if key_file is not None and key_file.exists():
        _fail(f"the key file {key_file} already exists; keys are made per run")
    try:
        run_dir = Path(make_run_dir(output))
    except LaunchError as exc:
        _fail(str(exc), exc.exit_code)
    keys = CurveKeys.generate()
    try:
        collector = Collector(run_dir, listen, keys)
    except zmq.ZMQError as exc:
        shutil.rmtree(run_dir, ignore_errors=True)  # ours, and still empty
        _fail(f"cannot listen on {listen}: {exc}")
    key_path = key_file or run_dir / KEY_FILE_NAME
    try:
        write_key_file(key_path, collector.endpoint, keys, run_dir.name)
    except OSError as exc:
        collector.close()
        _fail(f"cannot write the key file {key_path}: {exc.strerror}")
    started = time.time()
    meta: dict[str, object] = {
        "run_id": run_dir.name, "command": None, "cwd": os.getcwd(), "mode": "remote",
        "include": [], "exclude": [], "endpoint": collector.endpoint, "listen": listen,
        "started_at": started, "python": sys.version.split()[0],
        "host": socket.gethostname(), "key_file": str(key_path.resolve()),
    }
    write_run_meta(run_dir, meta)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    collector.start()
    err.print(f"distea collect: listening on {collector.endpoint} → {run_dir}", soft_wrap=True)
    err.print(f"  on each node: distea run --connect {collector.endpoint} --key {key_path} "
              "-- CMD", soft_wrap=True)
    try:
        while not stop.wait(0.1):
            if until_idle is not None and collector.idle_for() >= until_idle:
                break
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        still_open = collector.drain(2.0)
        collector.close()
        if key_file is None:
            key_path.unlink(missing_ok=True)
        meta.update(finished_at=time.time(), collector=collector.summary(still_open))
        write_run_meta(run_dir, meta)
    if not quiet:
        print_collect_summary(run_dir, collector, err)


def print_collect_summary(run_dir: Path, collector: Collector, console: Console) -> None:
    try:
        data = load_run(run_dir)
    except TraceFormatError as exc:
        console.print(f"distea: the run could not be read back: {exc}", soft_wrap=True)
        return
    hosts: dict[str, int] = {}
    for info in data.processes.values():
        hosts[info.host] = hosts.get(info.host, 0) + 1
    per_host = ", ".join(f"{host}: {n}" for host, n in sorted(hosts.items())) or "none"
    console.print(f"\ndistea collect: {len(data.processes)} processes ({per_host}), "
                  f"{collector.stats.batches} batches, {len(collector.stats.clients)} "
                  f"distea run clients → {run_dir}", soft_wrap=True)
    refused = collector.stats.refused_count
    console.print(f"refused writers: {refused}" + (" (not holding this run's key)"
                                                     if refused else ""), soft_wrap=True)
    for child in data.untraced:
        console.print(f"untraced: pid {child.pid} {' '.join(child.argv)[:60]} — {child.reason}",
                      soft_wrap=True)
    for problem in data.problems:
        console.print(f"lost: {problem}", soft_wrap=True)


def _fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"distea: {message}", err=True)
    sys.exit(code)
