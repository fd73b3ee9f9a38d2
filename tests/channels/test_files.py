"""Files as a channel: a write-close is a send, an open for reading a receive.

Every expectation is derived from the programs below, never from the
analyzer's own output. In each program the reader is started *before* the
writer writes, so no spawn or exit edge could carry the impact: only the
file can.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path

from distea.analyzer.matching import match
from distea.model import MessageEvent
from tests.channels.support import run_both

WAIT_FOR_FILE = '''
import os, time


def fresh(*paths):
    """run_both runs each program twice in one directory: start without the last run's files."""
    for path in paths:
        if os.path.exists(path):
            os.remove(path)


def wait_for(path):
    deadline = time.monotonic() + 30
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit("no " + path)
        time.sleep(0.01)
'''

CONFIG = WAIT_FOR_FILE + '''
import json, multiprocessing as mp, pathlib, sys


def make_config():
    return {"lr": 0.5, "steps": 3}


def write_config(path):
    with open(path + ".tmp", "w") as f:
        json.dump(make_config(), f)
    os.replace(path + ".tmp", path)  # written aside, renamed into place: the same inode


def parse(text):
    return json.loads(text)


def read_config(path):
    wait_for(path)
    return parse(pathlib.Path(path).read_text())


def scratch():
    with open("scratch-" + str(os.getpid()), "w") as f:  # nobody else reads it
        f.write("mine")


def worker(path, out):
    scratch()
    out.put(read_config(path)["lr"])


def before_config():
    return 1


if __name__ == "__main__":
    fresh("config.json")
    ctx = mp.get_context(sys.argv[1])
    out = ctx.SimpleQueue()
    child = ctx.Process(target=worker, args=("config.json", out))
    child.start()
    before_config()
    write_config("config.json")
    print("worker read lr", out.get())
    child.join()
'''


def test_config_written_then_read_by_a_running_child(program: Callable[[str, str], Path]
                                                       ) -> None:
    script = program("config.py", CONFIG)
    traced = run_both(script, "spawn")
    assert traced.stdout == "worker read lr 0.5\n"
    # make_config runs in the parent after the child started; the child's read_config,
    # parse and worker run after the file was closed and renamed into place
    impacted = traced.impacted("config.make_config")
    assert {"config.read_config", "config.parse", "config.worker"} <= impacted
    # the child's own scratch file and code before the config existed are not reached
    assert "config.scratch" not in impacted
    # the pairing is certain and one: the write-close of the temporary name, read under
    # the final name (os.replace keeps the inode)
    (send, recv), = traced.edges("file")
    assert send.meta["path"].endswith("config.json.tmp")
    assert recv.meta["path"].endswith("config.json")
    counts = traced.run.matching.by_kind["file"]
    assert (counts.sends, counts.recvs, counts.matched, counts.ambiguous) == (1, 1, 1, 0)
    assert not [p for p in traced.run.problems if "file" in p]
    explanation = traced.run.explain("config.make_config", "config.parse")
    assert any(s.action == "recv" and "config.json" in s.detail for s in explanation.steps)


OS_LEVEL = WAIT_FOR_FILE + '''
import multiprocessing as mp, pathlib


def produce():
    return b"payload"


def write_raw(path):
    fd = os.open(path + ".part", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, produce())
    os.close(fd)
    os.rename(path + ".part", path)


def consume(path):
    wait_for(path)
    fd = os.open(path, os.O_RDONLY)
    data = os.read(fd, 100)
    os.close(fd)
    return data


def worker(path):
    print("got", consume(path).decode(), flush=True)


if __name__ == "__main__":
    fresh("raw.bin")
    child = mp.get_context("fork").Process(target=worker, args=("raw.bin",))
    child.start()
    write_raw("raw.bin")
    child.join()
'''


def test_os_open_write_close_and_os_open_read(program: Callable[[str, str], Path]) -> None:
    script = program("raw.py", OS_LEVEL)
    traced = run_both(script)
    assert traced.stdout == "got payload\n"
    assert {"raw.consume", "raw.worker"} <= traced.impacted("raw.produce")
    assert len(traced.edges("file")) == 1


UNSEEN = WAIT_FOR_FILE + '''
import subprocess, multiprocessing as mp


def write_notes(path):
    with open(path, "w") as f:
        f.write("first\\n")


def read_notes(path):
    wait_for(path + ".ready")
    with open(path) as f:
        return f.read().splitlines()


def worker(path):
    print(read_notes(path), flush=True)


