"""``distea run``'s start-up path: the quick argument parser agrees with click, the
common form runs without importing click, and the collector's drain ends as
soon as everything sent has been stored, without losing what was in flight."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import pytest
import zmq

from distea.cli.run import run
from distea.cli.running import parse_run_args
from distea.collector import Collector
from distea.launcher import ipc_endpoint, listen
from distea.localcollector import LocalCollector
from distea.rundir import create_run_dir, write_run_meta
from distea.wire import FORMAT_VERSION, WIRE_MAGIC

PARSED = [
    ["run", "--", "python", "app.py"],
    ["run", "-q", "--", "python", "-u", "app.py", "-o", "x", "--", "y"],
    ["run", "-o", "out", "--mode", "full", "-q", "--", "python", "-c", "pass"],
    ["run", "--output=out", "--mode=compact", "--", "sh", "-c", "echo"],
    ["run", "--include", "pkg.*", "--include=a/*.py", "--exclude", "x.*", "--", "python"],
    ["run", "--flush-timeout", "2.5", "--connect-timeout=1", "--quiet", "--", "python"],
    ["run", "--connect", "tcp://h:5555", "--key", "k.json", "--", "python", "w.py"],
    ["run", "--flush-timeout", "1e1", "--", "python"],
]
LEFT_TO_CLICK = [
    ["run", "python", "app.py"],  # no "--": click decides what is an option
    ["run", "--help", "--", "python"],
    ["run", "-h", "--", "python"],
    ["run", "--"],
    ["run", "--mode", "fast", "--", "python"],
    ["run", "--flush-timeout", "soon", "--", "python"],
    ["run", "-o", "--", "python"],
    ["run", "-o", "-x", "--", "python"],
    ["run", "-o=out", "--", "python"],
    ["run", "-qo", "out", "--", "python"],
    ["run", "--output=", "--", "python"],
    ["run", "--outp", "x", "--", "python"],
    ["run", "python", "--", "app.py"],
    ["--version"],
    ["impact", "--", "x"],
]


def click_params(argv: list[str]) -> dict[str, object]:
    with run.make_context("run", list(argv[1:])) as ctx:
        return dict(ctx.params)


@pytest.mark.parametrize("argv", PARSED, ids=" ".join)
def test_quick_parser_reads_what_click_reads(argv: list[str]) -> None:
    assert parse_run_args(argv) == click_params(argv)


@pytest.mark.parametrize("argv", LEFT_TO_CLICK, ids=" ".join)
def test_quick_parser_leaves_the_rest_to_click(argv: list[str]) -> None:
    assert parse_run_args(argv) is None


HEAVY = ("pathlib", "subprocess", "socket", "signal", "shutil", "hashlib", "dataclasses",
         "typing", "selectors", "msgpack", "collections", "datetime")
"""What distea run's own path does without (docs/performance.md, "where distea run's own
milliseconds go"): each costs every run milliseconds before or after the command. The
command below is traced and sends batches: the collector reads their headers without
msgpack (``distea/miniunpack.py``)."""


def test_distea_run_does_not_import_click(tmp_path: Path) -> None:
    """The console script's path: ``main()`` with the arguments in sys.argv; nor any of
    HEAVY (unless coverage.py measures the subprocess: it imports them itself)."""
    probe = (
        "import atexit, sys\n"
        f"heavy = {HEAVY!r}\n"
        "atexit.register(lambda: print('coverage' in sys.modules or"
        " [m for m in heavy if m in sys.modules], file=sys.stderr))\n"
        "atexit.register(lambda: print('click' in sys.modules, 'rich' in sys.modules,"
        " 'distea.model' in sys.modules, file=sys.stderr))\n"
        "from distea.cli import main\n"
        f"sys.argv = ['distea', 'run', '-q', '-o', {str(tmp_path / 'run')!r}, '--',"
        " sys.executable, '-c', 'print(42)']\n"
        "main()\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=60)
    assert (result.returncode, result.stdout) == (0, "42\n"), result.stderr
    assert result.stderr.splitlines()[-2:] == ["False False False", "[]"] or \
        result.stderr.splitlines()[-2:] == ["False False False", "True"], result.stderr
    assert any((tmp_path / "run" / "procs").iterdir())


def batch(key: str, seq: int, final: bool, size: int = 1000) -> list[bytes]:
    header = msgpack.packb([FORMAT_VERSION, key, seq, final])
    return [WIRE_MAGIC, header, msgpack.packb([8, {"pad": "x" * size}])]


def start_collector(kind: str, run_dir: Path, endpoint: str) -> Collector | LocalCollector:
    """``local``: what distea run uses (plain Python); ``zmq``: distea collect's (pyzmq)."""
    if kind == "local":
        return LocalCollector(run_dir, endpoint, listen(endpoint)).start()
    return Collector(run_dir, endpoint).start()


