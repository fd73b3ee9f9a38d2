"""The analysis session: one loaded run, analysed lazily and queried many times.

``distea.load(path)`` returns a :class:`Run`. Matching and ordering are done
on first use and cached, so a report that asks many questions pays for them
once. Every result is a plain dataclass (:mod:`distea.analyzer.impact`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from distea.analyzer.impact import Analysis, DepsResult, Explanation, ImpactResult
from distea.analyzer.matching import Matching, match
from distea.analyzer.order import Order, compute_order
from distea.analyzer.resolve import QueryError, diff_methods, resolve, resolve_all
from distea.model import Execution, MessageEvent, Method, ProcessInfo, RunData
from distea.traceformat import load_run

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["QueryError", "Run"]


@contextmanager
def _no_gc() -> Iterator[None]:
    """Pause the cyclic GC while building large acyclic tables.

    Matching and the sweep allocate a few tuples per message; with the GC on,
    its repeated full scans of millions of young objects made them 2-3 times
    slower. Nothing built there forms reference cycles.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Run:
    """One recorded run, ready for queries."""

    def __init__(self, data: RunData) -> None:
        self.data = data

    @classmethod
    def load(cls, path: Path | str) -> Run:
        return cls(load_run(path))

    # -- what was recorded -----------------------------------------------------

    @property
    def path(self) -> Path:
        return Path(self.data.path)

    @property
    def processes(self) -> dict[str, ProcessInfo]:
        """Process key → process."""
        return self.data.processes

    @property
    def methods(self) -> dict[str, Method]:
        """Method name → method (every method some tracer declared)."""
        return self.data.methods

    @property
    def executions(self) -> dict[str, dict[str, Execution]]:
        """Process key → method name → its first/last clocks in that process."""
        return self.data.executions

    @property
    def messages(self) -> dict[str, list[MessageEvent]]:
        return self.data.messages

    @cached_property
    def executed(self) -> set[str]:
        """Names of methods that executed in at least one process."""
        return {name for ex in self.data.executions.values() for name in ex}

    @property
    def problems(self) -> list[str]:
        """Everything lost or doubtful: loading problems, untraced children, matching notes."""
        out = list(self.data.problems)
        for child in self.data.untraced:
            out.append(f"child {child.pid} ({' '.join(child.argv)[:60]}) of {child.parent} "
                       f"was not traced: {child.reason}")
        for key, info in self.data.processes.items():
            if info.tracer_errors:
                out.append(f"{self.label(key)} counted {info.tracer_errors} tracer error(s): "
                           "some of its events may be missing")
        m = self.matching
        if m.external:
            out.append(f"{m.external} receives have no recorded send (external peer or lost "
                       "records); they order nothing")
        if m.ambiguous:
            out.append(f"{m.ambiguous} receives could not be paired with one send; each is "
                       "ordered after every candidate send (safe, less precise)")
        out.extend(m.notes)
        out.extend(self.order.notes)
        return out

    def label(self, key: str) -> str:
        """``role (pid N)`` for a process key."""
        info = self.processes.get(key)
        return f"{info.role} (pid {info.pid})" if info else key

    def find_process(self, spec: str) -> str:
        """A process key from a key, a pid, or a role."""
        if spec in self.processes:
            return spec
        hits = [k for k, p in self.processes.items() if str(p.pid) == spec or p.role == spec]
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise QueryError(f"no process {spec!r}; processes: "
                             + ", ".join(self.label(k) for k in sorted(self.processes)))
        raise QueryError(f"{spec!r} names several processes; use a key: " + ", ".join(hits))

    # -- analysis --------------------------------------------------------------

    @cached_property
    def matching(self) -> Matching:
        messages = dict(self.data.messages)
        for key in self.data.processes:
            messages.setdefault(key, [])
        for key in self.data.executions:
            messages.setdefault(key, [])
        with _no_gc():
            return match(messages, self.data.links, self.data.processes)

    @cached_property
    def order(self) -> Order:
        """Happens-before; raises OrderCycleError if the recorded order has a cycle."""
        matching = self.matching
        with _no_gc():
            return compute_order(matching)

    @cached_property
    def analysis(self) -> Analysis:
        matching, order = self.matching, self.order
        with _no_gc():
            analysis = Analysis(self.data.executions, matching, order)
            analysis.prepare()
        return analysis

    def resolve(self, query: str) -> list[str]:
        """Executed method names for one query (name, glob, path:func, path:LINE)."""
        return resolve(query, self.methods, self.executed, base=self._base())

    def resolve_diff(self, rev: str, repo: Path | str | None = None) -> list[str]:
        """Executed methods whose lines changed since git revision ``rev``."""
        return diff_methods(rev, self.methods, self.executed,
                            Path(repo) if repo is not None else None)

    def _resolve(
        self, queries: str | Iterable[str], diff: str | None, repo: Path | str | None
    ) -> tuple[list[str], list[str]]:
        qs = [queries] if isinstance(queries, str) else list(queries)
        names = resolve_all(qs, self.methods, self.executed, base=self._base())
        if diff is not None:
            qs.append(f"--diff {diff}")
            for name in self.resolve_diff(diff, repo):
                if name not in names:
                    names.append(name)
        if not qs:
            raise QueryError("no query given")
        return qs, names

    def _base(self) -> Path | None:
        cwds = {p.cwd for p in self.processes.values() if p.cwd}
        return Path(sorted(cwds)[0]) if len(cwds) == 1 else None

    def impact(
        self,
        queries: str | Iterable[str],
        *,
        diff: str | None = None,
        repo: Path | str | None = None,
    ) -> ImpactResult:
        """Forward impact of changing the queried methods (DESIGN.md §5)."""
        qs, names = self._resolve(queries, diff, repo)
        return self.analysis.impact(qs, names)

    def deps(
        self,
        targets: str | Iterable[str],
        *,
        diff: str | None = None,
        repo: Path | str | None = None,
    ) -> DepsResult:
        """Methods (per process) that the targets' executions may depend on."""
        qs, names = self._resolve(targets, diff, repo)
        return self.analysis.deps(qs, names)

    def explain(
        self, query: str | Iterable[str], target: str, *, process: str | None = None
    ) -> Explanation:
        """Shortest causal chain from the query to the target (or why there is none)."""
        qs, names = self._resolve(query, None, None)
        targets = self.resolve(target)
        if len(targets) != 1:
            raise QueryError(f"target {target!r} names {len(targets)} methods; name one: "
                             + ", ".join(targets[:8]))
        key = self.find_process(process) if process is not None else None
        return self.analysis.explain(qs, names, targets[0], key)

    def graph(self, impact: ImpactResult | None = None) -> nx.DiGraph:
        """The run as a networkx graph (see :mod:`distea.analyzer.graph`)."""
        from distea.analyzer.graph import build_graph

        return build_graph(self, impact)
