"""multiprocessing synchronization under a real ``distea run``: SemLock operations are edges.

Expected impact sets are derived by hand from the programs and the rules of
docs/semantics.md ("Synchronization", "Shared memory"); the message-only
sets (shared-memory rule switched off) show what the semaphore edges alone
deliver, the full sets what the safe shared-arena rule adds.
"""

from __future__ import annotations

import subprocess

import pytest

from distea.analyzer.shared import SharedMemory
from tests.channels.support import Traced, run_both
from tests.tracing import DISTEA

VALUE_EVENT = """
import multiprocessing as mp, sys

def compute(): return 42
def use(x): return x + 1
def before_wait(): return 0

def producer(value, event):
    value.value = compute()
    event.set()

def consumer(value, event, out):
    before_wait()
    event.wait()
    out.value = use(value.value)

if __name__ == "__main__":
    mp.set_start_method(sys.argv[1])
    value, out, event = mp.Value("i", 0), mp.Value("i", 0), mp.Event()
    c = mp.Process(target=consumer, args=(value, event, out), name="consumer")
    c.start()
    p = mp.Process(target=producer, args=(value, event), name="producer")
    p.start()
    p.join()
    c.join()
    print(out.value)
"""


def by_role(traced: Traced, impacted: dict[str, list[str]]) -> dict[str, set[str]]:
    return {traced.run.processes[key].role: set(names) for key, names in impacted.items()}


