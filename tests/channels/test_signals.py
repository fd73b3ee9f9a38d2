"""Signals under a real ``distea run``: a kill is a send, the Python handler's run the receive.

The expected sets are derived by hand: the receiving child records nothing
that reaches the sender before the signal (its readiness reaches the parent,
not the other way round), so the handler and what it calls are impacted by the
sender's code before the kill only through the signal edge.
"""

from __future__ import annotations

import pytest

from tests.channels.support import Traced, run_both

USR1 = """
import multiprocessing as mp, os, signal, subprocess, sys, time

def before_kill(): return 1
def child_setup(): return 2
def handler_work(): return 3

def on_usr1(signum, frame):
    global got
    got = handler_work()

def child(ready):
    global got
    got = 0
    signal.signal(signal.SIGUSR1, on_usr1)
    assert signal.getsignal(signal.SIGUSR1) is on_usr1
    child_setup()
    ready.send("ready")
    while not got:
        time.sleep(0.01)
    sys.exit(0 if got == 3 else 1)

def parent_mp(method):
    mp.set_start_method(method)
    ready, there = mp.Pipe()
    p = mp.Process(target=child, args=(there,), name="worker")
    p.start()
    ready.recv()
    before_kill()
    os.kill(p.pid, signal.SIGUSR1)
    p.join()
    print(p.exitcode)

def parent_popen():
    proc = subprocess.Popen([sys.executable, __file__, "child"], stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"ready\\n"
    before_kill()
    proc.send_signal(signal.SIGUSR1)
    print(proc.wait())

class Stdout:
    def send(self, text):
        print(text, flush=True)

if __name__ == "__main__":
    if sys.argv[1] == "child":
        child(Stdout())
    elif sys.argv[1] == "popen":
        parent_popen()
    else:
        parent_mp(sys.argv[1])
"""


def child_of(traced: Traced) -> str:
    (key,) = [k for k, p in traced.run.processes.items()
              if "sig.handler_work" in traced.run.executions.get(k, {})]
    return key


@pytest.mark.parametrize("how", ["fork", "spawn", "popen"])
def test_handler_work_is_impacted_by_the_sender(program, how: str) -> None:
    script = program("sig.py", USR1)
    traced = run_both(script, how)
    assert traced.stdout == "0\n"
    assert traced.errors() == 0
    child = child_of(traced)
    (send, recv), = [(s, r) for s, r in traced.edges("signal")]
    assert recv.process == child and send.process != child
    assert send.meta["pid"] == traced.run.processes[child].pid
    assert send.meta["t"] < recv.meta["t"]
    assert send.method == ("sig.parent_popen" if how == "popen" else "sig.parent_mp")
    impacted = traced.run.impact("sig.before_kill").impacted[child]
    assert {"sig.on_usr1", "sig.handler_work"} <= set(impacted)
    assert "sig.child_setup" not in impacted
    explanation = traced.run.explain("sig.before_kill", "sig.handler_work")
    assert [s.detail.split()[0] for s in explanation.steps if s.action == "recv"] == ["signal"]


TERM = """
import multiprocessing as mp, os, signal, sys, time

def before_term(): return 1
def child_setup(): return 2

def child(ready):
    child_setup()
    ready.send("ready")
    while True:
        time.sleep(0.05)

if __name__ == "__main__":
    mp.set_start_method(sys.argv[1])
    ready, there = mp.Pipe()
    p = mp.Process(target=child, args=(there,), name="worker")
    p.start()
    ready.recv()
    before_term()
    if sys.argv[2] == "term":
        p.terminate()
    else:
        p.kill()
    p.join()
    print(p.exitcode)
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_sigterm_with_default_action_links_to_the_exit(program, method: str) -> None:
    script = program("term.py", TERM)
    traced = run_both(script, method, "term")
    assert traced.stdout == "-15\n"
    m = traced.run.matching
    (send, recv), = traced.edges("signal")
    assert traced.role(recv) == "worker" and send.method == "term.<module>"
    assert send.meta["call"] == "kill" and send.channel.endswith(":15")
    # the worker received it (the tracer's flush-then-die handler ran), then sent its exit
    exits = [(s, r) for s, r in traced.edges("exit") if s.process == recv.process]
    (exit_send, wait), = exits
    assert exit_send.clock > recv.clock and wait.process == send.process
    assert wait.clock > send.clock
    assert m.by_kind["signal"].external == 0


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_sigkill_orders_the_wait_after_the_kill(program, method: str) -> None:
    script = program("term.py", TERM)
    traced = run_both_killed(script, method)
    m = traced.run.matching
    (kill_id,) = [i for i, e in enumerate(m.events)
                  if e.kind == "signal" and e.direction == "send" and e.channel.endswith(":9")]
    pid = m.events[kill_id].meta["pid"]
    (wait_id,) = [i for i, e in enumerate(m.events)
                  if e.kind == "exit" and e.direction == "recv" and e.channel.endswith(f":{pid}")]
    # the worker died without a word (a forked one may not even have flushed its
    # start): its reaping is ordered after the kill, as an uncertain candidate
    worker = [p for p in traced.run.processes.values() if p.pid == pid]
    assert all(p.end_reason is None for p in worker)
    assert (wait_id, ((kill_id,),)) in m.uncertain
    assert m.by_kind["exit"].external == 0


def run_both_killed(script, method: str) -> Traced:
    """Like run_both, but a killed process is expected to be incomplete."""
    import distea
    from tests.channels.support import PY
    from tests.tracing import run_traced, run_untraced

    argv = [PY, script.name, method, "kill"]
    plain = run_untraced(argv, script.parent, timeout=60)
    traced = run_traced(argv, script.parent, script.parent.parent / f"run-kill-{method}",
                        timeout=60)
    assert plain.stdout == traced.result.stdout == "-9\n", traced.result.stderr
    return Traced(distea.load(traced.run_dir), traced.result.stdout)
