"""The analysis session: one loaded run, analysed lazily and queried many times.

``distea.load(path)`` returns a :class:`Run`. Matching and ordering are done
on first use and cached, so a report that asks many questions pays for them
once. Every result is a plain dataclass (:mod:`distea.analyzer.impact`).
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from distea.analyzer import children as child_rule
from distea.analyzer.external import external_reasons, problem_line
from distea.analyzer.impact import Analysis, DepsResult, Explanation, ImpactResult
from distea.analyzer.matching import STREAM_KINDS, Matching, match
from distea.analyzer.order import Order, compute_order
from distea.analyzer.relays import RelayInfo, carried
from distea.analyzer.resolve import QueryError, diff_methods, resolve, resolve_all
from distea.analyzer.unseen import (
    Unseen,
    UnseenReport,
    covered_notes,
    inferred_reports,
    possible_edges,
    split_covered,
    split_reports,
)
from distea.model import Execution, MessageEvent, Method, ProcessInfo, RunData, UntracedChild
from distea.traceformat import load_run
from distea.wire import NOT_PYTHON

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


def _count_demoted(m: Matching, order: Order) -> None:
    """Move the receives whose pairing was demoted out of ``matched``: to ``ambiguous``
    where the sweep ordered them after some candidate, else to ``external``."""
    for r in sorted(order.demoted_receives):
        counts = m.by_kind[m.events[r].kind]
        counts.matched -= 1
        m.matched -= 1
        if order.sources.get(r) or r in order.hub_of:
            counts.ambiguous += 1
            m.ambiguous += 1
        else:
            counts.external += 1
            m.external += 1


class Run:
    """One recorded run, ready for queries."""

    def __init__(self, data: RunData, no_relay: Iterable[str] = ()) -> None:
        self.data = data
        self.no_relay = frozenset(no_relay)
        """Addresses of untraced servers not to treat as relays (``--no-relay``)."""

    @classmethod
    def load(cls, path: Path | str, no_relay: Iterable[str] = ()) -> Run:
        return cls(load_run(path), no_relay)

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
        others = [c for c in self.not_python if not child_rule.is_quiet(c)]
        if others:
            names = sorted({c.reason[len(NOT_PYTHON):].strip(" ()") for c in others})
            out.append(f"{len(others)} child process(es) are not Python and were not traced ("
                       + ", ".join(names[:6]) + (" …" if len(names) > 6 else "") + "): what "
                       "they do inside is not observed; traffic through a server among them "
                       "is ordered as a relay")
        traced_pids = {info.pid: key for key, info in self.processes.items()}
        for child in self.data.untraced:
            if child.reason.startswith(NOT_PYTHON):
                continue
            if not child.parent and child.pid in traced_pids:  # a traced process's own note
                out.append(f"{self.label(traced_pids[child.pid])}: {child.reason}")
                continue
            parent = self.label(child.parent) if child.parent else "the command"
            out.append(f"child {child.pid} ({' '.join(child.argv)[:100]}) of {parent} "
                       f"was not traced: {child.reason}")
        for key, info in self.data.processes.items():
            if info.tracer_errors:
                out.append(f"{self.label(key)} counted {info.tracer_errors} tracer error(s): "
                           "some of its events may be missing")
        order = self.order  # first: demoted pairings move counts out of ``matched``
        m = self.matching
        if m.external:
            out.append(problem_line(m.external, self.external_reasons))
        if m.ambiguous:
            out.append(f"{m.ambiguous} receives could not be paired with one send; each is "
                       "ordered after every candidate send (safe, less precise)")
        for relay in m.relays:
            if relay.disabled or not relay.relayed:
                continue
            which = ("the earlier sends of other processes that may have reached them (writes "
                     "of the keys they read, by the Redis reader)" if relay.protocol == "redis"
                     else "every earlier send to it by another process")
            out.append(f"{relay.relayed} receives from {relay.label} (untraced, not observed "
                       f"inside) are ordered after {which}: relay rule, safe, less precise")
        out.extend(m.notes)
        out.extend(order.notes)
        for report in self.unseen.reports:
            sides = " and ".join(f"{n} bytes {what}" for n, what in
                                 ((report.sent, "sent"), (report.received, "received")) if n)
            out.append(f"process {self.label(report.process)}: {sides} on tcp {report.channel} "
                       "were not seen by the tracer ("
                       + (f"found at {report.at}; likely " if report.at != "analysis"
                          else "inferred: ") + f"{report.reason}); impact across this "
                       "connection is safe, not precise")
        out.extend(self.unseen.notes)
        return out

    @property
    def notes(self) -> list[str]:
        """What was not recorded but is explained and ordered safely: not problems."""
        return child_rule.notes(self.matching.children) + covered_notes(self.unseen.covered)

    @cached_property
    def external_reasons(self) -> Counter[str]:
        """``"KIND: why"`` → count, for every receive that has no recorded send."""
        order = self.order  # first: demoted pairings move counts out of ``matched``
        return external_reasons(self.matching, order, self.data.links)

    @property
    def not_python(self) -> list[UntracedChild]:
        """Children that are not Python programs (servers, databases, shells): not traced."""
        return [c for c in self.data.untraced if c.reason.startswith(NOT_PYTHON)]

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
    def _split(self) -> tuple[dict[str, Sequence[MessageEvent]], list[UnseenReport]]:
        """Message events for matching, and the unseen-traffic reports taken out of them."""
        messages, reports = split_reports(self.data.messages)
        for key in self.data.processes:
            messages.setdefault(key, [])
        for key in self.data.executions:
            messages.setdefault(key, [])
        return messages, reports

    @cached_property
    def unseen(self) -> Unseen:
        """Connections with bytes the tracer did not see, and their possible edges.

        The receives that prove unseen sends are external ones: without any on a
        stream kind, the pass that looks for them is skipped."""
        messages, reports = self._split
        by_kind = self.matching.by_kind
        if any(by_kind[kind].external for kind in STREAM_KINDS if kind in by_kind):
            ends = {key: max([ev.clock for ev in events[-1:]]
                             + [e.last for e in self.data.executions.get(key, {}).values()],
                             default=0)
                    for key, events in self.data.messages.items()}
            reports = reports + inferred_reports(messages, ends, reports)
        reports, covered = split_covered(reports, messages)
        keys = sorted(messages)
        index = {key: p for p, key in enumerate(keys)}
        found = possible_edges(reports, messages, index, keys)
        found.covered = covered
        return found

    @cached_property
    def matching(self) -> Matching:
        messages = self._split[0]
        with _no_gc():
            m = match(messages, self.data.links, self.data.processes, self.no_relay,
                      self.data.untraced)
        unknown = self.no_relay - {r.address for r in m.relays}
        if unknown:
            raise QueryError(f"--no-relay {', '.join(sorted(unknown))}: no such relay in this run"
                             "; relays: " + (", ".join(r.address for r in m.relays) or "none"))
        return m

    @property
    def relays(self) -> list[RelayInfo]:
        """Untraced servers in the middle (turned off ones too, ``disabled``)."""
        return self.matching.relays

    def relays_carrying(self, res: ImpactResult) -> list[RelayInfo]:
        """The relays an impact passed through: it was not observed inside them."""
        m, order = self.matching, self.order
        starts = {order.index[k]: c for k, c in res.starts.items()}
        found = carried(m.relay_of, order.sources, order.extra, m.events, m.proc_of, starts)
        return [r for r in m.relays if r.address in found]

    @cached_property
    def order(self) -> Order:
        """Happens-before. A pairing that would close a cycle is demoted (and reported
        in :attr:`problems`), so every run can be ordered."""
        matching = self.matching
        with _no_gc():
            order = compute_order(matching)
        if order.demoted or order.hub_demoted:
            _count_demoted(matching, order)
        return order

    @cached_property
    def analysis(self) -> Analysis:
        matching, order = self.matching, self.order
        with _no_gc():
            analysis = Analysis(self.data.executions, matching, order, self.unseen.edges)
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
