"""Shared multiprocessing queues under a real ``distea run``: exact pairs, checked
against the program's own account of which message each process got.

The payloads carry a hidden id (``producer-k``) but are forged to one CRC-32
and one length, so every message has the same fingerprint: nothing but the
pipe's order (``distea/analyzer/match_queues.py``) can tell them apart.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import distea
from tests.channels.support import PY
from tests.tracing import run_traced, run_untraced

FORGE = '''
import zlib

from benchmarks.workloads.crc_forge import forge
'''

QUEUES = FORGE + '''
import json, multiprocessing as mp, os, sys
from multiprocessing.reduction import ForkingPickler

PER_PRODUCER = 15
TARGET = 0x5EED1234

def payload(tag: str, k: int) -> bytes:
    return forge(f"{tag}-{k:04d}".encode(), TARGET)

def producer(q, tag, out):
    sent = [payload(tag, k) for k in range(PER_PRODUCER)]
    for item in sent:
        q.put(item)
    if hasattr(q, "join_thread"):  # Queue: the feeder thread writes; wait for it
        q.close()
        q.join_thread()
    with open(os.path.join(out, f"send-{os.getpid()}.json"), "w") as f:
        json.dump([item[:-4].decode() for item in sent], f)

def consumer(q, count, out):
    got = [q.get() for _ in range(count)]
    with open(os.path.join(out, f"recv-{os.getpid()}.json"), "w") as f:
        json.dump([item[:-4].decode() for item in got], f)

if __name__ == "__main__":
    kind, out = sys.argv[1], sys.argv[2]
    ctx = mp.get_context("spawn")
    fps = {len(b) << 32 | zlib.crc32(b) for b in
           (ForkingPickler.dumps(payload(t, k)) for t in "AB" for k in range(PER_PRODUCER))}
    assert len(fps) == 1, "the payloads must look alike"
    q = {"Queue": ctx.Queue, "SimpleQueue": ctx.SimpleQueue,
         "JoinableQueue": ctx.JoinableQueue}[kind]()
    readers = [ctx.Process(target=consumer, args=(q, PER_PRODUCER, out)) for _ in range(2)]
    writers = [ctx.Process(target=producer, args=(q, tag, out)) for tag in "AB"]
    for p in readers + writers:
        p.start()
    for p in readers + writers:
        p.join()
    print(kind, [p.exitcode for p in readers + writers])
'''


def _account(out: Path, prefix: str) -> dict[int, list[str]]:
    """pid -> the ids that process sent or received, in its own order."""
    return {int(f.stem.split("-")[1]): json.loads(f.read_text())
            for f in out.glob(f"{prefix}-*.json")}


def _queue_run(program, tmp_path: Path, kind: str) -> None:
    script = program("queues.py", QUEUES)
    plain_out, traced_out = tmp_path / "plain", tmp_path / "traced"
    plain_out.mkdir(parents=True)
    traced_out.mkdir(parents=True)
    plain = run_untraced([PY, script.name, kind, str(plain_out)], script.parent, timeout=60)
    traced = run_traced([PY, script.name, kind, str(traced_out)], script.parent,
                        tmp_path / "run", timeout=90)
    assert plain.returncode == 0, plain.stderr
    assert traced.result.returncode == 0, traced.result.stderr
    assert traced.result.stdout == plain.stdout == f"{kind} [0, 0, 0, 0]\n"

    run = distea.load(traced.run_dir)
    sent, received = _account(traced_out, "send"), _account(traced_out, "recv")
    assert len(sent) == 2 and len(received) == 2
    pid_of = {key: info.pid for key, info in run.processes.items()}
    m = run.matching
    # the queue's channel: the one the producers send on
    channel = next(e.channel for e in m.events if e.kind == "mp" and e.direction == "send"
                   and pid_of[e.process] in sent)
    on_queue = [i for i, e in enumerate(m.events) if e.channel == channel and e.kind == "mp"]
    # every event's id, from the process's own account (its k-th event on the queue)
    seen: Counter[str] = Counter()
    id_of: dict[int, str] = {}
    for i in on_queue:
        ev = m.events[i]
        account = (sent if ev.direction == "send" else received)[pid_of[ev.process]]
        key = f"{ev.process}/{ev.direction}"
        id_of[i] = account[seen[key]]
        seen[key] += 1
    recvs = [i for i in on_queue if m.events[i].direction == "recv"]
    assert len(recvs) == 30
    paired = {r: s for s, r in m.edges if r in id_of}
    assert sorted(paired) == sorted(recvs), "every receive is paired with certainty"
    for r, s in paired.items():
        assert id_of[s] == id_of[r], (m.events[s], m.events[r])
    assert not [u for u in m.uncertain if u[0] in id_of]
    assert m.by_kind["mp"].ambiguous == 0


def test_spawn_queue_two_producers_two_consumers_identical_fingerprints(
        program, tmp_path: Path) -> None:
    _queue_run(program, tmp_path, "Queue")


def test_simple_queue_and_joinable_queue(program, tmp_path: Path) -> None:
    _queue_run(program, tmp_path / "simple", "SimpleQueue")
    _queue_run(program, tmp_path / "joinable", "JoinableQueue")


POOL = '''
import json, multiprocessing as mp, os, sys

def work(x):
    return os.getpid()

if __name__ == "__main__":
    pool = mp.get_context("spawn").Pool(3)
    pids = pool.map(work, [b"the same task"] * 24, chunksize=1)
    pool.close()  # each worker reads one stop sentinel (None) and ends
    pool.join()
    with open(sys.argv[1], "w") as f:
        json.dump(pids, f)
    print(len(pids))
'''


def test_pool_map_pairs_every_task_and_result(program, tmp_path: Path) -> None:
    script = program("pool.py", POOL)
    plain = run_untraced([PY, script.name, str(tmp_path / "plain.json")], script.parent)
    traced = run_traced([PY, script.name, str(tmp_path / "traced.json")], script.parent,
                        tmp_path / "run", timeout=90)
    assert plain.returncode == 0 and traced.result.returncode == 0, traced.result.stderr
    assert traced.result.stdout == plain.stdout == "24\n"
    run = distea.load(traced.run_dir)
    m = run.matching
    assert m.by_kind["mp"].ambiguous == 0 and m.by_kind["mp"].external == 0
    main = next(k for k, p in run.processes.items() if p.start_method == "main")
    # ground truth: how many tasks each worker says it ran; each result it sent
    # must be paired with a receive in the main process, and the other way round
    ran = Counter(json.loads((tmp_path / "traced.json").read_text()))
    pid_of = {key: info.pid for key, info in run.processes.items()}
    results_from: Counter[int] = Counter()
    tasks_to: Counter[int] = Counter()
    for s, r in m.edges:
        send, recv = m.events[s], m.events[r]
        if send.kind != "mp":
            continue
        if recv.process == main and send.process != main:
            results_from[pid_of[send.process]] += 1
        elif send.process == main and recv.process != main:
            tasks_to[pid_of[recv.process]] += 1
    assert results_from == ran
    # a worker reads the tasks it ran plus the pool's stop sentinel
    assert {pid: n - 1 for pid, n in tasks_to.items() if n > 1} == dict(ran)
    assert sum(tasks_to.values()) == 24 + 3
