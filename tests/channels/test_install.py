"""Installing and uninstalling the message channels leaves the program's world as it was."""

from __future__ import annotations

import builtins
import io
import os
import posix
import signal
import socket
import sys
import threading
import types
from pathlib import Path
from typing import Any

import zmq

import distea
from distea.tracer.channels.datagrams import DatagramChannel
from distea.tracer.channels.files import FileChannel
from distea.tracer.channels.importhooks import IMPORT_HOOKS, ImportHooks
from distea.tracer.channels.multiprocessing import MultiprocessingChannel
from distea.tracer.channels.pipes import PipeChannel
from distea.tracer.channels.sockets import SocketChannel
from distea.tracer.channels.torch_distributed import TorchDistributedChannel
from distea.tracer.channels.wakeup import WakeupChannel
from distea.tracer.channels.zmq import ZmqChannel
from tests.tracing import run_traced


class StubSession:
    """Just enough of TracerSession for install/uninstall; records nothing."""

    def __init__(self) -> None:
        self.channels: list[Any] = []
        self.local = threading.local()
        self.errors = 0
        self.finished = False
        self.emitter = types.SimpleNamespace(endpoint=None)
        self.config = types.SimpleNamespace(run_dir="")
        self.blocking_check_at = 0.0

    def tracer_error(self) -> None:
        self.errors += 1

    def stamp(self) -> tuple[int, int]:
        return 0, -1

    def send(self, *args: Any) -> None:
        pass

    def recv(self, *args: Any) -> None:
        pass

    def before_blocking(self, *args: Any) -> None:
        pass


def patched_state() -> dict[str, Any]:
    import multiprocessing.connection as connection

    return {
        "os.read": os.read, "os.write": os.write, "os.pipe": os.pipe, "os.open": os.open,
        "os.close": os.close, "os.dup": os.dup, "os.dup2": os.dup2,
        "posix": dict(vars(posix)), "signal.set_wakeup_fd": signal.set_wakeup_fd,
        "io.open": io.open, "open": builtins.open,
        "socketpair": socket.socketpair, "sendto": socket.socket.sendto,
        "recvfrom": socket.socket.recvfrom, "recvfrom_into": socket.socket.recvfrom_into,
        "send": socket.socket.send, "recv": socket.socket.recv,
        "zmq.send": zmq.Socket.send, "zmq.recv": zmq.Socket.recv, "zmq.bind": zmq.Socket.bind,
        "zmq.connect": zmq.Socket.connect, "zmq.close": zmq.Socket.close,
        "mp.send": connection.Connection._send_bytes,
        "mp.recv": connection.Connection._recv_bytes,
        "meta_path": list(sys.meta_path),
    }


def test_install_then_uninstall_restores_everything() -> None:
    before = patched_state()
    session = StubSession()
    channels = [SocketChannel(), DatagramChannel(), PipeChannel(), MultiprocessingChannel(),
                FileChannel(), ZmqChannel(), TorchDistributedChannel(), WakeupChannel()]
    for channel in channels:
        channel.install(session)  # type: ignore[arg-type]
        session.channels.append(channel)
    during = patched_state()
    changed = {k for k in before if during[k] is not before[k] and k != "meta_path"}
    assert changed == set(before) - {"meta_path"}
    for channel in reversed(channels):
        channel.uninstall()
    after = patched_state()
    assert {k for k in before if after[k] != before[k]} == set()
    assert not IMPORT_HOOKS.installed and not IMPORT_HOOKS.watched
    assert session.errors == 0


def test_patched_os_functions_keep_their_names() -> None:
    session = StubSession()
    channel = PipeChannel()
    channel.install(session)  # type: ignore[arg-type]
    try:
        assert os.read.__name__ == "read" and os.write.__doc__
        r, w = os.pipe()
        assert os.write(w, b"x") == 1 and os.read(r, 1) == b"x"
        os.close(r)
        os.close(w)
    finally:
        channel.uninstall()


