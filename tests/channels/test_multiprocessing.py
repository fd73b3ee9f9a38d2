"""multiprocessing channels under a real ``distea run``: every message paired right.

Each scenario has a sender-side ``*_before_send`` (runs just before the
message leaves), a receiver-side ``*_before_recv`` (runs in the receiving
process before it waits) and ``*_after_recv`` (runs on the received value).
The impact of ``*_before_send`` must reach ``*_after_recv`` (only through the
channel under test) and must not reach ``*_before_recv``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.channels.support import run_both

BASIC = """
import multiprocessing as mp, sys

def pipe_before_send(): return 1
def pipe_before_recv(): return 2
def pipe_after_recv(x): return x

def pipe_child(conn):
    pipe_before_recv()
    msg = conn.recv()
    conn.send(("pong", pipe_after_recv(msg)))

def pipe_scenario():
    a, b = mp.Pipe()
    p = mp.Process(target=pipe_child, args=(b,))
    p.start()
    pipe_before_send()
    a.send("ping")
    print(a.recv())
    p.join()

def oneway_before_send(): return 1
def oneway_before_recv(): return 2
def oneway_after_recv(x): return x

def oneway_child(reader, back):
    oneway_before_recv()
    back.put(oneway_after_recv(reader.recv_bytes()))

def oneway_scenario():
    reader, writer = mp.Pipe(duplex=False)
    back = mp.SimpleQueue()
    p = mp.Process(target=oneway_child, args=(reader, back))
    p.start()
    oneway_before_send()
    writer.send_bytes(b"one-way bytes")
    print(back.get())
    p.join()

def queue_before_send(): return 1
def queue_before_recv(): return 2
def queue_after_recv(x): return x

def queue_child(q, done):
    queue_before_recv()
    item = q.get()
    done.put(queue_after_recv(item) * 2)
    done.join()

def queue_scenario():
    q, done = mp.Queue(), mp.JoinableQueue()
    p = mp.Process(target=queue_child, args=(q, done))
    p.start()
    queue_before_send()
    q.put(21)
    print(done.get())
    done.task_done()
    p.join()

if __name__ == "__main__":
    mp.set_start_method(sys.argv[1])
    pipe_scenario()
    oneway_scenario()
    queue_scenario()
"""


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_pipe_queue_simplequeue_joinablequeue(program, method: str) -> None:
    script = program("mp_basic.py", BASIC)
    traced = run_both(script, method)
    assert traced.stdout == "('pong', 'ping')\nb'one-way bytes'\n42\n"
    assert traced.errors() == 0
    edges = traced.edges("mp")
    by_recv_method = {}
    for send, recv in edges:
        assert send.meta["fp"] == recv.meta["fp"]
        assert send.process != recv.process
        by_recv_method.setdefault(recv.method, []).append((send, recv))

    # duplex Pipe: a socket pair, each end named by its inode, tied by a LINK
    (send, recv), = by_recv_method["mp_basic.pipe_child"]
    assert send.method == "mp_basic.pipe_scenario"
    assert send.channel != recv.channel and ":sock:" in send.channel
    assert any({link.end_a, link.end_b} == {send.channel, recv.channel}
               for link in traced.run.data.links)
    assert traced.role(send) == "mp_basic.py" and traced.role(recv).startswith("Process-")
    reply = [(s, r) for s, r in by_recv_method["mp_basic.pipe_scenario"]
             if s.method == "mp_basic.pipe_child"]
    assert len(reply) == 1

    # Pipe(duplex=False): one pipe, the same channel name at both ends
    (send, recv), = by_recv_method["mp_basic.oneway_child"]
    assert send.channel == recv.channel and ":pipe:" in send.channel
    assert send.method == "mp_basic.oneway_scenario"

    # Queue: written by the feeder thread (no traced method on its stack)
    (send, recv), = by_recv_method["mp_basic.queue_child"]
    assert send.channel == recv.channel and send.method is None
    assert traced.run.matching.by_kind["mp"].ambiguous == 0

    for name in ("pipe", "oneway", "queue"):
        impacted = traced.impacted(f"mp_basic.{name}_before_send")
        assert f"mp_basic.{name}_after_recv" in impacted, name
        assert f"mp_basic.{name}_before_recv" not in impacted, name


POOL = """
import multiprocessing as mp, sys

def before_send(): return 1
def worker_start(): return 2
def work(x): return after_recv(x) * x
def after_recv(x): return x

