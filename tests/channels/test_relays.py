"""Impact through an untraced Redis in the middle, under a real ``distea run``.

Debian's ``redis-server`` is started on 127.0.0.1 with a free port for each
test and stopped at the end. Programs are written into the test's directory
(the default tracing scope); expected impact sets are derived by hand from
what each program does, per process.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from distea.analyzer.run import Run
from tests.tracing import DISTEA, run_traced

REDIS = shutil.which("redis-server")
if REDIS is None and os.environ.get("DISTEA_REQUIRE_REDIS") != "1":
    pytest.skip("redis-server is not installed (apt-get install redis-server)",
                allow_module_level=True)
pytest.importorskip("redis", reason="redis-py is a dev dependency (uv sync)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def redis_port(tmp_path: Path) -> Iterator[int]:
    assert REDIS is not None, "DISTEA_REQUIRE_REDIS=1 but no redis-server on PATH"
    port = _free_port()
    server = subprocess.Popen(
        [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
                    c.sendall(b"PING\r\n")
                    if c.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
        yield port
    finally:
        server.terminate()
        server.wait(10)


QUEUE = '''
import subprocess, sys, time
import redis

def connect():
    return redis.Redis(host="127.0.0.1", port=int(sys.argv[2]))

def make_job():
    return "job:" + "x" * 40

def produce():
    connect().lpush("jobs", make_job())

def handle(job):
    return job.upper()

def consume():
    _, job = connect().brpop(["jobs"], timeout=20)
    handle(job)

def idle(reply):
    return reply

def wait_elsewhere():
    r = connect()
    r.ping()
    idle(r.brpop(["other"], timeout=2))  # returns (empty) after the job was pushed

def main():
    me = [sys.executable, __file__]
    port = sys.argv[2]
    children = [subprocess.Popen(me + [role, port]) for role in ("elsewhere", "consume")]
    time.sleep(0.5)
    subprocess.run(me + ["produce", port], check=True)
    for child in children:
        child.wait()

{"main": main, "produce": produce, "consume": consume,
 "elsewhere": wait_elsewhere}[sys.argv[1]]()
'''

STORE = '''
import subprocess, sys, time
import redis

def connect():
    return redis.Redis(host="127.0.0.1", port=int(sys.argv[2]))

def make_value():
    return "value-42"

def write():
    connect().set("shared", make_value())

def use(value):
    return value.decode()

def read():
    r = connect()
    while (value := r.get("shared")) is None:
        time.sleep(0.05)
    use(value)

def main():
    me = [sys.executable, __file__]
    reader = subprocess.Popen(me + ["read", sys.argv[2]])
    time.sleep(0.3)
    subprocess.run(me + ["write", sys.argv[2]], check=True)
    reader.wait()

{"main": main, "write": write, "read": read}[sys.argv[1]]()
'''


def _trace(tmp_path: Path, name: str, source: str, *args: str) -> Run:
    (tmp_path / name).write_text(textwrap.dedent(source))
    traced = run_traced([sys.executable, name, *args], tmp_path, tmp_path / "run", timeout=90)
    assert traced.result.returncode == 0, traced.result.stderr
    return Run.load(traced.run_dir)


def _by_role(run: Run, query: str, relay_off: str | None = None) -> dict[str, set[str]]:
    if relay_off is not None:
        run = Run(run.data, no_relay=[relay_off])
    res = run.impact(query)
    out: dict[str, set[str]] = {}
    for key, names in res.impacted.items():
        argv = run.processes[key].argv
        role = argv[argv.index(next(a for a in argv if a.endswith(".py"))) + 1]
        out[role] = set(names)
    return out


def test_a_pushed_job_reaches_exactly_its_consumer(tmp_path: Path, redis_port: int) -> None:
    run = _trace(tmp_path, "jobqueue.py", QUEUE, "main", str(redis_port))
    address = f"127.0.0.1:{redis_port}"
    assert [(r.address, r.protocol) for r in run.relays] == [(address, "redis")]
    impact = _by_role(run, "jobqueue.make_job")
    # producer: make_job and produce run on after make_job starts, and the module;
    # consumer: the BRPOP reply carries the job, then handle, consume, its module;
    # main: its wait for the producer returns after, so main and the module.
    assert impact["produce"] == {"jobqueue.make_job", "jobqueue.produce", "jobqueue.<module>"}
    assert impact["consume"] == {"jobqueue.handle", "jobqueue.consume", "jobqueue.<module>"}
    assert impact["main"] == {"jobqueue.main", "jobqueue.<module>"}
    # the process that only pinged and popped another list got nothing from the producer
    assert "elsewhere" not in impact
    assert run.relays[0].exact >= 1
    # turned off: nothing passes through Redis any more
    off = _by_role(run, "jobqueue.make_job", relay_off=address)
    assert "consume" not in off and off["produce"] == impact["produce"]


def test_a_value_stored_in_redis_reaches_its_reader(tmp_path: Path, redis_port: int) -> None:
    run = _trace(tmp_path, "store.py", STORE, "main", str(redis_port))
    impact = _by_role(run, "store.make_value")
    # the reader's GET that finally returns the value comes after the SET (relay rule);
    # use, read and the module run on after it
    assert impact["read"] == {"store.use", "store.read", "store.<module>"}
    assert impact["write"] == {"store.make_value", "store.write", "store.<module>"}
    assert run.relays[0].relayed >= 1


TASKS = """
import os
import time

import redis
from celery import Celery

