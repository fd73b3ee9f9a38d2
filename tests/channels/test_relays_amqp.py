"""Impact through an untraced RabbitMQ (AMQP 0-9-1), under a real ``distea run``.

Debian's ``rabbitmq-server`` (optional: the test skips without it, with the
reason) is started for the test on free 127.0.0.1 ports, with its own epmd,
and both are stopped at the end. py-amqp (a celery dependency) is the
client. Expected sets are derived by hand from what each process does.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from distea.analyzer.run import Run
from tests.tracing import run_traced

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"  # runs as us (/usr/sbin's switches user)
if not os.path.exists(SERVER) or shutil.which("epmd") is None:
    pytest.skip("rabbitmq-server is not installed (apt-get install rabbitmq-server)",
                allow_module_level=True)
pytest.importorskip("amqp", reason="py-amqp comes with celery, a dev dependency")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def rabbit_port(tmp_path: Path) -> Iterator[int]:
    port, epmd_port = _free_port(), _free_port()
    base = tmp_path / "rabbit"
    base.mkdir()
    (base / "plugins").write_text("[].")
    env = {**os.environ, "HOME": str(base), "RABBITMQ_NODE_PORT": str(port),
           "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
           "RABBITMQ_NODENAME": f"distea{port}@localhost",
           "RABBITMQ_MNESIA_BASE": str(base / "mnesia"), "RABBITMQ_LOG_BASE": str(base / "log"),
           "RABBITMQ_DIST_PORT": str(_free_port()), "ERL_EPMD_ADDRESS": "127.0.0.1",
           "ERL_EPMD_PORT": str(epmd_port),
           "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "plugins"),
           "RABBITMQ_CONFIG_FILE": str(base / "none")}
    server = subprocess.Popen([SERVER], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, "rabbitmq-server exited"
                assert time.monotonic() < deadline, "rabbitmq-server did not start"
                time.sleep(0.2)
        yield port
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
        subprocess.run(["epmd", "-port", str(epmd_port), "-kill"], env=env,
                       capture_output=True, timeout=10)


BUS = '''
import subprocess, sys, time
import amqp

def connect():
    conn = amqp.Connection(f"127.0.0.1:{sys.argv[2]}")
    conn.connect()
    return conn

def make_body():
    return "job:" + "y" * 40

def publish():
    conn = connect()
    conn.channel().basic_publish(amqp.Message(make_body()), routing_key="jobs")
    conn.close()

def handle(body):
    return body.upper()

def consume():
    conn = connect()
    channel = conn.channel()
    channel.queue_declare("jobs", auto_delete=False)
    print("ready", flush=True)
    while (message := channel.basic_get("jobs", no_ack=True)) is None:
        time.sleep(0.05)
    handle(message.body)
    conn.close()

def idle(message):
    return message

def elsewhere():
    conn = connect()
    channel = conn.channel()
    channel.queue_declare("other", auto_delete=False)
    time.sleep(1.5)  # until after the job was published
    idle(channel.basic_get("other", no_ack=True))
    conn.close()

def main():
    me = [sys.executable, __file__]
    port = sys.argv[2]
    consumer = subprocess.Popen(me + ["consume", port], stdout=subprocess.PIPE, text=True)
    other = subprocess.Popen(me + ["elsewhere", port])
    consumer.stdout.readline()
    subprocess.run(me + ["publish", port], check=True)
    consumer.wait()
    other.wait()

{"main": main, "publish": publish, "consume": consume, "elsewhere": elsewhere}[sys.argv[1]]()
'''


def test_a_published_body_reaches_its_consumer(tmp_path: Path, rabbit_port: int) -> None:
    (tmp_path / "bus.py").write_text(textwrap.dedent(BUS))
    traced = run_traced([sys.executable, "bus.py", "main", str(rabbit_port)], tmp_path,
                        tmp_path / "run", timeout=90)
    assert traced.result.returncode == 0, traced.result.stderr
    run = Run.load(traced.run_dir)
    assert [(r.address, r.protocol) for r in run.relays] == [
        (f"127.0.0.1:{rabbit_port}", "amqp")]
    res = run.impact("bus.make_body")
    by_role = {run.processes[k].argv[-2]: set(v) for k, v in res.impacted.items()}
    # publisher: make_body, publish, the module; consumer: the Get-Ok that carries the
    # body, then handle, consume, the module; main waits for the publisher
    assert by_role["publish"] == {"bus.make_body", "bus.publish", "bus.<module>"}
    assert by_role["consume"] == {"bus.handle", "bus.consume", "bus.<module>"}
    assert by_role["main"] == {"bus.main", "bus.<module>"}
    # the publisher declared nothing: the process that read another queue got nothing
    assert "elsewhere" not in by_role
