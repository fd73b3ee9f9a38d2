"""ZeroMQ fan-out and fan-in in four common shapes, each process keeping its own account.

    python benchmarks/workloads/zmq_shapes.py SHAPE LOGDIR

SHAPE is one of:

- ``pipeline``: a ventilator PUSHes tasks to three PULL workers, which PUSH
  results to one PULL sink (a process of its own);
- ``broker``: three REQ clients → a ROUTER frontend, a DEALER backend → three
  REP workers (a request-reply broker polling both sockets);
- ``pubsub``: one PUB, three SUBs that join one after the other (the later
  ones miss the first updates);
- ``lb``: a ROUTER hands tasks to three DEALER workers as each asks for one.

Payloads look alike the way real ones do (every worker replies the same
small JSON): each carries a serial in its text, and four bytes chosen so
that its CRC-32 is one constant, so every message of one kind has one
length and one CRC-32 (distea's fingerprint) and only the program can tell
them apart. Every process writes ``LOGDIR/ROLE-PID.json``: a list of
``[port, "send"|"recv", payload hex]`` in the order it sent and got them
(the oracle of ``benchmarks/zmq_ambiguity.py`` and the tests).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import zmq

from benchmarks.workloads.crc_forge import forge

TARGET = 0x5EED1E55
WORKERS = 3
CLIENTS = 3
REQUESTS = 10
TASKS = 40
TIMEOUT_MS = 20000
START_S = 1.5
"""Clients start sending this long after the broker started them, together."""


def alike(text: str) -> bytes:
    """``text`` and four bytes that bring its CRC-32 to ``TARGET``."""
    return forge(text.encode(), TARGET)


class Account:
    """What this process sent and got, by port, in order."""

    def __init__(self, logdir: str, role: str) -> None:
        self.path = os.path.join(logdir, f"{role}-{os.getpid()}.json")
        self.items: list[list[Any]] = []

    def sent(self, port: int, payload: bytes) -> None:
        self.items.append([port, "send", payload.hex()])

    def got(self, port: int, payload: bytes) -> None:
        self.items.append([port, "recv", payload.hex()])

    def write(self) -> None:
        with open(self.path, "w") as f:
            json.dump(self.items, f)


def port_of(sock: zmq.Socket[Any]) -> int:
    return int(sock.getsockopt(zmq.LAST_ENDPOINT).decode().rsplit(":", 1)[1])


def spawn(*args: object, stdout: Any = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, __file__, *map(str, args)], stdout=stdout,
                            text=True)


# -- pipeline -------------------------------------------------------------------------


def pipeline(logdir: str) -> None:
    """The ventilator: waits until the sink has heard from every worker, then sends."""
    ctx = zmq.Context()
    vent = ctx.socket(zmq.PUSH)
    vent.bind("tcp://127.0.0.1:0")
    vent_port = port_of(vent)
    sink = spawn("pipeline-sink", logdir, stdout=subprocess.PIPE)
    assert sink.stdout is not None
    sink_port = int(sink.stdout.readline())
    workers = [spawn("pipeline-worker", logdir, vent_port, sink_port) for _ in range(WORKERS)]
    assert sink.stdout.readline().strip() == "ready"
    account = Account(logdir, "ventilator")
    for n in range(TASKS):
        task = alike(f'{{"task":"blur","id":{n:04d}}}')
        vent.send(task)
        account.sent(vent_port, task)
    for _ in range(WORKERS):
        vent.send(b"stop")
        account.sent(vent_port, b"stop")
    account.write()
    for proc in (sink, *workers):
        proc.wait(timeout=60)
    vent.close()
    ctx.term()


def pipeline_sink(logdir: str) -> None:
    ctx = zmq.Context()
    sink = ctx.socket(zmq.PULL)
    sink.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
    sink.bind("tcp://127.0.0.1:0")
    port = port_of(sink)
    print(port, flush=True)
    account = Account(logdir, "sink")
    for k in range(WORKERS + TASKS):
        if k == WORKERS:
            print("ready", flush=True)
        result = sink.recv()
        account.got(port, result)
    account.write()
    sink.close()
    ctx.term()


def pipeline_worker(logdir: str, vent_port: str, sink_port: str) -> None:
    ctx = zmq.Context()
    tasks, results = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    tasks.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
    tasks.connect(f"tcp://127.0.0.1:{vent_port}")
    results.connect(f"tcp://127.0.0.1:{sink_port}")
    account = Account(logdir, "worker")
    ready = alike(f'{{"done":true,"id":{os.getpid() % 10000 + 10000:05d}}}')
    results.send(ready)
    account.sent(int(sink_port), ready)
    while True:
        task = tasks.recv()
        account.got(int(vent_port), task)
        if task == b"stop":
            break
        serial = int(task[-9:-5])
        time.sleep((serial % 4 + 1) / 1000)  # the work
        result = alike(f'{{"done":true,"id":{serial:05d}}}')
        results.send(result)
        account.sent(int(sink_port), result)
    account.write()
    tasks.close()
    results.close()
    ctx.term()


# -- request-reply broker -------------------------------------------------------------


def broker(logdir: str) -> None:
    """Forwards requests from the ROUTER to the DEALER and replies back, until every
    client has had its replies; then tells each worker to stop."""
    ctx = zmq.Context()
    frontend, backend = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    frontend.bind("tcp://127.0.0.1:0")
    backend.bind("tcp://127.0.0.1:0")
    front, back = port_of(frontend), port_of(backend)
    start = time.time() + START_S
    workers = [spawn("broker-worker", logdir, back, w) for w in range(WORKERS)]
    clients = [spawn("broker-client", logdir, front, c, start) for c in range(CLIENTS)]
    account = Account(logdir, "broker")
    poller = zmq.Poller()
    poller.register(frontend, zmq.POLLIN)
    poller.register(backend, zmq.POLLIN)
    replies = 0
    while replies < CLIENTS * REQUESTS:
        ready = dict(poller.poll(TIMEOUT_MS))
        assert ready, "the broker waited too long"
        if frontend in ready:
            frames = frontend.recv_multipart()
            account.got(front, frames[-1])
            backend.send_multipart(frames)
            account.sent(back, frames[-1])
        if backend in ready:
            frames = backend.recv_multipart()
            account.got(back, frames[-1])
            frontend.send_multipart(frames)
            account.sent(front, frames[-1])
            replies += 1
    for proc in clients:
        proc.wait(timeout=60)
    for _ in range(WORKERS):  # idle workers: the DEALER gives each one of these
        backend.send_multipart([b"", b"stop"])
        account.sent(back, b"stop")
    backend.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
    for _ in range(WORKERS):
        account.got(back, backend.recv_multipart()[-1])
    account.write()
    for proc in workers:
        proc.wait(timeout=60)
    frontend.close()
    backend.close()
    ctx.term()


def broker_client(logdir: str, port: str, index: str, start: str) -> None:
    ctx = zmq.Context()
    req = ctx.socket(zmq.REQ)
    req.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
    req.connect(f"tcp://127.0.0.1:{port}")
    time.sleep(max(0.0, float(start) - time.time()))  # all clients at once
    account = Account(logdir, "client")
    for n in range(REQUESTS):
        request = alike(f'{{"say":"Hello","n":{int(index) * 100 + n:04d}}}')
        req.send(request)
        account.sent(int(port), request)
        account.got(int(port), req.recv())
    account.write()
    req.close()
    ctx.term()


def broker_worker(logdir: str, port: str, index: str) -> None:
    ctx = zmq.Context()
    rep = ctx.socket(zmq.REP)
    rep.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
    rep.connect(f"tcp://127.0.0.1:{port}")
    account = Account(logdir, "worker")
    n = 0
    while True:
        request = rep.recv()
        account.got(int(port), request)
        if request == b"stop":
            reply = b"bye"
        else:
            time.sleep((n % 3 + 1) / 1000)  # the work
            reply = alike(f'{{"say":"World","n":{int(index) * 100 + n:04d}}}')
            n += 1
        rep.send(reply)
        account.sent(int(port), reply)
        if reply == b"bye":
            break
    account.write()
    rep.close()
    ctx.term()


# -- publish-subscribe ----------------------------------------------------------------


def pubsub(logdir: str) -> None:
    """Publishes every 2 ms from the first subscriber's hello until 40 updates after
    the last one's, then ``END`` until each subscriber has said it got one."""
    ctx = zmq.Context()
    pub, hello = ctx.socket(zmq.PUB), ctx.socket(zmq.PULL)
    pub.bind("tcp://127.0.0.1:0")
    hello.bind("tcp://127.0.0.1:0")
    pub_port, hello_port = port_of(pub), port_of(hello)
    subs = [spawn("pubsub-sub", logdir, pub_port, hello_port, s) for s in range(WORKERS)]
    account = Account(logdir, "publisher")
    hello.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
    account.got(hello_port, hello.recv())
    heard, after_last, n = 1, 0, 0
    while after_last < 40 and n < 5000:
        update = alike(f'{{"temp":21,"seq":{n:05d}}}')
        pub.send(update)
        account.sent(pub_port, update)
        n += 1
        after_last += heard == WORKERS
        if heard < WORKERS and hello.poll(0):
            account.got(hello_port, hello.recv())
            heard += 1
        time.sleep(0.002)
    done = 0
    while done < WORKERS:
        pub.send(b"END")
        account.sent(pub_port, b"END")
        if hello.poll(50):
            account.got(hello_port, hello.recv())
            done += 1
    account.write()
    for proc in subs:
        proc.wait(timeout=60)
    pub.close()
    hello.close()
    ctx.term()


