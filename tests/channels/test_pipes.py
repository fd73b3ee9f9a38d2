"""Pipes as byte streams under a real ``distea run``: subprocess PIPEs, os.pipe, fork.

Every program runs untraced and traced (same output, same exit status) and
the expected impact sets are derived by hand from the program text, next to
each assertion.
"""

from __future__ import annotations

import pytest

from tests.channels.support import Traced, run_both

CHILD = r'''
import sys

def produce_a():
    print("line a", flush=True)

def produce_b():
    print("line b", flush=True)

def main():
    produce_a()
    sys.stdin.readline()  # wait for the parent's "go"
    produce_b()

main()
'''

PARENT = r'''
import os, subprocess, sys

def handle_a(line):
    return line.strip()

def ack(p):
    p.stdin.write("go\n")
    p.stdin.flush()

def handle_b(line):
    return line.strip()

def main():
    argv = [sys.executable, *sys.argv[1:], "child.py"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=env)
    got = [handle_a(p.stdout.readline())]
    ack(p)
    got.append(handle_b(p.stdout.readline()))
    p.stdin.close()
    p.stdout.close()
    p.wait()
    print(got)

main()
'''


@pytest.fixture(scope="module", params=["buffered", "unbuffered"])
def lines(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Traced:
    """The parent reads the child's lines with ``readline``; the child waits for an ack.

    ``buffered``: the child's stdout has a buffer layer (PYTHONUNBUFFERED is
    taken out of its environment); ``unbuffered``: the child runs with ``-u``.
    """
    folder = tmp_path_factory.mktemp("lines") / "app"
    folder.mkdir()
    (folder / "child.py").write_text(CHILD)
    (folder / "parent.py").write_text(PARENT)
    args = ("-u",) if request.param == "unbuffered" else ()
    traced = run_both(folder / "parent.py", *args)
    assert traced.stdout == "['line a', 'line b']\n"
    assert traced.errors() == 0
    return traced


def test_print_to_readline_is_an_edge(lines: Traced) -> None:
    # produce_b prints "line b" after reading the parent's "go"; the parent's
    # second readline receives it, and handle_b runs after that read. handle_a
    # and ack ran before the parent wrote "go", so before the child's read of
    # it, so before produce_b: never impacted.
    impacted = lines.impacted("child.produce_b")
    assert {"child.produce_b", "parent.handle_b", "parent.main"} <= impacted
    assert not {"parent.handle_a", "parent.ack", "child.produce_a"} & impacted


def test_first_line_reaches_everything_after_it(lines: Traced) -> None:
    # "line a" is read by the first readline: handle_a, ack and handle_b run after
    # it; the child's produce_b runs after reading "go", written after that.
    impacted = lines.impacted("child.produce_a")
    assert {"parent.handle_a", "parent.ack", "parent.handle_b", "child.produce_b"} <= impacted


def test_parent_write_to_stdin_is_an_edge(lines: Traced) -> None:
    # ack writes "go" to the child's stdin (a file object over a pipe); the child
    # reads it with sys.stdin.readline before produce_b; produce_a ran before.
    impacted = lines.impacted("parent.ack")
    assert "child.produce_b" in impacted
    assert "child.produce_a" not in impacted


def test_every_pipe_read_is_paired(lines: Traced) -> None:
    counts = lines.run.matching.by_kind["pipe"]
    assert counts.external == 0 and counts.ambiguous == 0 and counts.matched >= 3, counts
    # one stdout read per line at least, one stdin read in the child
    reads = {lines.role(ev) for ev in lines.events("pipe", "recv")}
    assert reads == {"parent.py", "child.py"}


COMMUNICATE_CHILD = r'''
import sys

def produce(text):
    for word in text.split():
        print(word.upper())  # block-buffered: written when the interpreter exits

produce(sys.stdin.read())
'''

COMMUNICATE_PARENT = r'''
import os, subprocess, sys

def handle(out):
    return out.split()

def main():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    p = subprocess.Popen([sys.executable, "-m", "child"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=env)
    out, _ = p.communicate("one two three")
    print(handle(out))

main()
'''


def test_communicate_reads_what_the_child_flushed_at_exit(program) -> None:
    program("child.py", COMMUNICATE_CHILD)
    traced = run_both(program("parent.py", COMMUNICATE_PARENT))
    assert traced.stdout == "['ONE', 'TWO', 'THREE']\n"
    # The child's output leaves at its final flush. Run with -m, the interpreter
    # flushes stdout only while it finalizes, after the tracer has finished (a
    # script file gets one more flush right after its last line): the tracer
    # flushes it first, so it is recorded, and every read of communicate() is
    # paired with it.
    child_sends = [ev for ev in traced.events("pipe", "send") if traced.role(ev) == "child"]
    parent_reads = [ev for ev in traced.events("pipe", "recv") if traced.role(ev) == "parent.py"]
    out = {ev.channel for ev in parent_reads}
    assert sum(ev.end - ev.start for ev in child_sends if ev.channel in out) == len(
        "ONE\nTWO\nTHREE\n")
    counts = traced.run.matching.by_kind["pipe"]
    assert counts.external == 0 and counts.ambiguous == 0, counts
    # communicate wrote the input with os.write; the child read it through sys.stdin
    assert "child.produce" in traced.impacted("parent.main")
    assert "parent.handle" in traced.impacted("child.produce")


FRAME = r'''
import os, struct

def send_frame(w):
    body = b"hello"
    os.write(w, struct.pack(">H", len(body)) + body)  # one write

def before_read():
    return 0

def read_exactly(r, n):
    data = b""
    while len(data) < n:
        data += os.read(r, n - len(data))
    return data

def read_header(r):
    return struct.unpack(">H", read_exactly(r, 2))[0]

def read_body(r, n):
    return read_exactly(r, n)

def after_body(body):
    return body

r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    send_frame(w)
    os._exit(0)
os.close(w)
before_read()
print(after_body(read_body(r, read_header(r))))
os.waitpid(pid, 0)
'''


def test_one_write_read_as_header_and_body_pairs_twice(program) -> None:
    traced = run_both(program("frame.py", FRAME))
    assert traced.stdout == "b'hello'\n"
    edges = traced.edges("pipe")
    # both reads (header [0, 2), body [2, 7)) pair with the child's one write [0, 7)
    assert sorted((r.start, r.end) for _, r in edges) == [(0, 2), (2, 7)]
    assert {(s.start, s.end) for s, _ in edges} == {(0, 7)}
    assert {s.method for s, _ in edges} == {"frame.send_frame"}
    impacted = traced.impacted("frame.send_frame")
    # the reads run inside read_header and read_body; after_body after them.
    # before_read ran in the parent after the fork, concurrently: not impacted.
    assert {"frame.read_header", "frame.read_body", "frame.after_body"} <= impacted
    assert "frame.before_read" not in impacted


FINALIZER = r'''
import os
import weakref
from multiprocessing import Pipe

def finalizer_writes(w):
    os.write(w, b"bye")  # as a collected semaphore unregisters with the resource tracker

def after_read(data):
    return data

class Resource:
    pass

class Payload(bytes):
    # A message whose concatenation drops the last reference to a resource: its
    # finalizer runs inside multiprocessing's send, as a garbage-collected
    # semaphore's may (the resource tracker's UNREGISTER lines were lost so).
    def __radd__(self, header):
        self.resource = None
        return header + bytes(self)

r, w = os.pipe()
resource = Resource()
weakref.finalize(resource, finalizer_writes, w)
payload = Payload(b"data")
payload.resource = resource
del resource
reader, writer = Pipe(duplex=False)
writer._send_bytes(payload)
print(reader.recv_bytes())
print(after_read(os.read(r, 3)))
'''


def test_a_pipe_written_inside_a_multiprocessing_call_is_recorded(program) -> None:
    traced = run_both(program("finalizer.py", FINALIZER))
    assert traced.stdout == "b'data'\nb'bye'\n"
    # the connection's own message is an mp message, the finalizer's write a pipe's
    assert [(s.method, (s.start, s.end)) for s, _ in traced.edges("pipe")] == [
        ("finalizer.finalizer_writes", (0, 3))]
    assert len(traced.edges("mp")) == 1
    assert traced.run.matching.by_kind["pipe"].external == 0 and traced.errors() == 0
    assert "finalizer.after_read" in traced.impacted("finalizer.finalizer_writes")


SHARED = r'''
import os

def parent_writes(w):
    os.write(w, b"p")

def child_writes(w):
    os.write(w, b"c")

def after_turns(data):
    return data

def after_both(data):
    return data

def read_all(r, n):
    data = b""
    while len(data) < n:
        data += os.read(r, n - len(data))
    return data

# Turns: the parent writes, then forks; only the child writes after the fork.
r, w = os.pipe()
parent_writes(w)
pid = os.fork()
if pid == 0:
    child_writes(w)
    os._exit(0)
os.close(w)
print(after_turns(read_all(r, 2)))
os.waitpid(pid, 0)
os.close(r)

# At once: parent and child both write after the fork.
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    child_writes(w)
    os._exit(0)
parent_writes(w)
os.close(w)
print(sorted(after_both(read_all(r, 2))))
os.waitpid(pid, 0)
'''


def test_fork_sharing_a_pipe(program) -> None:
    traced = run_both(program("shared.py", SHARED))
    assert traced.stdout == "b'pc'\n[99, 112]\n"
    m = traced.run.matching
    turns_channel, both_channel = (ev.channel for ev in traced.events("pipe", "send")
                                   if ev.method == "shared.parent_writes")
    # Turns: the child inherited the parent's count, so its byte is [1, 2) and
    # the parent's read that got it pairs with it exactly.
    edges = [(s, r) for s, r in traced.edges("pipe") if r.channel == turns_channel]
    assert any(s.method == "shared.child_writes" and (s.start, s.end) == (1, 2)
               for s, _ in edges), edges
    # At once: both counted [0, 1), so offsets say nothing; the CLOCK_MONOTONIC
    # brackets of the two writes place the bytes (exactly, unless the writes ran
    # at the same moment: then uncertain), and the read that ends with the
    # second byte is after the child's write either way.
    order = traced.run.order
    child = next(ev for ev in traced.events("pipe", "send")
                 if ev.channel == both_channel and ev.method == "shared.child_writes")
    last_read = [ev for ev in traced.events("pipe", "recv") if ev.channel == both_channel][-1]
    assert order.happens_before(order.index[child.process], child.clock,
                                order.index[last_read.process], last_read.clock)
    assert m.by_kind["pipe"].external == 0
    # Safe either way: after_turns and after_both both run after a read that
    # (certainly or possibly) got the child's byte.
    assert {"shared.after_turns", "shared.after_both"} <= traced.impacted("shared.child_writes")


SAME = r'''
import io, os, subprocess, sys

def describe(stream):
    layers = [type(stream).__name__]
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        layers.append(type(buffer).__name__)
        raw = getattr(buffer, "raw", None)
        layers.append(isinstance(raw if raw is not None else buffer, io.FileIO))
    return (layers, stream.encoding, stream.errors, stream.line_buffering,
            stream.write_through, stream.mode, stream.name, stream.fileno(), stream.closed)

if sys.argv[1:] == ["child"]:
    print(describe(sys.stdin), describe(sys.stdout), describe(sys.stderr))
    print(repr(sys.stdin.readline()), sys.stdin.read().split("\r"))
    sys.exit(0)

p = subprocess.Popen([sys.executable, __file__, "child"], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
out, err = p.communicate(b"first\nsecond\r\nthird\r")
print(out.decode(), err.decode(), p.returncode)
print(sys.stdout is sys.__stdout__, describe(sys.stdout), describe(sys.stderr))
for mode, buffering in (("rb", -1), ("rb", 0), ("r", -1), ("r", 1), ("rb", 7)):
    r, w = os.pipe()
    with open(w, "w" if "b" not in mode else "wb", closefd=True) as f:
        print(type(f).__name__, f.write("a\nb\r\n" if "b" not in mode else b"a\nb\r\n"))
    with os.fdopen(r, mode, buffering) as f:
        print(mode, buffering, type(f).__name__, repr(f.readline()), repr(f.read()),
              getattr(f, "newlines", None))
for bad in ({"mode": "rw"}, {"mode": "r", "buffering": 0}, {"mode": "rb", "encoding": "x"},
            {"mode": "r", "encoding": "no-such-codec"}):
    r, w = os.pipe()
    try:
        open(r, **bad)
    except (ValueError, LookupError) as exc:
        print(type(exc).__name__, exc)
    for fd in (r, w):
        try:
            os.close(fd)
            print("was open")
        except OSError:
            print("was closed")
'''


def test_streams_and_files_over_pipes_behave_as_untraced(program) -> None:
    # run_both compares the traced output with the untraced one, byte for byte:
    # the rebuilt standard streams (a pipe each, in the child) and open() over
    # pipes report the same layers, settings, data and errors.
    traced = run_both(program("same.py", SAME))
    assert "['first\\n'" not in traced.stdout  # the child's lines are printed repr()
    assert "'first\\n'" in traced.stdout and "ValueError" in traced.stdout
    assert traced.errors() == 0
    assert traced.run.matching.by_kind["pipe"].external == 0


NAMED_PIPE = r'''
import os, subprocess, sys

def produce():
    return "payload"

def consume(data):
    return data.upper()

if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as fifo:
        fifo.write(produce())
else:
    path = "channel.fifo"
    if os.path.exists(path):
        os.remove(path)
    os.mkfifo(path)
    child = subprocess.Popen([sys.executable, __file__, path])
    with open(path) as fifo:
        print(consume(fifo.read()), fifo.name, fifo.mode, fifo.encoding)
    child.wait()
    os.remove(path)
'''


def test_a_named_pipe_opened_by_path_at_both_ends_is_an_edge(program) -> None:
    """``os.mkfifo``, then ``open(path, "w")`` in the child and ``open(path)`` in the
    parent: 7 bytes up, paired exactly (by hand), and the file objects look as untraced
    (name, mode, encoding). Before, neither end was recorded: a silent miss."""
    traced = run_both(program("fifo.py", NAMED_PIPE))
    assert traced.stdout.split()[:3] == ["PAYLOAD", "channel.fifo", "r"]
    edges = traced.edges("pipe")
    assert [(s.start, s.end, r.start, r.end) for s, r in edges] == [(0, 7, 0, 7)]
    counts = traced.run.matching.by_kind["pipe"]
    assert counts.external == 0 and counts.ambiguous == 0, counts
    assert "fifo.consume" in traced.impacted("fifo.produce")


BULK = r'''
import os, sys, tempfile

def produce():
    return b"vectored"

def stage():
    return b"spliced!"

def consume(data):
    return data.upper()

read_end, write_end = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(read_end)
    os.writev(write_end, [produce(), b"-"])  # 9 bytes in one call
    with tempfile.TemporaryFile() as f:
        f.write(stage())
        f.flush()
        os.splice(f.fileno(), write_end, 8, offset_src=0)  # a file's bytes into the pipe
    os._exit(0)
os.close(write_end)
first, second = bytearray(9), bytearray(8)
assert os.readv(read_end, [first]) == 9
got = 0
while got < 8:
    got += os.readv(read_end, [memoryview(second)[got:]])
print(consume(bytes(first)).decode(), consume(bytes(second)).decode(), flush=True)
os.waitpid(pid, 0)
'''


def test_readv_writev_and_splice_move_pipe_bytes(program) -> None:
    """A forked child writes a pipe with ``os.writev`` and ``os.splice`` (a file's
    bytes into the pipe), its parent reads it with ``os.readv``. Expected by hand: two
    sends (bytes 0-9, 9-17) and the reads that got them, paired with certainty; the
    child's ``produce`` and ``stage`` reach the parent's ``consume``. Before, none of
    the four calls was recorded: no edge, and nothing said why."""
    traced = run_both(program("bulk.py", BULK))
    assert traced.stdout == "VECTORED- SPLICED!\n"
    child = [e for e in traced.events("pipe", "send")  # not the parent's stdout
             if traced.run.processes[e.process].start_method == "fork"]
    assert sorted((e.start, e.end) for e in child) == [(0, 9), (9, 17)]
    assert traced.run.matching.by_kind["pipe"].recvs >= 2
    traced.assert_all_paired("pipe")
    assert "bulk.consume" in traced.impacted("bulk.produce")
    assert "bulk.consume" in traced.impacted("bulk.stage")


MOCKED_FSTAT = r'''
import os, tempfile
from unittest import mock

def produce():
    return b"mocked"

def consume(data):
    return data.upper()

read_end, write_end = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(read_end)
    fake = mock.Mock()
    fake.st_size = 1 << 30  # shutil's test_big_chunk: a file "bigger" than it is
    with mock.patch("os.fstat", return_value=fake) as fstat, tempfile.TemporaryFile() as f:
        f.write(produce())
        f.flush()
        sent = os.sendfile(write_end, f.fileno(), 0, 6)
    print("child", sent, fstat.call_count, flush=True)
    os._exit(0)
os.close(write_end)
os.waitpid(pid, 0)
with mock.patch("os.fstat", side_effect=AssertionError("not for the program")) as fstat:
    data = os.read(read_end, 100)
print(consume(data).decode(), fstat.call_count, flush=True)
'''


def test_a_program_that_mocks_os_fstat_sees_none_of_the_tracers_calls(program) -> None:
    """CPython's ``test_shutil.TestZeroCopySendfile.test_big_chunk`` mocks
    ``os.fstat`` around ``os.sendfile``: the tracer's own ``fstat`` of the descriptors
    met the mock and raised into the program (TypeError), and a program counting the
    mock's calls would have counted the tracer's. The tracer's ``fstat`` is ``posix``'s:
    the program's mocks see none of its calls, and the bytes are still recorded at
    both ends (expected by hand: the child's 6 bytes, and its 10-byte line on stdout)."""
    traced = run_both(program("mocked_fstat.py", MOCKED_FSTAT))
    assert traced.stdout == "child 6 0\nMOCKED 0\n"
    child = [e for e in traced.events("pipe", "send")
             if traced.run.processes[e.process].start_method == "fork"]
    assert sorted((e.start, e.end) for e in child) == [(0, 6), (0, 10)]
    traced.assert_all_paired("pipe")
    assert "mocked_fstat.consume" in traced.impacted("mocked_fstat.produce")
