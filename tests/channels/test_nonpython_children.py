"""Children that are not Python: their output and exit are explained and ordered.

Real programs (``cat``, ``tr``, ``uname``) started by traced Python processes
under a real ``distea run``; expected impact sets are derived by hand from
the program text beside each assertion.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.channels.support import Traced, run_both

ASK = r'''
import subprocess

def ask():
    return subprocess.run(["cat"], input=b"hello\n", capture_output=True, check=True).stdout

def use(data):
    return data.decode().strip()

print(use(ask()))
'''


def test_reading_a_non_python_child_is_explained(program) -> None:
    # the parent writes cat's stdin, reads its stdout and waits for it: both receives
    # come from cat, whose only input is the parent (its spawn and its stdin)
    traced = run_both(program("ask.py", ASK))
    assert traced.stdout == "hello\n"
    m = traced.run.matching
    assert m.external == 0 and m.ambiguous == 0, traced.run.problems
    [cat] = m.children
    assert (cat.outputs, cat.exits, cat.relayed) == (1, 1, 0)
    assert cat.child.pipes[0] and cat.child.pipes[1] and cat.child.pipes[2]
    assert not traced.run.external_reasons
    # cat may write files: the run still says that it was not observed inside
    assert any("not Python" in p and "(cat)" in p for p in traced.run.problems)
    assert any("cat" in note for note in traced.run.notes)


MISSING = r'''
import subprocess

def try_to_start():
    try:
        subprocess.run(["no-such-program-here"])
    except FileNotFoundError as exc:
        return exc.strerror

print(try_to_start())
'''


def test_a_failed_exec_is_explained(program) -> None:
    # the forked child writes exec's error in C on a pipe the parent reads: it comes
    # from the spawn (CPython's test_subprocess read 2,085 such errors, all external)
    traced = run_both(program("missing.py", MISSING))
    assert traced.stdout == "No such file or directory\n"
    m = traced.run.matching
    assert m.external == 0 and m.ambiguous == 0, traced.run.problems
    [child] = m.children
    assert child.outputs == 1 and child.child.pipes[3]
    assert not traced.run.external_reasons


QUIET = r'''
import subprocess

def system():
    return subprocess.check_output(["uname", "-s"]).decode().strip()

print(system())
'''


def test_a_program_that_only_prints_is_no_problem(program) -> None:
    # ``uname`` reads the system's name and prints it (like ``ldconfig -p`` that
    # ``import torch`` runs): once its output and exit are ordered, nothing is left
    traced = run_both(program("quiet.py", QUIET))
    assert traced.run.problems == []
    assert any("uname" in note for note in traced.run.notes)


PRODUCER = r'''
import sys

def produce():
    sys.stdout.write("one two three\n")
    sys.stdout.flush()

produce()
'''

CONSUMER = r'''
import sys

def early():
    return 1

def consume(text):
    return text.split()

def after(words):
    print(len(words))

early()
after(consume(sys.stdin.read()))
'''

PIPELINE = r'''
import subprocess, sys

def start():
    a = subprocess.Popen([sys.executable, "producer.py"], stdout=subprocess.PIPE)
    middle = subprocess.Popen(MIDDLE, stdin=a.stdout, stdout=subprocess.PIPE)
    a.stdout.close()
    b = subprocess.Popen([sys.executable, "consumer.py"], stdin=middle.stdout)
    middle.stdout.close()
    for p in (a, middle, b):
        p.wait()

start()
'''


@pytest.fixture(scope="module", params=["tr", "tr+cat"])
def pipeline(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> Traced:
    """``producer.py | tr a-z A-Z | consumer.py`` (and with ``cat`` after ``tr``), all
    started by one traced parent."""
    folder = tmp_path_factory.mktemp("pipeline") / "app"
    folder.mkdir()
    (folder / "producer.py").write_text(PRODUCER)
    (folder / "consumer.py").write_text(CONSUMER)
    if request.param == "tr":
        middle = '["tr", "a-z", "A-Z"]'
        text = PIPELINE
    else:  # two non-Python children in the middle: tr's stdout is cat's stdin
        middle = '["tr", "a-z", "A-Z"]'
        text = PIPELINE.replace(
            "    middle = subprocess.Popen(MIDDLE, stdin=a.stdout, stdout=subprocess.PIPE)\n",
            "    first = subprocess.Popen(MIDDLE, stdin=a.stdout, stdout=subprocess.PIPE)\n"
            "    middle = subprocess.Popen(['cat'], stdin=first.stdout, "
            "stdout=subprocess.PIPE)\n    first.stdout.close()\n")
    (folder / "pipeline.py").write_text(text.replace("MIDDLE", middle))
    traced = run_both(folder / "pipeline.py", timeout=90)
    assert traced.stdout == "3\n"
    return traced


def test_a_non_python_child_in_the_middle_relays(pipeline: Traced) -> None:
    # produce writes to the pipe tr reads; consumer reads tr's (or cat's) output:
    # consume and after run after that read, early before it
    impacted = pipeline.impacted("producer.produce")
    assert {"producer.produce", "consumer.consume", "consumer.after"} <= impacted
    assert "consumer.early" not in impacted
    # nothing flows back from the consumer to the producer
    assert "producer.produce" not in pipeline.impacted("consumer.early")


def test_the_middle_child_is_explained_not_external(pipeline: Traced) -> None:
    m = pipeline.run.matching
    assert m.external == 0, pipeline.run.problems
    reader = [t for t in m.children if t.outputs]
    # consumer's read and the parent's wait for that child: after the producer's write
    assert len(reader) == 1 and (reader[0].outputs, reader[0].exits, reader[0].relayed) == (
        1, 1, 2)
    assert not any("receives have no recorded send" in p for p in pipeline.run.problems)


FEEDER = r'''
import subprocess, sys

def produce(p):
    p.stdin.write(b"from the feeder\n")
    p.stdin.close()

def main():
    p = subprocess.Popen([sys.executable, "reader.py"], stdin=subprocess.PIPE)
    produce(p)
    p.wait()

main()
'''

READER = r'''
import subprocess

def early():
    return 0

def use(data):
    print(data.decode().strip())

early()
# cat inherits this process's stdin (the feeder's pipe): only its stdout is redirected
use(subprocess.run(["cat"], stdout=subprocess.PIPE, check=True).stdout)
'''


def test_a_child_that_inherits_a_pipe_as_stdin_relays_it(tmp_path: Path) -> None:
    # feeder.produce writes the pipe that is reader's stdin; cat, started by reader
    # without redirecting stdin, reads it and prints it to reader: use runs after that
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "feeder.py").write_text(FEEDER)
    (folder / "reader.py").write_text(READER)
    traced = run_both(folder / "feeder.py")
    assert traced.stdout == "from the feeder\n"
    impacted = traced.impacted("feeder.produce")
    assert "reader.use" in impacted
    assert "reader.early" not in impacted
    [cat] = traced.run.matching.children
    assert cat.child.pipes[0] is not None and cat.relayed >= 1