if __name__ == "__main__":
    mp.set_start_method(sys.argv[1])
    pool = mp.Pool(2, initializer=worker_start)
    before_send()
    print(pool.map(work, range(6)))
    print(pool.apply_async(work, (10,)).get(timeout=30))
    print(list(pool.imap(work, range(3))))
    pool.close()
    pool.join()
"""


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_pool_map_apply_async_imap(program, method: str) -> None:
    script = program("mp_pool.py", POOL)
    traced = run_both(script, method)
    assert traced.stdout == "[0, 1, 4, 9, 16, 25]\n100\n[0, 1, 4]\n"
    assert traced.errors() == 0
    edges = traced.edges("mp")
    tasks = [(s, r) for s, r in edges if traced.role(r).endswith(("PoolWorker-1", "PoolWorker-2",
                                                                  "PoolWorker-3", "PoolWorker-4"))]
    results = [(s, r) for s, r in edges
               if traced.role(r) == "mp_pool.py" and s.process != r.process]
    # every task reached a worker, every result came back, each on one channel per direction
    assert len({s.channel for s, _ in tasks}) == 1 and len({s.channel for s, _ in results}) == 1
    assert {s.channel for s, _ in tasks} != {s.channel for s, _ in results}
    assert len(results) >= 3  # map (≥1 chunk), apply_async, imap (≥1 chunk)
    assert all(s.meta["fp"] == r.meta["fp"] for s, r in edges)
    impacted = traced.impacted("mp_pool.before_send")
    assert {"mp_pool.work", "mp_pool.after_recv"} <= impacted
    assert "mp_pool.worker_start" not in impacted


MANAGER = """
import multiprocessing as mp, sys

def before_send(): return 1
def before_recv(): return 2
def after_recv(x): return x

def child(shared, event, ready):
    before_recv()
    ready.send("ready")
    event.wait(30)
    after_recv(shared["k"])
    shared["seen"] = True

if __name__ == "__main__":
    mp.set_start_method(sys.argv[1])
    with mp.Manager() as manager:
        shared, event = manager.dict(), manager.Event()
        ready, there = mp.Pipe()
        p = mp.Process(target=child, args=(shared, event, there))
        p.start()
        ready.recv()
        before_send()
        shared["k"] = 42
        event.set()
        p.join()
        print(sorted(shared.items()))
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_manager_proxies(program, method: str) -> None:
    script = program("mp_manager.py", MANAGER)
    traced = run_both(script, method)
    assert traced.stdout == "[('k', 42), ('seen', True)]\n"
    assert traced.errors() == 0
    manager = [k for k, p in traced.run.processes.items() if p.role.startswith("SyncManager")]
    assert len(manager) == 1
    # proxies talk to the manager over real sockets: SRC>DST names, one per direction
    to_manager = [(s, r) for s, r in traced.edges("mp") if r.process == manager[0]]
    assert to_manager and all(">" in s.channel and s.channel == r.channel for s, r in to_manager)
    senders = {traced.role(s) for s, _ in to_manager}
    assert "mp_manager.py" in senders and any(r.startswith("Process-") for r in senders)
    impacted = traced.impacted("mp_manager.before_send")
    assert "mp_manager.after_recv" in impacted
    assert "mp_manager.before_recv" not in impacted


MANAGER_THREADS = """
import threading
from multiprocessing import Manager

def worker(shared, i, barrier, idents):
    idents.append(threading.get_ident())
    barrier.wait()
    for k in range(30):
        shared[f"t{i}"] = k  # every reply is ('#RETURN', None): they all look alike

if __name__ == "__main__":
    with Manager() as manager:
        shared, barrier, idents = manager.dict(), threading.Barrier(3), []
        threads = [threading.Thread(target=worker, args=(shared, i, barrier, idents))
                   for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(sorted(shared.items()))
        with open("idents.txt", "w") as out:  # the threads' own record (not on stdout)
            print(*idents, file=out)
"""


def test_manager_client_threads_get_their_own_replies(program) -> None:
    """Three threads of one client use one proxy each through their own connection,
    all under one address pair (``pidN>PATH``). The manager serves each connection
    in a thread of its own, so every reply a worker thread got was sent by the one
    manager thread that got its requests; look-alike replies once paired across
    threads (FIFO per sender over one channel name)."""
    script = program("mp_manager_threads.py", MANAGER_THREADS)
    traced = run_both(script)  # the traced run is the second: idents.txt is its
    assert traced.stdout == "[('t0', 29), ('t1', 29), ('t2', 29)]\n"
    workers = {int(ident) for ident in (script.parent / "idents.txt").read_text().split()}
    served_by: dict[int, set[int]] = {w: set() for w in workers}
    serving: dict[int, set[int]] = {w: set() for w in workers}
    for s, r in traced.edges("mp"):
        if r.thread in workers and traced.role(r) == "mp_manager_threads.py":
            served_by[r.thread].add(s.thread)  # a reply the worker got
        if s.thread in workers and traced.role(s) == "mp_manager_threads.py":
            serving[s.thread].add(r.thread)  # a request the manager got
    assert all(len(threads) == 1 for threads in served_by.values()), served_by
    assert served_by == serving
    assert len(set().union(*served_by.values())) == 3
    assert traced.run.matching.by_kind["mp"].external == 0


