"""Pairing for RPC frameworks whose bytes move in C/C++: gRPC and Ray (DESIGN.md §4).

The tracer records these messages where they cross the Python boundary
(``distea/tracer/channels/grpc.py``, ``ray.py``), named by what both ends
see; :mod:`distea.analyzer.matching` hands each channel's sends and
receives here.

``grpc``: channel ``"METHOD>"`` (requests) or ``"METHOD<"`` (responses),
``meta["fp"]`` the serialized message. A receive pairs with certainty only
when its fingerprint class on that channel has exactly one send, from one
other process, and this one receive. Where a class holds several messages
(the same request sent twice, the same response to several calls), which
one a receive read depends on how the calls overlapped, which neither end
can see: gRPC keeps order within a call, not across calls, and a server
runs calls in a thread pool. Those receives are uncertain, with every send
of the class as a candidate: the happens-before sweep orders each one after
the latest candidate that is not causally after it, which for calls made
one after another is exactly their own request (the later ones are after
its response), and is safe for calls that overlap.

``ray``: channel ``"TASK_ID>"`` (the submission, received where the task
or actor method starts executing) or ``"TASK_ID<"`` (the return value,
sent when the execution ends, received at every ``ray.get`` of the task's
refs, in any process). A task id is unique, so one send pairs with every
receive of its channel; a task that ran twice (a retry, a restarted actor)
sent twice, and its receives are uncertain between the two. A task
started with another task's ``ObjectRef`` as an argument has that task's
return as a second sender (:func:`link_ray_dependencies`).
"""

from __future__ import annotations

from collections.abc import Callable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from distea.analyzer.matching import Matching, _Result

    Classes = Callable[[Matching, list[int]], dict[object, dict[int, list[int]]]]


def match_grpc(m: Matching, sends: list[int], recvs: list[int], out: _Result,
               classes: Classes) -> None:
    """One gRPC channel (one method, one direction); ``classes`` groups ids by
    fingerprint and process (``matching._classes``)."""
    send_classes = classes(m, sends)
    used: set[int] = set()
    for fp, receivers in classes(m, recvs).items():
        senders = send_classes.get(fp, {})
        for rp, rids in receivers.items():
            others = [sp for sp in senders if sp != rp]
            cs = others or [sp for sp in senders if sp == rp]
            if not cs:
                continue  # external: the peer was not traced
            chains = tuple(tuple(senders[sp]) for sp in cs)
            if len(receivers) == 1 and len(rids) == 1 and len(chains) == 1 \
                    and len(chains[0]) == 1:
                m.edges.append((chains[0][0], rids[0]))
                out.matched += 1
            else:
                m.uncertain.extend((r, chains) for r in rids)
                out.ambiguous += len(rids)
            for chain in chains:
                used.update(chain)
    out.unmatched_sends += len(sends) - len(used)


def match_ray(m: Matching, sends: list[int], recvs: list[int], out: _Result) -> None:
    """One Ray task's submission or return channel."""
    if not recvs:
        out.unmatched_sends += len(sends)
        return
    if len(sends) == 1:  # within the sending process its own clock orders them
        sender = m.proc_of[sends[0]]
        m.edges.extend((sends[0], r) for r in recvs if m.proc_of[r] != sender)
        out.matched += len(recvs)
        return
    if not sends:
        return  # external: submitted or run by an untraced process
    by_process: dict[int, list[int]] = {}
    for s in sends:
        by_process.setdefault(m.proc_of[s], []).append(s)
    for r in recvs:
        chains = tuple(tuple(ids) for p, ids in by_process.items() if p != m.proc_of[r])
        if not chains:  # only its own sends: its clock orders them already
            out.matched += 1
            continue
        m.uncertain.append((r, chains))
        out.ambiguous += 1


def link_ray_dependencies(m: Matching) -> None:
    """A task whose argument is another task's ObjectRef is handed that task's value
    before it starts: its execution's receive also comes after that task's return.

    The submission records the argument's task ids (``meta["deps"]``); the
    worker sees only the value. One return send: a certain edge; several (the
    task ran twice): uncertain between them.
    """
    events, proc_of = m.events, m.proc_of
    returns: dict[str, list[int]] = {}
    deps_of: dict[str, list[str]] = {}
    starts: list[int] = []
    for i, ev in enumerate(events):
        if ev.kind != "ray":
            continue
        task, way = ev.channel[:-1], ev.channel[-1:]
        if ev.direction == "send":
            if way == "<":
                returns.setdefault(task, []).append(i)
            elif ev.meta:
                deps = ev.meta.get("deps")
                if isinstance(deps, list):
                    deps_of[task] = [str(dep) for dep in deps]
        elif way == ">":
            starts.append(i)
    for r in starts:
        for dep in deps_of.get(events[r].channel[:-1], ()):
            sends = [s for s in returns.get(dep, ()) if proc_of[s] != proc_of[r]]
            if len(sends) == 1:
                m.edges.append((sends[0], r))
            elif sends:
                m.uncertain.append((r, (tuple(sends),)))