@pytest.mark.parametrize("kind", ["local", "zmq"])
def test_drain_ends_at_once_with_everything_stored(tmp_path: Path, kind: str) -> None:
    """Writers that sent and closed just before drain(): nothing they sent is lost,
    and drain does not wait for a settling time (nor close() for a poll). The writers
    are libzmq PUSH sockets: the plain-Python collector speaks ZMTP as ZeroMQ does."""
    run_dir = create_run_dir(tmp_path / "run")
    endpoint, _ = ipc_endpoint(run_dir)
    collector = start_collector(kind, run_dir, endpoint)
    writers, batches = 6, 40
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(dead.stdout)  # a process that is gone: drain must not wait for it
    context: zmq.Context[object] = zmq.Context()
    for writer in range(writers):
        sock = context.socket(zmq.PUSH)
        sock.connect(endpoint)
        key = f"{os.uname().nodename}:{pid}:{writer}"
        for seq in range(batches):
            sock.send_multipart(batch(key, seq, final=seq == batches - 1, size=20_000))
        sock.close(linger=5000)
    context.term()  # everything written to the socket, every connection closed
    began = time.monotonic()
    still_open = collector.drain(10.0)
    drained = time.monotonic() - began
    collector.close()
    closed = time.monotonic() - began
    assert still_open == []
    assert collector.stats.batches == writers * batches
    assert all(s.batches == batches and s.final for s in collector.streams.values())
    assert len(collector.streams) == writers
    assert drained < 0.5 and closed - drained < 0.5, (drained, closed)


def test_drain_counts_the_connections_still_open(tmp_path: Path) -> None:
    """A writer still connected may still send: drain's quick rule sees it."""
    run_dir = create_run_dir(tmp_path / "run")
    endpoint, _ = ipc_endpoint(run_dir)
    collector = Collector(run_dir, endpoint).start()
    context: zmq.Context[object] = zmq.Context()
    sock = context.socket(zmq.PUSH)
    sock.connect(endpoint)
    sock.send_multipart(batch(f"{os.uname().nodename}:{os.getpid()}:1", 0, final=True))
    try:
        deadline = time.monotonic() + 10
        while not collector.stats.batches and time.monotonic() < deadline:
            time.sleep(0.01)  # connected: what drain must count
        collector.drain(10.0)
        assert collector._settled[1] == 2  # the writer and drain's own sync socket
        sock.close(linger=1000)
        deadline = time.monotonic() + 10
        while collector._settled[1] != 1 and time.monotonic() < deadline:
            collector.drain(1.0)
        assert collector._settled[1] == 1
        assert collector.stats.batches == 1
    finally:
        context.term()
        collector.close()


def test_local_drain_waits_for_a_live_writer_and_refuses_strangers(tmp_path: Path) -> None:
    """A connection held open by a live process is waited for (up to the timeout); a
    peer that does not speak ZMTP is refused and counted, and collection goes on."""
    run_dir = create_run_dir(tmp_path / "run")
    endpoint, _ = ipc_endpoint(run_dir)
    collector = LocalCollector(run_dir, endpoint, listen(endpoint)).start()
    context: zmq.Context[object] = zmq.Context()
    sock = context.socket(zmq.PUSH)
    sock.connect(endpoint)
    sock.send_multipart(batch(f"{os.uname().nodename}:{os.getpid()}:1", 0, final=False))
    import socket as stdlib_socket

    stranger = stdlib_socket.socket(stdlib_socket.AF_UNIX)
    stranger.connect(endpoint[len("ipc://"):])
    stranger.sendall(b"GET / HTTP/1.0\r\n" * 8)
    try:
        deadline = time.monotonic() + 10
        while not (collector.stats.batches and collector.stats.refused_count) \
                and time.monotonic() < deadline:
            time.sleep(0.01)
        began = time.monotonic()
        still_open = collector.drain(0.5)
        assert 0.45 < time.monotonic() - began < 5
        assert [s.key for s in still_open] == [f"{os.uname().nodename}:{os.getpid()}:1"]
        assert collector.stats.refused_count == 1 and collector.stats.rejected == 1
        sock.close(linger=1000)
        began = time.monotonic()
        collector.drain(10.0)
        assert time.monotonic() - began < 5  # the writer's end of file ends the wait
    finally:
        stranger.close()
        context.term()
        collector.close()


def test_a_tracer_that_connects_before_the_collector_loses_nothing(tmp_path: Path) -> None:
    """distea run starts the command before the collector takes the listening socket
    over: a process that connects (and even ends) before then waits in the backlog."""
    from distea.launcher import listen, tracer_environment
    from distea.traceformat import load_run
    from distea.tracer.config import TracerConfig

    run_dir = create_run_dir(tmp_path / "run")
    (tmp_path / "app.py").write_text(
        "import os\n"
        "def work(i):\n    return i * 2\n"
        "for i in range(1000):\n    work(i)\n"
        "r, w = os.pipe()\nos.write(w, b'x')\nos.read(r, 1)\n")
    endpoint, _ = ipc_endpoint(run_dir)
    fd = listen(endpoint)
    config = TracerConfig(run_dir=str(run_dir), endpoint=endpoint, mode="full",
                          root=str(tmp_path))
    child = subprocess.Popen([sys.executable, "app.py"], cwd=tmp_path,
                             env=tracer_environment(config, dict(os.environ)))
    time.sleep(0.5)  # the child has connected, sent its header, maybe ended
    collector = LocalCollector(run_dir, endpoint, fd).start()
    try:
        assert child.wait(timeout=30) == 0
        assert collector.drain(10.0) == []
    finally:
        collector.close()
    write_run_meta(run_dir, {"run_id": "run", "command": ["python", "app.py"],
                             "started_at": 0, "finished_at": 1,
                             "collector": collector.summary([])})
    data = load_run(run_dir)
    (info,) = data.processes.values()
    assert info.complete and not data.problems
    calls = [c for c in data.calls[info.key] if c.method == "app.work"]
    assert len(calls) == 2000  # full mode: every entry and exit