def test_import_hook_runs_after_the_module_and_once(tmp_path, monkeypatch) -> None:
    (tmp_path / "distea_hook_probe.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    hooks = ImportHooks()
    seen: list[int] = []
    hooks.when_imported("distea_hook_probe", lambda module: seen.append(module.VALUE))
    try:
        import distea_hook_probe  # noqa: F401

        assert seen == [42]
        loader = sys.modules["distea_hook_probe"].__spec__.loader
        assert "exec_module" not in vars(loader)  # the per-module wrapper is gone
        hooks.when_imported("distea_hook_probe", lambda module: seen.append(0))
        assert seen == [42, 0]  # already imported: called at once
    finally:
        hooks.remove()
        sys.modules.pop("distea_hook_probe", None)
    assert hooks not in sys.meta_path


def test_a_hook_added_while_its_module_executes_runs_once_it_is_complete(
        tmp_path, monkeypatch) -> None:
    """As ``ssl`` imports ``socket``: the socket channel, installed when socket is complete,
    hooks ssl while ssl is still executing; its hook must see ssl's whole namespace."""
    (tmp_path / "distea_outer_probe.py").write_text(
        "import distea_inner_probe\nclass Late:\n    pass\n")
    (tmp_path / "distea_inner_probe.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    hooks = ImportHooks()
    seen: list[str] = []

    def inner_loaded(module: types.ModuleType) -> None:
        hooks.when_imported("distea_outer_probe",
                            lambda outer: seen.append(outer.Late.__name__))

    hooks.watch("distea_outer_probe")
    hooks.when_imported("distea_inner_probe", inner_loaded)
    try:
        import distea_outer_probe  # noqa: F401

        assert seen == ["Late"]
    finally:
        hooks.remove()
        sys.modules.pop("distea_outer_probe", None)
        sys.modules.pop("distea_inner_probe", None)


ZMQ_BEFORE_SOCKET = r'''
import sys
import zmq  # first: the zmq channel's module imports the datagram channel's, which imports socket
import socket
import subprocess

if len(sys.argv) > 1:
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    out.sendto(b"datagram after zmq", ("127.0.0.1", int(sys.argv[1])))
    sys.exit()
inbox = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
inbox.bind(("127.0.0.1", 0))
subprocess.run([sys.executable, __file__, str(inbox.getsockname()[1])], check=True)
print(inbox.recvfrom(100)[0].decode(), zmq.__name__)
'''


def test_a_channel_whose_module_another_channel_imports_first_still_installs(
        tmp_path: Path) -> None:
    """``import zmq`` before ``socket``: the zmq channel's module imports the datagram
    channel's, whose own ``import socket`` fires the socket channels' hook while that
    module is half executed. The datagram channel must install once it is complete
    (it failed with a tracer error, and every datagram went unrecorded)."""
    script = tmp_path / "app.py"
    script.write_text(ZMQ_BEFORE_SOCKET)
    traced = run_traced([sys.executable, str(script)], tmp_path, tmp_path / "run")
    assert traced.result.returncode == 0, traced.result.stderr
    assert traced.result.stdout.strip() == "datagram after zmq zmq"
    run = distea.load(traced.run_dir)
    assert len(run.processes) == 2
    assert [p.tracer_errors for p in run.processes.values()] == [0, 0]
    udp = run.matching.by_kind["udp"]
    assert udp.recvs == 1 and udp.matched == 1, udp


LOADED_WITH_SOCKET = """
import sys
import socket
print(sorted(m.rsplit(".", 1)[1] for m in sys.modules if m.startswith("distea.tracer.channels.")
             and m.rsplit(".", 1)[1] in ("amqp", "resp", "tls_memory")))
import asyncio
print(sorted(m.rsplit(".", 1)[1] for m in sys.modules if m.startswith("distea.tracer.channels.")
             and m.rsplit(".", 1)[1] in ("amqp", "resp", "tls_memory")))
"""


def test_a_process_that_imports_socket_loads_no_broker_or_memory_tls_code(
        tmp_path: Path) -> None:
    """The broker protocols' modules load at a process's first client stream, asyncio's
    TLS module with ``asyncio.sslproto``: a multiprocessing worker, which imports
    ``socket`` and connects nowhere, pays for neither (~1.5 ms of its start)."""
    script = tmp_path / "app.py"
    script.write_text(LOADED_WITH_SOCKET)
    traced = run_traced([sys.executable, str(script)], tmp_path, tmp_path / "run")
    assert traced.result.returncode == 0, traced.result.stderr
    assert traced.result.stdout.splitlines() == ["[]", "['tls_memory']"]
