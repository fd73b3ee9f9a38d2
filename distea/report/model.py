"""The HTML report's view model: plain dataclasses built from a Run and an ImpactResult.

Everything the page shows is decided here, in Python, so that the page's
script only draws and filters:

- one :class:`LaneView` per process (display order of :func:`~distea.exports.timeline.lanes`),
  with its impact start ``s_P`` and counts;
- one :class:`NodeView` per (process, method) execution: its first/last
  clocks and their happens-before times ``t0``/``t1`` (the analyzer's Lamport
  times, so a left-to-right reading never contradicts happens-before),
  whether it is impacted, whether it is a query method, and why (or why not);
- one :class:`EdgeView` per cross-process message the happens-before sweep
  used, flagged when it carries the impact (sent at or after the sender's
  impact start) and when it is the receive where the impact arrives;
- explanation chains from the analyzer (:meth:`Analysis.explain`), stored
  once per distinct chain (:class:`ChainStep` lists) and referenced by index.

The page turns ``t`` values into x positions by rank (only the times of what
is shown), so long local stretches do not push the picture apart.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from distea.exports.timeline import channel_text, hb_time, lanes, message_links

if TYPE_CHECKING:
    from distea.analyzer.impact import ImpactResult
    from distea.analyzer.run import Run

MAX_EXPLAINED = 20_000
"""Executions beyond this many get no precomputed explanation (the page says so)."""
MAX_EDGES = 6_000
"""Message edges drawn at most: impact-carrying ones first, then the others."""


@dataclass(slots=True)
class LaneView:
    index: int
    key: str
    role: str
    pid: int | None
    host: str
    rank: int | None
    world_size: int | None
    complete: bool
    start: int | None
    """Clock of s_P, where the impact starts in this process (None: never reached)."""
    start_t: int | None
    distia_start: int | None
    methods: int = 0
    impacted: int = 0
    twin: bool = False
    """Another lane has the same role (three copies of one server): name it by pid too."""


@dataclass(slots=True)
class MethodView:
    name: str
    module: str
    short: str
    """The qualname (``Class.meth``), what a bar is labelled with."""
    file: str
    line: int


@dataclass(slots=True)
class NodeView:
    lane: int
    method: int
    """Index into ``ReportModel.methods``."""
    first: int
    last: int
    t0: int
    t1: int
    impacted: bool
    query: bool
    chain: int | None = None
    """Index into ``ReportModel.chains`` (impacted nodes with an explanation)."""
    why: str = ""
    """The analyzer's sentence on why (not) impacted, processes named by label."""


@dataclass(slots=True)
class EdgeView:
    src: int
    """Sending lane."""
    src_clock: int
    src_t: int
    dst: int
    dst_clock: int
    dst_t: int
    channel: str
    carries: bool
    """Sent at or after the sender's impact start: the impact travels on it."""
    arrival: bool
    """Its receive is where the impact starts in the receiving process."""
    ambiguous: bool


@dataclass(frozen=True, slots=True)
class ChainStep:
    lane: int
    clock: int
    t: int
    action: str
    method: str | None
    detail: str