def pubsub_sub(logdir: str, pub_port: str, hello_port: str, index: str) -> None:
    time.sleep(0.15 * int(index))  # joins late
    ctx = zmq.Context()
    sub, hello = ctx.socket(zmq.SUB), ctx.socket(zmq.PUSH)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
    sub.connect(f"tcp://127.0.0.1:{pub_port}")
    hello.connect(f"tcp://127.0.0.1:{hello_port}")
    account = Account(logdir, "subscriber")
    time.sleep(0.05)  # the subscription reaches the publisher
    greeting = alike(f'{{"hello":{int(index):04d}}}')
    hello.send(greeting)
    account.sent(int(hello_port), greeting)
    while True:
        update = sub.recv()
        account.got(int(pub_port), update)
        if update == b"END":
            break
    bye = alike(f'{{"hello":{int(index) + 100:04d}}}')
    hello.send(bye)
    account.sent(int(hello_port), bye)
    account.write()
    sub.close()
    hello.close(linger=TIMEOUT_MS)
    ctx.term()


# -- load balancer: ROUTER to DEALER workers ------------------------------------------


def lb(logdir: str) -> None:
    """Gives a task to whichever worker asks (its "ready" or its last result),
    ``stop`` once all tasks are out."""
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
    router.bind("tcp://127.0.0.1:0")
    port = port_of(router)
    workers = [spawn("lb-worker", logdir, port, w) for w in range(WORKERS)]
    account = Account(logdir, "balancer")
    given = stopped = 0
    while stopped < WORKERS:
        peer, empty, message = router.recv_multipart()
        account.got(port, message)
        if given < TASKS:
            work = alike(f'{{"task":"resize","n":{given:04d}}}')
            given += 1
        else:
            work = b"stop"
            stopped += 1
        router.send_multipart([peer, empty, work])
        account.sent(port, work)
    account.write()
    for proc in workers:
        proc.wait(timeout=60)
    router.close()
    ctx.term()


def lb_worker(logdir: str, port: str, index: str) -> None:
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
    dealer.connect(f"tcp://127.0.0.1:{port}")
    account = Account(logdir, "worker")
    message = alike(f'{{"result":"ok","n":{int(index) * 1000 + 999:04d}}}')
    n = 0
    while True:
        dealer.send_multipart([b"", message])
        account.sent(int(port), message)
        task = dealer.recv_multipart()[-1]
        account.got(int(port), task)
        if task == b"stop":
            break
        time.sleep((n % 3 + 1) / 1000)  # the work
        message = alike(f'{{"result":"ok","n":{int(index) * 1000 + n:04d}}}')
        n += 1
    account.write()
    dealer.close()
    ctx.term()


ROLES = {
    "pipeline": pipeline, "pipeline-sink": pipeline_sink, "pipeline-worker": pipeline_worker,
    "broker": broker, "broker-client": broker_client, "broker-worker": broker_worker,
    "pubsub": pubsub, "pubsub-sub": pubsub_sub,
    "lb": lb, "lb-worker": lb_worker,
}
SHAPES = ("pipeline", "broker", "pubsub", "lb")

if __name__ == "__main__":
    ROLES[sys.argv[1]](*sys.argv[2:])