PORT = int(os.environ["REDIS_PORT"])
app = Celery("tasks", broker=f"redis://127.0.0.1:{PORT}/0",
             backend=f"redis://127.0.0.1:{PORT}/1")

def combine(a, b):
    return a + b

@app.task
def add(a, b):
    return combine(a, b), os.getpid()

def wait_for_partner(r):
    r.incr("met")
    deadline = time.monotonic() + 30
    while int(r.get("met")) < 2:
        assert time.monotonic() < deadline, "the other worker child never ran meet"
        time.sleep(0.01)

@app.task
def meet():
    wait_for_partner(redis.Redis(host="127.0.0.1", port=PORT, db=2))
    return os.getpid()
"""

DRIVER = """
import subprocess, sys
import tasks

def make_args(i):
    return i, i * 10

def submit():
    print("add", *tasks.add.delay(*make_args(1)).get(timeout=30))

def other():
    results = [tasks.meet.delay() for _ in range(2)]
    print("meet", *[r.get(timeout=30) for r in results])

def main():
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "tasks", "worker", "-c", "2", "-P", "prefork",
         "-O", "fair", "--without-heartbeat", "--without-gossip", "--without-mingle",
         "-l", "error"])
    try:
        for role in ("other", "submit"):
            subprocess.run([sys.executable, "driver.py", role], check=True)
    finally:
        worker.terminate()
        worker.wait(30)

{"main": main, "submit": submit, "other": other}[sys.argv[1]]()
"""


def test_celery_tasks_reach_the_worker_child_that_ran_them(
        tmp_path: Path, redis_port: int) -> None:
    """Two drivers, one after the other, through a prefork worker with two children.

    ``other`` first sends two ``meet`` tasks that wait for each other, so each
    child runs one (``-O fair``: a busy child gets no task). Then ``submit``
    sends one ``add``. Oracle: the pids the tasks return.
    """
    pytest.importorskip("celery", reason="celery is a dev dependency (uv sync)")
    (tmp_path / "tasks.py").write_text(textwrap.dedent(TASKS))
    (tmp_path / "driver.py").write_text(textwrap.dedent(DRIVER))
    env = {**os.environ, "REDIS_PORT": str(redis_port), "C_FORCE_ROOT": "1"}
    traced = run_traced([sys.executable, "driver.py", "main"], tmp_path, tmp_path / "run",
                        timeout=90, env=env)
    assert traced.result.returncode == 0, traced.result.stderr
    said = {line.split()[0]: line.split()[1:] for line in traced.result.stdout.splitlines()
            if line.startswith(("meet ", "add "))}
    assert said["add"][0] == "11"
    ran_add, met = int(said["add"][1]), {int(pid) for pid in said["meet"]}
    assert len(met) == 2 and ran_add in met, said  # both children ran a meet, one the add
    run = Run.load(traced.run_dir)
    address = f"127.0.0.1:{redis_port}"

    def by_process(run: Run) -> dict[str, set[str]]:
        """Impact of make_args by process: ``driver ROLE`` for the drivers, else the pid."""
        res = run.impact("driver.make_args")
        out: dict[str, set[str]] = {}
        for key, names in res.impacted.items():
            info = run.processes[key]
            label = f"driver {info.argv[-1]}" if info.role == "driver.py" else str(info.pid)
            out[label] = set(names)
        return out

    driver_side = {
        # the submitter: make_args, then submit and the module run on after it starts
        "driver submit": {"driver.make_args", "driver.submit", "driver.<module>"},
        # main: its wait for the submitter returns after
        "driver main": {"driver.main", "driver.<module>"},
    }
    impact = by_process(run)
    # the child that ran add: the task message arrived after make_args started; its meet
    # ran before (both meets finished before submit started). The other child, the
    # worker's parent and the other driver ran nothing of theirs after the impact arrived.
    assert impact == {**driver_side, str(ran_add): {"tasks.add", "tasks.combine"}}
    assert run.processes[run.find_process(str(ran_add))].role.startswith("ForkPoolWorker")
    assert [r.address for r in run.relays_carrying(run.impact("driver.make_args"))] == [address]
    # each task message (two meets, one add): the driver's LPUSH pairs exactly with the
    # worker's BRPOP reply that carries it (nobody else wrote the keys BRPOP reads)
    assert run.relays[0].exact >= 3
    explained = subprocess.run(
        [str(DISTEA), "explain", "--run", str(traced.run_dir), "driver.make_args",
         "tasks.combine"], capture_output=True, text=True, cwd=tmp_path)
    assert explained.returncode == 0, explained.stderr
    assert f"through the untraced server at {address}" in " ".join(explained.stdout.split())
    # Turned off: the driver reaches the worker only when main terminates it after the
    # submitter exited (an exit edge, then SIGTERM, then the parent's pipes to its
    # children and the memory they share), after every task ran: the impact stays on
    # the driver's side.
    assert by_process(Run(run.data, no_relay=[address])) == driver_side
    off = subprocess.run(
        [str(DISTEA), "impact", "--json", "--run", str(traced.run_dir), "--no-relay", address,
         "driver.make_args"], capture_output=True, text=True, cwd=tmp_path)
    assert off.returncode == 0, off.stderr
    assert f"relay redis at {address} turned off" in off.stdout
    shown = subprocess.run([str(DISTEA), "show", "--json", "--run", str(traced.run_dir)],
                           capture_output=True, text=True, cwd=tmp_path)
    assert f'"address": "{address}"' in shown.stdout
