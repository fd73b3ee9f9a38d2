"""Helpers for the channel tests: run a program traced and untraced, read the pairing."""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import distea
from distea.analyzer.run import Run
from distea.model import MessageEvent
from tests.tracing import run_traced, run_untraced

PY = sys.executable
CONNECTED_PAIR = '''
def connected_pair(family):
    """The two ends of one connection: a Unix socket pair, or TCP on 127.0.0.1 (the
    accepted end first). ``socket`` is imported only here, by the caller."""
    import socket
    if family == "unix":
        return socket.socketpair()
    listener = socket.create_server(("127.0.0.1", 0))
    near = socket.create_connection(listener.getsockname())
    far, _ = listener.accept()
    listener.close()
    return far, near
'''
"""Program text for the socket tests' programs: one connection of either family."""


@dataclass
class Traced:
    run: Run
    stdout: str

    def edges(self, kind: str) -> list[tuple[MessageEvent, MessageEvent]]:
        """Certain (send, receive) pairs of one channel kind, as the analyzer matched them."""
        m = self.run.matching
        return [(m.events[s], m.events[r]) for s, r in m.edges if m.events[r].kind == kind]

    def events(self, kind: str, direction: str | None = None) -> list[MessageEvent]:
        return [e for evs in self.run.messages.values() for e in evs
                if e.kind == kind and (direction is None or e.direction == direction)]

    def role(self, event: MessageEvent) -> str:
        return self.run.processes[event.process].role

    def impacted(self, query: str) -> set[str]:
        """Method names impacted (in any process) by changing ``query``."""
        result = self.run.impact(query)
        return {name for names in result.impacted.values() for name in names}

    def errors(self) -> int:
        return sum(p.tracer_errors for p in self.run.processes.values())

    def assert_all_paired(self, kind: str) -> None:
        """Every receive of ``kind`` paired with certainty; nothing in the run external,
        ambiguous, unseen by the kernel's counts, or a tracer error."""
        m = self.run.matching
        assert m.by_kind[kind].matched == m.by_kind[kind].recvs, self.run.problems
        assert m.external == m.ambiguous == 0, self.run.problems
        assert not self.run.unseen.reports, self.run.problems
        assert self.errors() == 0, self.run.problems


def run_both(script: Path, *args: str, timeout: float = 60, extra: tuple[str, ...] = ()
             ) -> Traced:
    """Run ``script`` untraced and under ``distea run``: same output, same exit status."""
    argv = [PY, script.name, *args]
    plain = run_untraced(argv, script.parent, timeout=timeout)
    # beside the script's folder (outside the traced program's files), and a fresh
    # directory each time: tests whose scripts lie straight in tmp_path share that parent
    runs = Path(tempfile.mkdtemp(prefix=f"run-{'-'.join(args)}-", dir=script.parent.parent))
    traced = run_traced(argv, script.parent, runs / "run", *extra, timeout=timeout)
    assert traced.result.returncode == plain.returncode, traced.result.stderr
    assert traced.result.stdout == plain.stdout, (traced.result.stdout, plain.stdout)
    assert plain.returncode == 0, plain.stderr
    run = distea.load(traced.run_dir)
    assert all(p.complete for p in run.processes.values()), run.problems
    return Traced(run, traced.result.stdout)
