"""Trace format 2: message records name their channel by a number declared once per log."""

from __future__ import annotations

import sys
from pathlib import Path

from distea.tracer.config import TracerConfig
from distea.tracer.emitter import MAX_PENDING, Emitter
from distea.tracer.session import TracerSession
from distea.wire import Tag
from tests.tracing import run_traced

UNREACHABLE = "ipc:///nonexistent/distea-test/collector.ipc"


def test_a_channel_is_declared_once_and_a_name_with_two_kinds_gets_two_numbers(
    tmp_path: Path,
) -> None:
    session = TracerSession(TracerConfig(run_dir=str(tmp_path), endpoint=UNREACHABLE))
    session.emitter.pending.clear()
    session.send("tcp", "a>b", 0, 5)
    session.recv("tcp", "b>a", 0, 3)
    session.send("tcp", "a>b", 5, 9)
    session.send("ssl", "a>b", 0, 4)  # the same name seen through another layer
    records = [tuple(r) for r in session.emitter.pending]
    declared = {r[1]: (r[2], r[3]) for r in records if r[0] == Tag.CHANNEL}
    assert sorted(declared.values()) == [("ssl", "a>b"), ("tcp", "a>b"), ("tcp", "b>a")]
    messages = [(r[0], declared[r[2]], r[3], r[4]) for r in records
                if r[0] in (Tag.SEND, Tag.RECV)]
    assert messages == [(Tag.SEND, ("tcp", "a>b"), 0, 5), (Tag.RECV, ("tcp", "b>a"), 0, 3),
                        (Tag.SEND, ("tcp", "a>b"), 5, 9), (Tag.SEND, ("ssl", "a>b"), 0, 4)]
    first_use = {number: min(i for i, r in enumerate(records)
                             if r[0] in (Tag.SEND, Tag.RECV) and r[2] == number)
                 for number in declared}
    for i, r in enumerate(records):
        if r[0] == Tag.CHANNEL:
            assert i < first_use[r[1]], "declared before its first use"


def test_dropped_batches_keep_their_channel_declarations() -> None:
    """Later records name channels by the numbers a dropped batch declared."""
    emitter = Emitter(UNREACHABLE, "h:1:0", None, 100)
    declaration = (int(Tag.CHANNEL), 0, "tcp", "a>b")
    emitter.pending.append(declaration)
    emitter.pending.extend((int(Tag.SEND), i, 0, i, i + 1, -1, 1, None)
                           for i in range(MAX_PENDING + 1))
    emitter.flush()  # the collector is unreachable and the queue is past its bound: dropped
    assert emitter.dropped == MAX_PENDING + 1
    assert emitter.pending == [declaration]


FORKED_SENDER = """
import os, socket

def talk(sock, word):
    sock.sendall(word)

def main():
    a, b = socket.socketpair()
    talk(a, b"parent ")
    pid = os.fork()
    if pid == 0:
        talk(a, b"child")
        os._exit(0)
    os.waitpid(pid, 0)
    a.close()
    print(b.recv(100).decode(), flush=True)

main()
"""


def test_a_forked_child_declares_the_channels_it_uses(program, tmp_path: Path) -> None:
    script = program("forked.py", FORKED_SENDER)
    traced = run_traced([sys.executable, script.name], script.parent, tmp_path / "run")
    assert traced.result.stdout == "parent child\n", traced.result.stderr
    data = traced.data
    assert data.problems == []
    sends = {key: [(m.kind, m.channel, m.start, m.end) for m in events
                   if m.direction == "send" and m.kind == "unix"]
             for key, events in data.messages.items()}
    assert sorted(len(s) for s in sends.values()) == [1, 1]
    (parent_send,), (child_send,) = sorted(sends.values(), key=lambda s: s[0][2])
    assert parent_send[1] == child_send[1], "one channel, named alike in both logs"
    assert (parent_send[2:], child_send[2:]) == ((0, 7), (7, 12))
