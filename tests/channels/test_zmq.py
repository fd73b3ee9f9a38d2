"""ZeroMQ under a real ``distea run``: every socket pattern, sync and asyncio.

The program runs each pattern between the main process and children it
starts with ``subprocess`` (or, for PAIR over inproc, two threads). As in the
multiprocessing tests, ``X_before_send`` runs just before the message leaves,
``X_before_recv`` in the receiver before it waits (and before its peer even
exists), ``X_after_recv`` on the received message.
"""

from __future__ import annotations

import pytest

from distea.tracer.channels.datagrams import primary_address
from distea.tracer.channels.zmq import normalise_endpoint
from tests.channels.support import run_both

APP = r'''
import asyncio, subprocess, sys, threading
import zmq, zmq.asyncio

TIMEOUT = 10_000

def sock(ctx, kind):
    s = ctx.socket(kind)
    s.setsockopt(zmq.LINGER, 2000)
    s.setsockopt(zmq.RCVTIMEO, TIMEOUT)
    return s

def child(*args):
    return subprocess.Popen([sys.executable, __file__, *args])

def push_before_send(): return 1
def push_before_recv(): return 2
def push_after_recv(m): return m

def pub_before_send(): return 1
def pub_before_recv(): return 2
def pub_after_recv(m): return m

def req_before_send(): return 1
def req_before_recv(): return 2
def req_after_recv(m): return m

def dealer_before_send(): return 1
def router_before_recv(): return 2
def router_after_recv(m): return m

def pair_before_send(): return 1
def pair_before_recv(): return 2
def pair_after_recv(m): return m

def async_before_send(): return 1
def async_before_recv(): return 2
def async_after_recv(m): return m

# -- children ---------------------------------------------------------------

def push_child(endpoint):
    ctx = zmq.Context()
    s = sock(ctx, zmq.PUSH)
    s.connect(endpoint)
    push_before_send()
    s.send_string("work item")
    s.close(); ctx.term()

def sub_child(endpoint):
    ctx = zmq.Context()
    s = sock(ctx, zmq.SUB)
    s.setsockopt(zmq.SUBSCRIBE, b"")
    pub_before_recv()
    s.connect(endpoint)
    pub_after_recv(s.recv_multipart())
    s.close(); ctx.term()

def req_child(endpoint):
    ctx = zmq.Context()
    s = sock(ctx, zmq.REQ)
    s.connect(endpoint)
    req_before_send()
    s.send(b"echo me")
    assert s.recv() == b"echo me"
    s.send_pyobj({"n": 2})
    assert s.recv_pyobj() == {"n": 3}
    s.close(); ctx.term()

def dealer_child(endpoint, name):
    ctx = zmq.Context()
    s = sock(ctx, zmq.DEALER)
    s.connect(endpoint)
    dealer_before_send()
    s.send_multipart([b"", name.encode()])
    empty, reply = s.recv_multipart()
    assert reply == b"done " + name.encode()
    s.close(); ctx.term()

def async_child(endpoint):
    ctx = zmq.Context()
    s = sock(ctx, zmq.PUSH)
    s.connect(endpoint)
    async_before_send()
    s.send_json({"async": True})
    s.close(); ctx.term()

# -- main process -----------------------------------------------------------

def push_pull(ctx):
    pull = sock(ctx, zmq.PULL)
    port = pull.bind_to_random_port("tcp://*")
    push_before_recv()
    p = child("push", f"tcp://localhost:{port}")
    print(push_after_recv(pull.recv_string()))
    p.wait(timeout=30); pull.close()

def pub_sub(ctx):
    pub = sock(ctx, zmq.XPUB)
    pub.setsockopt(zmq.XPUB_VERBOSE, 1)
    pub.bind("ipc://pubsub.ipc")
    subs = [child("sub", "ipc://pubsub.ipc") for _ in range(2)]
    for _ in subs:
        pub.recv()  # a subscription: both subscribers are connected
    pub_before_send()
    pub.send_multipart([b"news", b"headline"])
    for p in subs:
        p.wait(timeout=30)
    pub.close()
    print("published")

def req_rep(ctx):
    rep = sock(ctx, zmq.REP)
    port = rep.bind_to_random_port("tcp://127.0.0.1")
    p = child("req", f"tcp://{sys.argv[1]}:{port}")
    rep.send(req_after_recv(rep.recv()))
    obj = rep.recv_pyobj()
    rep.send_pyobj({"n": obj["n"] + 1})
    p.wait(timeout=30); rep.close()
    print("replied")

def router_dealer(ctx):
    router = sock(ctx, zmq.ROUTER)
    port = router.bind_to_random_port("tcp://0.0.0.0")
    router_before_recv()
    dealers = [child("dealer", f"tcp://127.0.0.1:{port}", name) for name in ("a", "b")]
    names = []
    for _ in dealers:
        identity, empty, name = router.recv_multipart()
        names.append(router_after_recv(name))
        router.send_multipart([identity, b"", b"done " + name])
    for p in dealers:
        p.wait(timeout=30)
    router.close()
    print(sorted(names))

def pair_inproc(ctx):
    a = sock(ctx, zmq.PAIR)
    a.bind("inproc://pair")
    def other():
        b = sock(ctx, zmq.PAIR)
        b.connect("inproc://pair")
        pair_before_send()
        b.send(b"from thread")
        b.close()
    pair_before_recv()
    t = threading.Thread(target=other)
    t.start()
    print(pair_after_recv(a.recv()))
    t.join(); a.close()

def asyncio_pull():
    async def main():
        ctx = zmq.asyncio.Context()
        pull = ctx.socket(zmq.PULL)
        port = pull.bind_to_random_port("tcp://127.0.0.1")
        async_before_recv()
        p = child("async", f"tcp://127.0.0.1:{port}")
        message = await asyncio.wait_for(pull.recv_json(), 10)
        print(async_after_recv(message))
        p.wait(timeout=30)
        pull.close(); ctx.term()
    asyncio.run(main())

if __name__ == "__main__":
    role = sys.argv[1]
    if role == "push": push_child(sys.argv[2])
    elif role == "sub": sub_child(sys.argv[2])
    elif role == "req": req_child(sys.argv[2])
    elif role == "dealer": dealer_child(sys.argv[2], sys.argv[3])
    elif role == "async": async_child(sys.argv[2])
    else:
        ctx = zmq.Context()
        push_pull(ctx)
        pub_sub(ctx)
        req_rep(ctx)
        router_dealer(ctx)
        pair_inproc(ctx)
        ctx.term()
        asyncio_pull()
'''


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("zmq") / "app"
    folder.mkdir()
    script = folder / "zmq_app.py"
    script.write_text(APP)
    return run_both(script, "localhost")