if __name__ == "__main__":
    fresh("notes.txt", "notes.txt.ready")
    child = mp.get_context("fork").Process(target=worker, args=("notes.txt",))
    child.start()
    write_notes("notes.txt")
    # a shell (not Python, so not traced) appends to the file, then says it is ready
    subprocess.run(["sh", "-c", "sleep 0.05; echo second >> notes.txt; touch notes.txt.ready"],
                   check=True)
    child.join()
'''


def test_a_change_the_tracer_did_not_see_is_a_problem(program: Callable[[str, str], Path]
                                                       ) -> None:
    script = program("unseen.py", UNSEEN)
    traced = run_both(script)
    assert traced.stdout == "['first', 'second']\n"
    # the traced write still reaches the reader (safe) ...
    assert "unseen.read_notes" in traced.impacted("unseen.write_notes")
    # ... and the append done by the shell is named as unseen
    assert any("notes.txt" in p and "changed after its last recorded write" in p
               for p in traced.run.problems), traced.run.problems


ALONE = '''
import pickle


def save(path):
    with open(path, "wb") as f:
        pickle.dump({"a": 1}, f)
    with open(path, "rb") as f:
        return pickle.load(f)


if __name__ == "__main__":
    print(save("state.pkl"))
'''


def test_a_file_only_one_process_touches_adds_no_edge_and_no_noise(
        program: Callable[[str, str], Path]) -> None:
    script = program("alone.py", ALONE)
    traced = run_both(script)
    assert traced.stdout == "{'a': 1}\n"
    assert len(traced.events("file")) == 2  # recorded, then dropped by the analyzer
    assert "file" not in traced.run.matching.by_kind
    assert not [p for p in traced.run.problems if "file" in p or "receive" in p]


def test_the_patched_open_pickles_like_the_original(program: Callable[[str, str], Path]
                                                     ) -> None:
    script = program("pickled.py", '''
import io, os, pickle
print(pickle.loads(pickle.dumps(open)) is open, pickle.loads(pickle.dumps(io.open)) is io.open)
print(pickle.loads(pickle.dumps(os.open)) is os.open, open.__name__, os.close.__name__)
''')
    traced = run_both(script)
    assert traced.stdout == "True True\nTrue open close\n"
    assert traced.errors() == 0
    assert pickle.loads(pickle.dumps(open)) is open  # and the test process is untouched


# -- the truncation rule, on hand-made events ------------------------------------------


def _write(process: str, clock: int, t_open: int, t_close: int, trunc: bool) -> MessageEvent:
    return MessageEvent(process, clock, "send", "file", "8:42", 0, 1, "m", 1,
                        {"path": "/x", "t": t_close, "t_open": t_open, "trunc": trunc})


def _read(process: str, clock: int, t: int) -> MessageEvent:
    return MessageEvent(process, clock, "recv", "file", "8:42", 0, 1, "m", 1,
                        {"path": "/x", "t": t})


def test_a_truncating_write_hides_what_was_closed_before_it() -> None:
    a, b, c, r = "h:1:1", "h:2:2", "h:3:3", "h:4:4"
    messages = {
        a: [_write(a, 1, t_open=10, t_close=20, trunc=True)],    # wiped by b's open
        b: [_write(b, 1, t_open=30, t_close=50, trunc=True)],
        c: [_write(c, 1, t_open=35, t_close=40, trunc=False)],   # appended after b's open
        r: [_read(r, 1, t=60), _read(r, 2, t=25)],
    }
    m = match(messages)
    senders = {}
    for s, rcv in m.edges:
        senders.setdefault(m.events[rcv].clock, set()).add(m.events[s].process)
    assert senders == {1: {b, c}, 2: {a}}
    assert m.ambiguous == 0 and m.external == 0


def test_across_hosts_a_read_is_ordered_after_every_write_of_its_path() -> None:
    w, r = "node1:1:1", "node2:2:2"
    messages = {w: [_write(w, 1, 10, 20, True), _write(w, 2, 30, 40, True)],
                r: [_read(r, 1, t=5)]}  # the other host's clock says nothing here
    m = match(messages)
    assert m.edges == [] and m.ambiguous == 1
    ((receive, chains),) = m.uncertain
    assert m.events[receive].process == r
    assert [m.events[s].clock for chain in chains for s in chain] == [1, 2]


MKSTEMP = WAIT_FOR_FILE + '''
import multiprocessing as mp, tempfile


def produce():
    return "state"


def write_atomically(path):
    fd, tmp = tempfile.mkstemp(dir=".")
    with os.fdopen(fd, "w") as f:  # closed by the stream, never through os.close
        f.write(produce())
    os.replace(tmp, path)


def consume(path):
    wait_for(path)
    with open(path) as f:
        return f.read()


def worker(path):
    print("got", consume(path), flush=True)


