"""Objects of the program that the garbage collector finalizes at exit are finalized
as untraced: the same ones, in the same order, with ``sys.stdout`` still there.

The tracer's objects make each traced process's exit slower (the collections at exit
traverse them; docs/performance.md), and ``gc.freeze()`` just before the program's
first line made that exit faster than untraced. It also froze ``__main__``'s module
and dictionary: its module-level objects were then cleared by the interpreter's last
resort, and a cycle among them was collected only after ``sys`` was gone, its
finalizer's output lost. This test is what showed it.
"""

from __future__ import annotations

from pathlib import Path

from tests.reliability.helpers import PY
from tests.tracing import run_traced, run_untraced


def test_garbage_cycles_of_the_program_are_finalized_at_exit_as_untraced(
        program, tmp_path: Path) -> None:
    """A cycle at module level (garbage once ``__main__`` is torn down) and one dropped
    at once: each finalized at exit, in the same order and with the same output."""
    script = program("cycles.py", """
        class Node:
            def __init__(self, name):
                self.name, self.peer = name, None
            def __del__(self):
                print("finalized", self.name, flush=True)
        def pair(name):
            a, b = Node(name + "-a"), Node(name + "-b")
            a.peer, b.peer = b, a
            return a
        kept = pair("module-level")   # garbage once the module is torn down
        pair("dropped")               # garbage at once, for the collector
        print("end", flush=True)
    """)
    traced = run_traced([PY, script.name], script.parent, tmp_path / "run", timeout=60)
    plain = run_untraced([PY, script.name], script.parent, timeout=60)
    assert traced.result.stdout == plain.stdout
    assert plain.stdout.count("finalized") == 4


def test_a_finalizer_that_prints_after_the_modules_are_cleared_prints_as_untraced(
        program, tmp_path: Path) -> None:
    """CPython's ``test_builtin.ShutdownTest.test_cleanup``: a module kept alive past
    the interpreter's module clean-up (``builtins`` and ``sys`` hold it) prints from a
    finalizer at the very end. Its standard output is a pipe, which the pipe channel's
    raw layer stands over to the end; that layer called ``io.FileIO.write`` through its
    module's globals, gone (``None``) by then: ``AttributeError``, nothing printed."""
    script = program("late.py", """
        import builtins, sys
        class Late:
            def __del__(self):
                print("before")
                len(())
                print("after")
        late = Late()
        builtins.here = sys.modules[__name__]
        sys.here = sys.modules[__name__]
        here = sys.modules[__name__]
    """)
    traced = run_traced([PY, script.name], script.parent, tmp_path / "run", timeout=60)
    plain = run_untraced([PY, script.name], script.parent, timeout=60)
    assert plain.stdout.splitlines() == ["before", "after"], plain.stderr
    assert (traced.result.stdout, traced.result.stderr) == (plain.stdout, plain.stderr)