def edges_into(traced, method: str):
    return [(s, r) for s, r in traced.edges("zmq") if r.method == method]


def test_output_and_no_tracer_errors(traced) -> None:
    assert traced.stdout == ("work item\npublished\nreplied\n[b'a', b'b']\nb'from thread'\n"
                             "{'async': True}\n")
    assert traced.errors() == 0
    # the tracer's own emitter (a PUSH to the collector) is never recorded
    assert not any("collector" in e.channel for e in traced.events("zmq"))


def test_push_pull(traced) -> None:
    (send, recv), = edges_into(traced, "zmq_app.push_pull")
    assert send.method == "zmq_app.push_child" and send.meta["fp"] == recv.meta["fp"]
    port = send.channel.split(":")[2].split()[0]
    assert send.channel == f"tcp://{primary_address()}:{port} connect>bind"
    impacted = traced.impacted("zmq_app.push_before_send")
    assert "zmq_app.push_after_recv" in impacted and "zmq_app.push_before_recv" not in impacted


def test_pub_sub_fanout_over_relative_ipc(traced) -> None:
    pairs = edges_into(traced, "zmq_app.sub_child")
    assert len(pairs) == 2 and pairs[0][0] is pairs[1][0]  # one send, two receives
    send = pairs[0][0]
    assert send.meta["fanout"] is True
    assert send.channel.startswith("ipc:///") and send.channel.endswith(
        "/app/pubsub.ipc bind>connect")
    assert {traced.run.processes[r.process].pid for _, r in pairs} .__len__() == 2
    impacted = traced.impacted("zmq_app.pub_before_send")
    assert "zmq_app.pub_after_recv" in impacted and "zmq_app.pub_before_recv" not in impacted


def test_req_rep_echo_directions(traced) -> None:
    requests = edges_into(traced, "zmq_app.req_rep")
    replies = edges_into(traced, "zmq_app.req_child")
    assert len(requests) == 2 and len(replies) == 2
    assert all(s.channel.endswith("connect>bind") for s, _ in requests)
    assert all(s.channel.endswith("bind>connect") for s, _ in replies)
    # the echo's request and reply carry the same bytes: told apart by direction
    assert requests[0][0].meta["fp"] == replies[0][0].meta["fp"]
    assert requests[0][1].clock < replies[0][0].clock
    assert traced.run.matching.by_kind["zmq"].ambiguous == 0
    assert "zmq_app.req_after_recv" in traced.impacted("zmq_app.req_before_send")