if __name__ == "__main__":
    fresh("state.txt")
    child = mp.get_context("fork").Process(target=worker, args=("state.txt",))
    child.start()
    write_atomically("state.txt")
    child.join()
'''


def test_mkstemp_then_fdopen_then_replace_is_a_write(program: Callable[[str, str], Path]
                                                      ) -> None:
    script = program("atomic.py", MKSTEMP)
    traced = run_both(script)
    assert traced.stdout == "got state\n"
    assert {"atomic.consume", "atomic.worker"} <= traced.impacted("atomic.produce")
    assert len(traced.edges("file")) == 1


def test_a_file_created_afresh_holds_nothing_written_before_it() -> None:
    # a wrote and closed a file, then deleted it; b created a file that got the same
    # inode (mkstemp: O_CREAT | O_EXCL), read it at its open (new, empty) and wrote it;
    # r read it later. b's open holds nothing of a's file; r reads b's bytes only.
    a, b, r = "h:1:1", "h:2:2", "h:3:3"
    created = MessageEvent(b, 1, "recv", "file", "8:42", 0, 1, "m", 1,
                           {"path": "/tmp/new", "t": 30, "new": True, "mtime": 150})
    messages = {
        a: [MessageEvent(a, 1, "send", "file", "8:42", 0, 1, "m", 1,
                         {"path": "/tmp/old", "t": 20, "t_open": 10, "trunc": False,
                          "mtime": 100})],
        b: [created, _write(b, 2, t_open=30, t_close=40, trunc=True)],
        r: [_read(r, 1, t=50)],
    }
    m = match(messages)
    assert [(m.events[s].process, m.events[rcv].process) for s, rcv in m.edges] == [(b, r)]
    assert m.notes == []  # no "changed after its last recorded write" for the new file


CREATING_OPENS = """
import os, tempfile


def main():
    fd, path = tempfile.mkstemp(dir=".")  # os.open with O_RDWR | O_CREAT | O_EXCL
    os.write(fd, b"made")
    os.close(fd)
    with open(os.path.join(tempfile.mkdtemp(dir="."), "x.txt"), "x+") as f:  # + reads too
        f.write("made")
    with open(path, "w+") as f:  # truncated at its open: reads nothing older
        f.write("again")
    with open(path) as f:  # an ordinary read
        text = f.read()
    named = tempfile.NamedTemporaryFile(dir=".", delete=False)  # through an opener
    named.write(b"named")
    named.close()  # the stream closes the descriptor os.open made
    fd = os.open(named.name, os.O_RDONLY)  # likely the same descriptor number again
    os.close(fd)  # no write of the closed temporary file is recorded here
    return text


print(main())
"""


def test_an_open_that_creates_or_truncates_starts_a_new_content(
        program: Callable[[str, str], Path]) -> None:
    # every open that created or truncated the file says so (new on its receive,
    # trunc on its send); the last, plain read does not
    traced = run_both(program("creates.py", CREATING_OPENS))
    assert traced.stdout == "again\n"
    reads = traced.events("file", "recv")
    assert [bool(ev.meta and ev.meta.get("new")) for ev in reads] == [
        True, True, True, False, True, False]
    writes = traced.events("file", "send")
    assert [bool(ev.meta and ev.meta.get("trunc")) for ev in writes] == [True] * 4
    # the named file's one write, recorded at its stream's close under its own path
    assert writes[-1].meta and writes[-1].meta["size"] == 5
    assert writes[-1].meta["path"] == reads[-1].meta["path"]  # type: ignore[index]


GENERATED = '''
import pathlib, subprocess, sys

def generate():
    return "VALUE = 42\\n"

def write(folder):
    with open(folder / "generated.py", "w") as f:  # code another process will import
        f.write(generate())

if __name__ == "__main__":
    folder = pathlib.Path(sys.argv[0]).resolve().parent
    write(folder)
    subprocess.run([sys.executable, "-c", "import generated; print(generated.VALUE)"],
                   cwd=folder, check=True)
    with open(__file__) as f:  # reading code says nothing
        f.read()
'''


def test_code_written_for_another_process_to_import_is_a_problem(
        program: Callable[[str, str], Path]) -> None:
    """A generator writes a module that a child imports. Imports are not recorded (the
    import system reads code through ``open`` too, at every import), so the edge from
    ``generate`` to the child cannot be drawn; it was skipped without a word. The
    writer's process now says so once; reading code, as imports do, says nothing."""
    traced = run_both(program("generator.py", GENERATED))
    assert traced.stdout == "42\n"
    said = [p for p in traced.run.problems if "wrote Python code" in p]
    assert len(said) == 1 and "generated.py" in said[0], traced.run.problems
    assert said[0].startswith("generator.py (pid ")
