"""`distea collect` on one node, `distea run --connect` on others: one run, every host.

Where this machine allows it (root, ``ip netns``), the nodes are network namespaces
joined by a veth pair, each with its own host name (UTS namespace); elsewhere they
are processes on loopback addresses (127.0.0.2 for the collector).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import zmq

import distea
from distea.traceformat import load_run
from tests.reliability.helpers import PY, kill_group, wait_for
from tests.tracing import DISTEA

SERVER = """
import socket, sys

def handle(conn):
    for _ in range(20):
        data = conn.recv(6)
        conn.sendall(data.upper())

def serve(host, port):
    listener = socket.create_server((host, port))
    print("listening", flush=True)
    conn, _ = listener.accept()
    handle(conn)
    print("served", flush=True)

serve(sys.argv[1], int(sys.argv[2]))
"""

CLIENT = """
import socket, sys, time

def request(conn):
    conn.sendall(b"hello!")
    return conn.recv(6)

def run(host, port):
    deadline = time.monotonic() + 20
    while True:
        try:
            conn = socket.create_connection((host, port))
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    replies = [request(conn) for _ in range(20)]
    print(replies[-1].decode(), flush=True)

run(sys.argv[1], int(sys.argv[2]))
"""


@dataclass
class Node:
    name: str
    address: str
    prefix: list[str]
    """Argv prefix that runs a command on this node."""


@dataclass
class Cluster:
    kind: str
    collector: Node
    server: Node
    intruder_prefix: list[str]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """Two nodes in network namespaces when possible, else two loopback addresses."""
    tag = uuid.uuid4().hex[:6]
    ns_a, ns_b = f"distea-a-{tag}", f"distea-b-{tag}"
    made: list[str] = []
    try:
        if os.environ.get("DISTEA_TEST_NO_NETNS"):
            raise OSError("network namespaces turned off")
        if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("unshare") is None:
            raise OSError("needs root, ip(8) and unshare(1)")
        for ns in (ns_a, ns_b):
            _ip("netns", "add", ns)
            made.append(ns)
        _ip("link", "add", f"dva{tag}", "type", "veth", "peer", "name", f"dvb{tag}")
        _ip("link", "set", f"dva{tag}", "netns", ns_a)
        _ip("link", "set", f"dvb{tag}", "netns", ns_b)
        for ns, dev, addr in ((ns_a, f"dva{tag}", "10.231.7.1/24"),
                              (ns_b, f"dvb{tag}", "10.231.7.2/24")):
            _ip("-n", ns, "addr", "add", addr, "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
    except (OSError, subprocess.CalledProcessError):
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)
        host = socket.gethostname()
        yield Cluster(
            "loopback",
            Node(host, "127.0.0.2", []),
            Node(host, "127.0.0.1", []),
            [],
        )
        return

    def on(ns: str, host: str) -> list[str]:
        return ["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
                f'hostname {host} && exec "$0" "$@"']

    try:
        yield Cluster(
            "netns",
            Node("node0", "10.231.7.1", on(ns_a, "node0")),
            Node("node1", "10.231.7.2", on(ns_b, "node1")),
            on(ns_b, "intruder"),
        )
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)


def spawn(argv: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(argv, cwd=cwd, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


INTRUDER = """
import json, sys, time, zmq
endpoint, key_file = sys.argv[1], sys.argv[2]
keys = json.load(open(key_file))
ctx = zmq.Context()
plain = ctx.socket(zmq.PUSH)                 # no CURVE at all
plain.connect(endpoint)
plain.send_multipart([b"distea-batch", b"x", b"y"], zmq.NOBLOCK)
forged = ctx.socket(zmq.PUSH)                # knows the server key, not the client key
public, secret = zmq.curve_keypair()
forged.curve_serverkey = keys["server_public"].encode()
forged.curve_publickey, forged.curve_secretkey = public, secret
forged.connect(endpoint)
forged.send_multipart([b"distea-batch", b"x", b"y"], zmq.NOBLOCK)
time.sleep(1.0)
plain.close(0); forged.close(0); ctx.term()
"""


def test_multihost_collection(cluster: Cluster, program, tmp_path: Path) -> None:
    print(f"\nmulti-host test across {cluster.kind}")
    program("server.py", SERVER)
    program("client.py", CLIENT)
    intruder = program("intruder.py", INTRUDER)
    app = intruder.parent
    run_dir = tmp_path / "run"
    collector = spawn([*cluster.collector.prefix, str(DISTEA), "collect", "--listen",
                       f"tcp://{cluster.collector.address}:0", "-o", str(run_dir)], tmp_path)
    procs = [collector]
    try:
        key_file = run_dir / "client.key"
        wait_for(key_file.exists, timeout=30, what="the key file")
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        time.sleep(0.1)
        keys = json.loads(key_file.read_text())
        endpoint = keys["endpoint"]
        assert endpoint.startswith(f"tcp://{cluster.collector.address}:")
        port = 47000 + os.getpid() % 1000
        server = spawn([*cluster.server.prefix, str(DISTEA), "run", "--connect", endpoint,
                        "--key", str(key_file), "--", PY, "server.py",
                        cluster.server.address, str(port)], app)
        procs.append(server)
        client = spawn([*cluster.collector.prefix, str(DISTEA), "run", "--connect", endpoint,
                        "--key", str(key_file), "--", PY, "client.py",
                        cluster.server.address, str(port)], app)
        procs.append(client)
        intrude = subprocess.run([*cluster.intruder_prefix, PY, str(intruder), endpoint,
                                  str(key_file)], capture_output=True, text=True, timeout=60)
        assert intrude.returncode == 0, intrude.stderr
        client_out, client_err = client.communicate(timeout=60)
        server_out, server_err = server.communicate(timeout=60)
        assert (client.returncode, client_out) == (0, "HELLO!\n"), client_err
        assert (server.returncode, server_out) == (0, "listening\nserved\n"), server_err
        time.sleep(0.5)
        collector.send_signal(signal.SIGINT)
        _out, err = collector.communicate(timeout=30)
    finally:
        for proc in procs:
            if proc.poll() is None:
                kill_group(proc)
    assert collector.returncode == 0, err
    assert "Traceback" not in err
    assert re.search(r"refused writers: [1-9]", err), err
    assert not key_file.exists()        # keys live as long as the run

    meta = json.loads((run_dir / "run.json").read_text())
    hosts = {cluster.collector.name, cluster.server.name}
    assert set(meta["collector"]["hosts"]) == hosts
    assert meta["collector"]["refused_count"] >= 1
    assert len(meta["collector"]["clients"]) == 2
    assert {c["exit_code"] for c in meta["collector"]["clients"]} == {0}
    data = load_run(run_dir)
    assert {p.host for p in data.processes.values()} == hosts
    assert len(data.processes) == 2
    assert all(p.complete for p in data.processes.values())
    assert any("refused" in p for p in data.problems)
    # one run: the client's change reaches the server on the other host
    run = distea.load(run_dir)
    impact = run.impact("client.request")
    server_key = next(k for k, p in data.processes.items() if "server.py" in p.argv)
    assert "server.handle" in impact.impacted.get(server_key, []), impact.impacted


def test_collect_until_idle_and_unreachable_collector(program, tmp_path: Path) -> None:
    """--until-idle ends collection; a client whose collector is gone runs untraced, says so."""
    script = program("hello.py", "def hello():\n    print('hi')\nhello()\n")
    run_dir = tmp_path / "run"
    collector = spawn([str(DISTEA), "collect", "--listen", "tcp://127.0.0.1:0", "-o",
                       str(run_dir), "--until-idle", "2", "--key-file",
                       str(tmp_path / "k.key")], tmp_path)
    try:
        wait_for((tmp_path / "k.key").exists, timeout=30, what="the key file")
        time.sleep(0.1)
        first = subprocess.run([str(DISTEA), "run", "--connect",
                                json.loads((tmp_path / "k.key").read_text())["endpoint"],
                                "--key", str(tmp_path / "k.key"), "--", PY, script.name],
                               cwd=script.parent, capture_output=True, text=True, timeout=60)
        assert (first.returncode, first.stdout) == (0, "hi\n"), first.stderr
        _out, err = collector.communicate(timeout=30)
    finally:
        if collector.poll() is None:
            kill_group(collector)
    assert collector.returncode == 0, err
    data = load_run(run_dir)
    assert any("hello.hello" in ex for ex in data.executions.values())
    assert (tmp_path / "k.key").exists()     # a key file named by the user is the user's
    # the collector has gone: the next client runs its command untraced and says why
    late = subprocess.run([str(DISTEA), "run", "--connect-timeout", "1", "--key",
                           str(tmp_path / "k.key"), "--", PY, script.name],
                          cwd=script.parent, capture_output=True, text=True, timeout=60)
    assert (late.returncode, late.stdout) == (0, "hi\n")
    assert "ran untraced" in late.stderr and "Traceback" not in late.stderr


def test_key_file_from_another_run_is_refused(tmp_path: Path) -> None:
    """The handshake probe tells a wrong key apart from an absent collector."""
    from distea.collector import Collector, CurveKeys
    from distea.remoterun import probe
    from distea.rundir import create_run_dir

    keys = CurveKeys.generate()
    other = CurveKeys.generate()
    collector = Collector(create_run_dir(tmp_path / "run"), "tcp://127.0.0.1:0", keys).start()
    try:
        good = {"server_public": keys.server_public.decode(),
                "client_public": keys.client_public.decode(),
                "client_secret": keys.client_secret.decode()}
        assert probe(collector.endpoint, good, 5) is None
        wrong = {**good, "client_public": other.client_public.decode(),
                 "client_secret": other.client_secret.decode()}
        reason = probe(collector.endpoint, wrong, 5)
        assert reason is not None and "refused" in reason
        wait_for(lambda: collector.stats.refused_count >= 1, timeout=5, what="refusal")
    finally:
        collector.close()
    assert zmq.zmq_version_info() >= (4, 3)