def test_router_dealer_envelopes(traced) -> None:
    into_router = edges_into(traced, "zmq_app.router_dealer")
    back = edges_into(traced, "zmq_app.dealer_child")
    assert len(into_router) == 2 and len(back) == 2
    # ROUTER saw [identity, "", name], the DEALER sent ["", name]: same last frame
    assert all(s.meta["fp"] == r.meta["fp"] for s, r in into_router + back)
    senders = {s.process for s, _ in into_router}
    assert senders == {r.process for _, r in back}
    # the ROUTER names each peer by its routing id: a reply goes where that request came from
    peer_of = {r.meta["peer"]: s.process for s, r in into_router}
    assert len(peer_of) == 2 and all(peer_of[s.meta["peer"]] == r.process for s, r in back)
    impacted = traced.impacted("zmq_app.dealer_before_send")
    assert "zmq_app.router_after_recv" in impacted
    assert "zmq_app.router_before_recv" not in impacted


def test_pair_inproc_between_threads(traced) -> None:
    (send, recv), = edges_into(traced, "zmq_app.pair_inproc")
    assert send.process == recv.process and send.clock < recv.clock
    assert send.channel.startswith("inproc://pair@")
    impacted = traced.impacted("zmq_app.pair_before_send")
    assert "zmq_app.pair_after_recv" in impacted


def test_asyncio_receive_recorded_on_completion(traced) -> None:
    pairs = [(s, r) for s, r in traced.edges("zmq") if s.method == "zmq_app.async_child"]
    assert len(pairs) == 1
    impacted = traced.impacted("zmq_app.async_before_send")
    assert "zmq_app.async_after_recv" in impacted
    assert "zmq_app.async_before_recv" not in impacted


def test_endpoint_normalisation(tmp_path, monkeypatch) -> None:
    host = primary_address()
    for spelling in ("tcp://*:5555", "tcp://0.0.0.0:5555", "tcp://localhost:5555",
                     "tcp://127.0.0.1:5555", f"tcp://{host}:5555", "tcp://[::1]:5555",
                     "tcp://eth0;127.0.0.1:5555"):
        assert normalise_endpoint(spelling) == f"tcp://{host}:5555", spelling
    monkeypatch.chdir(tmp_path)
    assert normalise_endpoint("ipc://x.ipc") == f"ipc://{tmp_path}/x.ipc"
    assert normalise_endpoint("ipc://@abstract") == "ipc://@abstract"
    assert normalise_endpoint("inproc://name").startswith("inproc://name@")
    assert normalise_endpoint("tcp://10.9.8.7:1") == "tcp://10.9.8.7:1"


AMBIGUOUS = r"""
import subprocess, sys, zmq

def before_send_a(): return 1
def before_send_b(): return 2
def after_recv(m): return m

if len(sys.argv) > 1:
    ctx = zmq.Context(); s = ctx.socket(zmq.PUSH); s.connect(sys.argv[2])
    (before_send_a if sys.argv[1] == "a" else before_send_b)()
    s.send(b"same payload"); s.close(); ctx.term()
else:
    ctx = zmq.Context(); pull = ctx.socket(zmq.PULL); pull.setsockopt(zmq.RCVTIMEO, 10000)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    children = [subprocess.Popen([sys.executable, __file__, w, f"tcp://127.0.0.1:{port}"])
                for w in "ab"]
    got = [pull.recv(), pull.recv()]
    after_recv(got)
    for c in children: c.wait(timeout=30)
    pull.close(); ctx.term()
    print(got)
"""


def test_identical_messages_from_two_pushers_are_safe(program) -> None:
    script = program("zmq_ambiguous.py", AMBIGUOUS)
    traced = run_both(script)
    counts = traced.run.matching.by_kind["zmq"]
    # certain only where the clock shows one push came after the first receive
    # (match_zmq.py); which it is depends on timing
    assert counts.matched + counts.ambiguous == 2 and counts.external == 0
    for query in ("zmq_ambiguous.before_send_a", "zmq_ambiguous.before_send_b"):
        assert "zmq_ambiguous.after_recv" in traced.impacted(query)