def messages_only(traced: Traced, query: str) -> dict[str, set[str]]:
    """The impact with the shared-memory rule off: what message and semaphore edges give."""
    analysis = traced.run.analysis
    saved, analysis.shared = analysis.shared, SharedMemory()
    try:
        return by_role(traced, traced.run.impact(query).impacted)
    finally:
        analysis.shared = saved


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_value_and_event_carry_the_computation_to_the_consumer(program, method: str) -> None:
    script = program("ve.py", VALUE_EVENT)
    traced = run_both(script, method)
    assert traced.stdout == "43\n"
    assert traced.errors() == 0
    main = "ve.py"
    module = {"ve.<module>"} if method == "fork" else set()  # a forked child's stack

    # Through the semaphores alone (the Value's lock, the Event's condition and flag):
    # the consumer's use follows the producer's compute, its before_wait does not.
    exact = messages_only(traced, "ve.compute")
    assert exact == {"producer": {"ve.compute", "ve.producer"} | module,
                     "consumer": {"ve.consumer", "ve.use"} | module,
                     main: {"ve.<module>"}}

    # The Values live in one shared arena that every process maps: the safe rule may
    # add more (how much depends on when each process recorded a time), never less.
    # (Whether it also sets a start, and the result names the arena, depends on those
    # times too: main learns of compute only at its join, and stores nothing before.)
    full = by_role(traced, traced.run.impact("ve.compute").impacted)
    for role, names in exact.items():
        assert names <= full[role], role
    assert any("pym-" in segment.path and len(segment.sharers) == 3
               for segment in traced.run.analysis.shared.segments)

    # explain prefers a seen edge: the Event's (or the Value lock's) semaphore
    explanation = traced.run.explain("ve.compute", "ve.use")
    assert explanation.impacted
    kinds = [step.detail.split()[0] for step in explanation.steps if step.action == "recv"]
    assert kinds == ["sem"], explanation.steps
    # and so does the command line
    shown = subprocess.run([str(DISTEA), "explain", "ve.compute", "ve.use", "--run",
                            str(traced.run.path)], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "receives on sem " in shown.stdout and "shared memory" not in shown.stdout
    # every sem edge goes from a release to a later acquire of the same semaphore
    for send, recv in traced.edges("sem"):
        assert send.channel == recv.channel and send.meta["t"] < recv.meta["t"]
    assert traced.run.matching.by_kind["sem"].external == 0


LOCK = """
import multiprocessing as mp, sys

def seed(): return 5
def bump_a(x): return x * 10 + 1
def bump_b(x): return x * 10 + 2
def before_b(): return 0

def worker_a(lock, counter):
    with lock:
        counter.value = bump_a(counter.value)

def worker_b(lock, counter):
    before_b()
    lock.acquire()
    try:
        counter.value = bump_b(counter.value)
    finally:
        lock.release()

if __name__ == "__main__":
    mp.set_start_method(sys.argv[1])
    lock, counter = mp.Lock(), mp.RawValue("i", 0)
    lock.acquire()
    a = mp.Process(target=worker_a, args=(lock, counter), name="A")
    b = mp.Process(target=worker_b, args=(lock, counter), name="B")
    a.start()
    b.start()
    counter.value = seed()
    lock.release()
    a.join()
    b.join()
    print(counter.value in (512, 521))
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_lock_hands_a_counter_between_processes(program, method: str) -> None:
    script = program("lk.py", LOCK)
    traced = run_both(script, method)
    assert traced.stdout == "True\n"
    assert traced.errors() == 0
    roles = {}
    for send, recv in traced.edges("sem"):
        if send.process != recv.process:
            roles.setdefault(send.channel, set()).add((traced.role(send), traced.role(recv)))
    # one lock: the parent's release lets the first worker in, the first worker's
    # release the second; the second is also ordered after the parent's release
    # (the latest release of every other process before its acquire: safe, redundant)
    (pairs,) = roles.values()
    first, second = ("A", "B") if ("A", "B") in pairs else ("B", "A")
    assert pairs == {("lk.py", first), ("lk.py", second), (first, second)}
    exact = messages_only(traced, "lk.seed")
    assert "lk.bump_a" in exact["A"] and "lk.bump_b" in exact["B"]
    assert "lk.before_b" not in exact["B"]
    # the first worker's bump reaches the second worker's, not the other way round
    bump = {"A": "lk.bump_a", "B": "lk.bump_b"}
    later = messages_only(traced, bump[first])
    assert bump[second] in later[second]
    assert bump[first] not in messages_only(traced, bump[second]).get(first, set())


QUIET = """
import multiprocessing as mp, sys

def child(q, back):
    back.put(q.get() + 1)

if __name__ == "__main__":
    mp.set_start_method(sys.argv[1])
    lock = mp.Lock()
    for _ in range(50):  # no other process can hold it: nothing to record
        with lock:
            pass
    q, back = mp.Queue(), mp.SimpleQueue()
    p = mp.Process(target=child, args=(q, back))
    p.start()
    q.put(41)
    print(back.get())
    p.join()
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_unshared_locks_and_queue_internals_record_nothing(program, method: str) -> None:
    script = program("quiet.py", QUIET)
    traced = run_both(script, method)
    assert traced.stdout == "42\n"
    assert traced.events("sem") == []
    assert traced.impacted("quiet.child")  # the queues still carry their messages
    assert traced.run.matching.by_kind["mp"].matched >= 2


BARRIER = """
import multiprocessing as mp, sys

def work_before(): return 1
def work_after(): return 2

def party(barrier, first):
    if first:
        work_before()
    barrier.wait(30)
    if not first:
        work_after()

if __name__ == "__main__":
    mp.set_start_method(sys.argv[1])
    barrier = mp.Barrier(2)
    a = mp.Process(target=party, args=(barrier, True), name="A")
    b = mp.Process(target=party, args=(barrier, False), name="B")
    b.start()
    a.start()
    a.join()
    b.join()
    print("ok")
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_barrier_orders_what_follows_after_every_arrival(program, method: str) -> None:
    script = program("bar.py", BARRIER)
    traced = run_both(script, method)
    assert traced.stdout == "ok\n"
    assert traced.errors() == 0
    # A's work before its arrival reaches B's work after the barrier, through the
    # barrier's Condition (its semaphores) alone
    exact = messages_only(traced, "bar.work_before")
    assert "bar.work_after" in exact["B"]
    assert "bar.work_after" in traced.impacted("bar.work_before")
