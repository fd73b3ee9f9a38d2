"""Celery through Redis: a driver, a prefork worker (1 child), N task round trips.

python -m benchmarks.workloads.celery_loop [--n 200]

Starts Debian's ``redis-server`` on a free 127.0.0.1 port and a Celery worker
(``-P prefork -c 1``), then times N round trips ``add.delay(i, i).get()``:
the driver's LPUSH, the worker's BRPOP and pipe to its child, the child's
result in Redis and the driver's wait for it. Under distea every hop but
the inside of Redis is traced; the relay rule and the Redis reader (payload
fingerprints, keys) are what this row measures against untraced.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time

from celery import Celery

from benchmarks.workloads.timing import timed

PORT = os.environ.get("BENCH_REDIS_PORT", "6379")
app = Celery("celery_loop", broker=f"redis://127.0.0.1:{PORT}/0",
             backend=f"redis://127.0.0.1:{PORT}/1")


def compute(a: int, b: int) -> int:
    return a + b


@app.task(name="celery_loop.add")  # one name, whether imported or run as __main__
def add(a: int, b: int) -> int:
    return compute(a, b)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(port: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
                c.sendall(b"PING\r\n")
                if c.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("redis-server did not start")
        time.sleep(0.05)


def drive(n: int) -> None:
    add.delay(0, 0).get(timeout=60)  # the worker is up and warm
    total = 0
    with timed():
        for i in range(n):
            total += add.delay(i, i).get(timeout=60)
    print(total)


def main(n: int) -> None:
    server_path = shutil.which("redis-server")
    if server_path is None:
        sys.exit("redis-server is not installed (apt-get install redis-server)")
    port = _free_port()
    env = {**os.environ, "BENCH_REDIS_PORT": str(port), "C_FORCE_ROOT": "1"}
    server = subprocess.Popen([server_path, "--port", str(port), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
    try:
        _wait_for(port)
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", __spec__.name, "worker", "-P", "prefork",
             "-c", "1", "--without-heartbeat", "--without-gossip", "--without-mingle",
             "-l", "error"], env=env, stdout=subprocess.DEVNULL)
        try:
            subprocess.run([sys.executable, "-m", __spec__.name, "--drive", "--n", str(n)],
                           env=env, check=True)
        finally:
            worker.terminate()
            worker.wait(60)
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--drive", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive:
        drive(args.n)
    else:
        main(args.n)