EXECUTOR = """
import multiprocessing as mp, sys
from concurrent.futures import ProcessPoolExecutor

def before_send(): return 1
def work(x): return after_recv(x) + 1
def after_recv(x): return x

if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    with ProcessPoolExecutor(2, mp_context=ctx) as executor:
        before_send()
        print(list(executor.map(work, range(4))))
        print(executor.submit(work, 41).result(timeout=30))
"""


def test_process_pool_executor(program) -> None:
    script = program("mp_executor.py", EXECUTOR)
    traced = run_both(script, "forkserver")
    assert traced.stdout == "[1, 2, 3, 4]\n42\n"
    assert traced.errors() == 0
    edges = traced.edges("mp")
    assert any(traced.role(r) == "mp_executor.py" and s.process != r.process for s, r in edges)
    assert any(r.method == "mp_executor.work" or traced.role(r) != "mp_executor.py"
               for _, r in edges)
    assert {"mp_executor.work", "mp_executor.after_recv"} <= traced.impacted(
        "mp_executor.before_send")


AMBIGUOUS = """
import multiprocessing as mp, sys

def before_send_a(): return 1
def before_send_b(): return 2
def after_recv(x): return x

def sender(q, which):
    (before_send_a if which == "a" else before_send_b)()
    q.put("same payload")

if __name__ == "__main__":
    mp.set_start_method("fork")
    q = mp.Queue()
    procs = [mp.Process(target=sender, args=(q, w)) for w in "ab"]
    for p in procs:
        p.start()
    got = [q.get(), q.get()]
    after_recv(got)
    for p in procs:
        p.join()
    print(got)
"""


def test_identical_payloads_from_two_senders_are_safe(program) -> None:
    """One queue: paired in the pipe's order (match_queues.py), one read per sender."""
    script = program("mp_ambiguous.py", AMBIGUOUS)
    traced = run_both(script)
    counts = traced.run.matching.by_kind["mp"]
    assert counts.ambiguous == 0 and counts.external == 0
    senders = {traced.role(send) for send, _ in traced.edges("mp")}
    assert len(senders) == 2
    for query in ("mp_ambiguous.before_send_a", "mp_ambiguous.before_send_b"):
        assert "mp_ambiguous.after_recv" in traced.impacted(query)


def test_connection_channel_names(tmp_path: Path) -> None:
    """Unit: the channel identity of a connection's descriptor, in this process."""
    import multiprocessing.connection as connection
    import os
    import socket

    from distea.tracer.channels.multiprocessing import fd_channels, fingerprint, unnamed_unix_end

    r, w = connection.Pipe(duplex=False)
    assert fd_channels(r.fileno()) == fd_channels(w.fileno())
    assert ":pipe:" in fd_channels(r.fileno())[0]
    a, b = connection.Pipe()
    names = fd_channels(a.fileno())
    assert names[0] == names[1] == f"{socket.gethostname()}:sock:{os.fstat(a.fileno()).st_ino}"
    listener = connection.Listener(str(tmp_path / "l.sock"))
    client = socket.socket(socket.AF_UNIX)
    client.connect(str(tmp_path / "l.sock"))
    out, into = fd_channels(client.fileno())
    assert out.endswith(f">{tmp_path / 'l.sock'}") and into.startswith(f"{tmp_path / 'l.sock'}>")
    # the client end is unnamed (pidN): its connections get a name each at their first
    # message; a socket pair's and a pipe's names are one per end already
    assert unnamed_unix_end(out) and unnamed_unix_end(into)
    assert not any(unnamed_unix_end(name) for name in (*names, *fd_channels(r.fileno())))
    for c in (r, w, a, b, listener):
        c.close()
    client.close()
    assert fingerprint(b"abc") == fingerprint(memoryview(b"abc")) == fingerprint(bytearray(b"abc"))
    assert fingerprint(b"abc") != fingerprint(b"abd")
