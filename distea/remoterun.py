"""``distea run --connect tcp://HOST:PORT --key FILE``: a run whose collector is elsewhere.

No collector is started here: the processes write to a ``distea collect`` on
another host (CURVE over tcp, pyzmq), and the notes they leave locally
(untraced children, lost records) are sent along at the end with a summary
of this part of the run. Apart from :mod:`distea.launcher` so that a local
run does not compile or import any of it.
"""

from __future__ import annotations

import json
import os
import time
from _socket import gethostname

from distea.launcher import (
    LaunchError,
    RunOutcome,
    TraceOptions,
    exit_code_of,
    run_child,
    tracer_environment,
)
from distea.tracer.config import TracerConfig
from distea.wire import LOST_DIR, UNTRACED_DIR, WIRE_CLIENT

TYPE_CHECKING = False  # not typing's: as in distea.launcher
if TYPE_CHECKING:
    from os import PathLike
    from typing import Any

CLIENT_LINGER_MS = 5000


def read_key_file(path: str | PathLike[str]) -> dict[str, str]:
    """The client credentials that ``distea collect`` wrote; one clear line on any problem."""
    try:
        with open(path) as key_file:
            data = json.loads(key_file.read())
    except FileNotFoundError:
        raise LaunchError(f"no key file at {path} (distea collect writes it)", 2) from None
    except PermissionError:
        raise LaunchError(f"cannot read the key file {path}: permission denied", 2) from None
    except (OSError, ValueError):
        raise LaunchError(f"{path} is not a distea key file", 2) from None
    needed = ("server_public", "client_public", "client_secret")
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in needed):
        raise LaunchError(f"{path} is not a distea key file", 2)
    return data


def probe(endpoint: str, keys: dict[str, str], timeout: float) -> str | None:
    """Try the CURVE handshake with the collector; None when it succeeds, else why not."""
    import zmq

    context: zmq.Context[Any] = zmq.Context()
    sock = context.socket(zmq.PUSH)
    monitor = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED
                                      | zmq.EVENT_HANDSHAKE_FAILED_AUTH
                                      | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                                      | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
    try:
        sock.curve_serverkey = keys["server_public"].encode()
        sock.curve_publickey = keys["client_public"].encode()
        sock.curve_secretkey = keys["client_secret"].encode()
        sock.connect(endpoint)
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if not monitor.poll(int(left * 1000) + 1):
                break
            from zmq.utils.monitor import parse_monitor_message

            event = parse_monitor_message(monitor.recv_multipart())["event"]
            if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                return None
            if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                return f"the collector at {endpoint} refused this key (is it from this run?)"
            return f"the handshake with {endpoint} failed (wrong key file?)"
        return f"no collector answered at {endpoint} within {timeout:g}s"
    except zmq.ZMQError as exc:
        return f"cannot connect to {endpoint}: {exc}"
    finally:
        sock.disable_monitor()
        monitor.close(linger=0)
        sock.close(linger=0)
        context.term()


def trace_remote(command: list[str], options: TraceOptions) -> RunOutcome:
    if options.key_file is None:
        raise LaunchError("--connect needs --key FILE (written by distea collect)", 2)
    keys = read_key_file(options.key_file)
    endpoint = options.connect or keys.get("endpoint") or ""
    if not endpoint.startswith("tcp://"):
        raise LaunchError(f"not a tcp:// endpoint: {endpoint or '(none)'}", 2)
    env = dict(os.environ)
    notes: list[str] = []
    side: str | None = None
    problem = probe(endpoint, keys, options.connect_timeout)
    if problem is not None:
        notes.append(f"{problem}; the command ran untraced")
    else:
        import tempfile

        side = tempfile.mkdtemp(prefix="distea-client-")
        config = TracerConfig(
            run_dir=str(side), endpoint=endpoint, mode=options.mode,
            root=os.path.realpath(options.root), include=options.include,
            exclude=options.exclude, flush_timeout_ms=2000,
            curve_server_key=keys["server_public"], curve_public_key=keys["client_public"],
            curve_secret_key=keys["client_secret"],
        )
        env = tracer_environment(config, env)
    started = time.time()
    status = run_child(command, env)
    finished = time.time()
    if side is not None:
        summary = {
            "host": gethostname(), "command": command, "cwd": os.getcwd(),
            "exit_code": exit_code_of(status), "started_at": started, "finished_at": finished,
            UNTRACED_DIR: _read_notes(os.path.join(side, UNTRACED_DIR)),
            LOST_DIR: _read_notes(os.path.join(side, LOST_DIR)),
        }
        if _send_summary(endpoint, keys, summary):
            import shutil

            shutil.rmtree(side, ignore_errors=True)
        else:
            notes.append(f"the collector at {endpoint} did not take this host's summary; "
                         f"notes kept in {side}")
    return RunOutcome(None, exit_code_of(status), finished - started,
                      signal=-status if status < 0 else None, endpoint=endpoint, notes=notes)


def _read_notes(folder: str) -> dict[str, Any]:
    notes: dict[str, Any] = {}
    names = sorted(n for n in os.listdir(folder) if n.endswith(".json")) \
        if os.path.isdir(folder) else []
    for name in names:
        try:
            with open(os.path.join(folder, name)) as note:
                notes[name] = json.loads(note.read())
        except (OSError, ValueError):
            notes[name] = {"unreadable": name}
    return notes


def _send_summary(endpoint: str, keys: dict[str, str], summary: dict[str, Any]) -> bool:
    """Push this host's summary; True when it left before the linger ran out."""
    import msgpack
    import zmq

    context: zmq.Context[Any] = zmq.Context()
    sock = context.socket(zmq.PUSH)
    sock.curve_serverkey = keys["server_public"].encode()
    sock.curve_publickey = keys["client_public"].encode()
    sock.curve_secretkey = keys["client_secret"].encode()
    sock.connect(endpoint)
    sock.send_multipart([WIRE_CLIENT, msgpack.packb(summary)])
    started = time.monotonic()
    sock.close(linger=CLIENT_LINGER_MS)
    context.term()
    return (time.monotonic() - started) * 1000 < CLIENT_LINGER_MS * 0.95