@dataclass(slots=True)
class ReportModel:
    title: str
    run_id: str
    run_path: str
    queries: list[str]
    query_methods: list[str]
    size: int
    distinct: int
    mcov: int
    distia: int
    lanes: list[LaneView]
    methods: list[MethodView]
    nodes: list[NodeView]
    edges: list[EdgeView]
    chains: list[list[ChainStep]]
    messages: dict[str, int]
    problems: list[str]
    notes: list[str] = field(default_factory=list)
    """What the report itself left out (caps), shown on the page."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def build_model(run: Run, result: ImpactResult, *, title: str | None = None) -> ReportModel:
    """The view model of ``result`` (an impact of ``run``)."""
    lane_list = lanes(run)
    lane_of = {lane.key: i for i, lane in enumerate(lane_list)}
    labels = {lane.key: lane.label for lane in lane_list}
    views = [
        LaneView(
            index=i, key=lane.key, role=lane.role, pid=lane.pid, host=lane.host,
            rank=lane.rank, world_size=lane.world_size, complete=lane.complete,
            start=result.starts.get(lane.key),
            start_t=(hb_time(run, lane.key, result.starts[lane.key])
                     if lane.key in result.starts else None),
            distia_start=result.distia_starts.get(lane.key),
        )
        for i, lane in enumerate(lane_list)
    ]

    names = sorted(run.executed)
    method_index = {n: i for i, n in enumerate(names)}
    roles = [lane.role for lane in lane_list]
    for view in views:
        view.twin = roles.count(view.role) > 1
    methods = [_method_view(run, n) for n in names]
    impacted = set(result.pairs())
    queried = set(result.methods)

    nodes: list[NodeView] = []
    chains: list[list[ChainStep]] = []
    chain_index: dict[tuple[ChainStep, ...], int] = {}
    notes: list[str] = []
    explained = 0
    for lane in lane_list:
        lv = views[lane_of[lane.key]]
        ex = run.executions.get(lane.key, {})
        for name in sorted(ex, key=lambda n: (ex[n].first, n)):
            e = ex[name]
            node = NodeView(
                lane=lv.index, method=method_index[name], first=e.first, last=e.last,
                t0=hb_time(run, lane.key, e.first), t1=hb_time(run, lane.key, e.last),
                impacted=(lane.key, name) in impacted, query=name in queried,
            )
            lv.methods += 1
            lv.impacted += node.impacted
            if result.methods and explained < MAX_EXPLAINED:
                explained += 1
                _explain(run, result, node, name, lane.key, lane_of, labels, chains, chain_index)
            nodes.append(node)
    if explained < len(nodes) and result.methods:
        notes.append(f"explanations were precomputed for the first {explained} of "
                     f"{len(nodes)} executions; use `distea explain` for the others")

    edges = _edges(run, result, lane_of)
    if len(edges) > MAX_EDGES:
        edges.sort(key=lambda e: (not e.carries, e.dst_t, e.src_t))
        notes.append(f"{len(edges) - MAX_EDGES} of {len(edges)} message edges are not drawn "
                     "(impact-carrying ones are kept first)")
        edges = sorted(edges[:MAX_EDGES], key=lambda e: (e.dst_t, e.src_t))

    m = run.matching
    problems = list(run.problems)
    for key, label in labels.items():
        problems = [p.replace(key, label) for p in problems]
    run_id = str(run.data.meta.get("run_id") or run.data.meta.get("id") or run.path.name)
    return ReportModel(
        title=title or ("impact of " + ", ".join(result.queries)),
        run_id=run_id,
        run_path=str(run.path),
        queries=list(result.queries),
        query_methods=list(result.methods),
        size=result.size,
        distinct=len(result.method_names),
        mcov=result.mcov_size,
        distia=result.distia_size,
        lanes=views,
        methods=methods,
        nodes=nodes,
        edges=edges,
        chains=chains,
        messages={"sends": m.sends, "recvs": m.recvs, "matched": m.matched,
                  "ambiguous": m.ambiguous, "external": m.external,
                  "unmatched_sends": m.unmatched_sends},
        problems=problems,
        notes=notes,
    )


def _method_view(run: Run, name: str) -> MethodView:
    meth = run.methods.get(name)
    if meth is None:
        module, _, short = name.rpartition(".")
        return MethodView(name, module, short or name, "", 0)
    return MethodView(name, meth.module, meth.qualname, meth.file, meth.firstline)


def _explain(
    run: Run,
    result: ImpactResult,
    node: NodeView,
    name: str,
    key: str,
    lane_of: dict[str, int],
    labels: dict[str, str],
    chains: list[list[ChainStep]],
    chain_index: dict[tuple[ChainStep, ...], int],
) -> None:
    exp = run.analysis.explain(result.queries, result.methods, name, key)
    why = exp.reason
    for k, label in labels.items():
        why = why.replace(k, label)
    node.why = why
    if not exp.impacted:
        return
    # the chain up to the target: shared by every method the same path reaches
    steps = tuple(
        ChainStep(lane_of[s.process], s.clock, hb_time(run, s.process, s.clock), s.action,
                  s.method, s.detail)
        for s in exp.steps if s.action != "runs"
    )
    idx = chain_index.get(steps)
    if idx is None:
        idx = chain_index[steps] = len(chains)
        chains.append(list(steps))
    node.chain = idx


def _edges(run: Run, result: ImpactResult, lane_of: dict[str, int]) -> list[EdgeView]:
    m = run.matching
    out = []
    for link in message_links(run):
        s, r = m.events[link.send], m.events[link.recv]
        s_start = result.starts.get(s.process)
        r_start = result.starts.get(r.process)
        carries = s_start is not None and s.clock >= s_start
        out.append(EdgeView(
            src=lane_of[s.process], src_clock=s.clock, src_t=hb_time(run, s.process, s.clock),
            dst=lane_of[r.process], dst_clock=r.clock, dst_t=hb_time(run, r.process, r.clock),
            channel=channel_text(s), carries=carries,
            arrival=carries and r_start == r.clock, ambiguous=link.ambiguous,
        ))
    out.sort(key=lambda e: (e.dst_t, e.src_t))
    return out
