"""Children that are not Python: what traced processes read from them, ordered safely.

A traced process may start a program that is not Python (``ldconfig -p``,
which ``ctypes.util.find_library`` runs at ``import torch``; ``sort``, ``tr``
or ``cat`` in a pipeline). It is never traced, so what its parent reads
from its stdout or stderr, and its exit status (``waitpid``), have no
recorded send: external receives that order nothing. Yet what such a
child writes can only come from what it was given: its command line (its
spawn) and what was written to its stdin, by traced processes or by
another non-Python child in front of it. So, like an untraced server in the
middle (:mod:`distea.analyzer.relays`), the child is a **relay**:

- the tracer records, with the child, the token of its spawn and the pipes
  of its stdin, stdout and stderr (the pipe channel's names,
  :mod:`distea.tracer.channels.processes`);
- a receive on the child's stdout or stderr pipe, on the pipe where its
  forked process reports a failed ``exec`` (``subprocess`` reads the error
  from it: CPython's ``test_subprocess`` did 2,085 times), or of its exit,
  happens after the child's spawn (a certain edge: the child did not exist before),
  and after the writes to its stdin pipe that are not causally after the
  receive — per writing process, the latest such write (an uncertain receive
  of the matching: when the child used which input is not observed) — and,
  through a non-Python child feeding its stdin, after that child's inputs
  in the same way (``python a.py | sort | python b.py``, ``a | cat | sort``);
- other processes' recorded writes to the same output pipe are candidates
  the same way; so are the spawns of several children that write one pipe
  (an inherited stderr): which of them wrote what was read is not known.

A receive of the receiving process's own sends needs no edge: its clock
orders them. Such receives are counted ``matched`` where nothing but the
spawn and the reader's own writes can be in them (certain), else
``relayed`` (ordered after candidates, safe, less precise), never
external.

What a non-Python child does besides its standard streams (files it
writes, sockets it opens, signals it sends) is not observed: ``distea
show`` keeps a problem line for such children, except for a few programs
known to do nothing else (:data:`QUIET_PROGRAMS`).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field

from distea.model import ProcessInfo, UntracedChild
from distea.wire import NOT_PYTHON

TYPE_CHECKING = False
if TYPE_CHECKING:
    from distea.analyzer.matching import Matching

Groups = MutableMapping[tuple[str, str], tuple[list[int], list[int]]]

QUIET_PROGRAMS: dict[str, tuple[tuple[str, ...], ...] | None] = {
    "ldconfig": (("-p",), ("--print-cache",)),
    "uname": None,
}
"""Programs that, run with one of these argument lists (None: any), only read system
state and write their standard streams: nothing they do is left unobserved once their
pipes and exit are ordered. ``ldconfig -p`` prints the linker cache (``ctypes.util``);
``uname`` prints the system's name (``platform``)."""


def is_not_python(child: UntracedChild) -> bool:
    return child.reason.startswith(NOT_PYTHON)


def program(child: UntracedChild) -> str:
    return os.path.basename(child.argv[0]) if child.argv else "?"


def is_quiet(child: UntracedChild) -> bool:
    """A known program that does nothing but print (see :data:`QUIET_PROGRAMS`)."""
    if program(child) not in QUIET_PROGRAMS:
        return False
    allowed = QUIET_PROGRAMS[program(child)]
    return allowed is None or tuple(child.argv[1:]) in allowed


@dataclass(slots=True)
class ChildTraffic:
    """What traced processes received from one non-Python child."""

    child: UntracedChild
    outputs: int = 0
    """Reads of its stdout or stderr pipe."""
    exits: int = 0
    """``wait`` calls that returned its exit."""
    relayed: int = 0
    """Of those, receives ordered after candidate sends of other processes (stdin)."""


@dataclass(slots=True)
class ChildEdges:
    """What :func:`order_children` adds to a matching."""

    edges: list[tuple[int, int]] = field(default_factory=list)
    uncertain: list[tuple[int, tuple[Sequence[int], ...]]] = field(default_factory=list)
    traffic: list[ChildTraffic] = field(default_factory=list)
    receives: list[int] = field(default_factory=list)
    """Every receive taken (ordered here, with or without an edge)."""
    counts: list[tuple[str, int, int, int]] = field(default_factory=list)
    """(kind, sends, receives, relayed) of every group taken: the rest of the receives
    are matched."""


def order_children(
    m: Matching, groups: Groups, untraced: Sequence[UntracedChild],
    processes: Mapping[str, ProcessInfo] | None,
) -> ChildEdges:
    """Take the groups of non-Python children's output pipes and exits out of ``groups``
    and order their receives; see the module docstring."""
    out = ChildEdges()
    # only children whose spawn names its token: their pipes were looked at (none, or
    # the ones named); a run from before that says nothing of their stdin
    children = [c for c in untraced if is_not_python(c) and c.token]
    if not children:
        return out
    spawn_of: dict[str, int] = {}
    pipe_sends: dict[str, list[int]] = {}  # before any pipe group is taken out
    for (kind, channel), (sends, _) in groups.items():
        if kind == "proc" and len(sends) == 1:
            spawn_of[channel] = sends[0]
        elif kind == "pipe" and sends:
            pipe_sends[channel] = sends
    writers_of: dict[str, list[UntracedChild]] = defaultdict(list)  # pipe -> children
    for c in children:
        for name in dict.fromkeys(c.pipes[1:]):  # stdout, stderr, the exec-error pipe
            if name:
                writers_of[name].append(c)

    def inputs(c: UntracedChild, seen: set[int]) -> tuple[list[int], list[int]]:
        """(certain sends, candidate sends) that what ``c`` wrote may hold."""
        certain = [spawn_of[c.token]] if c.token in spawn_of else []
        candidates: list[int] = []
        stdin = c.pipes[0] if c.pipes else None
        if stdin:
            candidates.extend(pipe_sends.get(stdin, ()))
            for upstream in writers_of.get(stdin, ()):
                if id(upstream) not in seen:
                    seen.add(id(upstream))
                    up_certain, up_candidates = inputs(upstream, seen)
                    candidates.extend(up_certain + up_candidates)
        return certain, candidates

    traffic = {id(c): ChildTraffic(c) for c in children}

    def take(key: tuple[str, str], writers: list[UntracedChild]) -> None:
        """Order the receives of one group after what its writers' output may hold."""
        sends, recvs = groups.pop(key)
        certain: list[int] = []
        candidates = list(sends)  # other processes' writes to the same pipe (a shared
        for c in writers:          # stdout) are candidates too
            c_certain, c_candidates = inputs(c, {id(c)})
            if len(writers) == 1:
                certain.extend(c_certain)
            else:  # which child wrote the bytes read is not known
                candidates.extend(c_certain)
            candidates.extend(c_candidates)
        out.receives.extend(recvs)
        relayed = sum(_order(m, r, certain, candidates, out) for r in recvs)
        out.counts.append((key[0], len(sends), len(recvs), relayed))
        t = traffic[id(writers[0])]  # a pipe several children write counts with the first
        t.relayed += relayed
        if key[0] == "exit":
            t.exits += len(recvs)
        else:
            t.outputs += len(recvs)

    for name, writers in writers_of.items():
        if groups.get(("pipe", name), ([], []))[1]:
            take(("pipe", name), writers)
    for c in children:
        host = processes[c.parent].host if processes and c.parent in processes \
            else c.parent.split(":", 1)[0]
        exit_key = ("exit", f"{host}:{c.pid}")
        if c.pid is not None and exit_key in groups and not groups[exit_key][0]:
            take(exit_key, [c])
    out.traffic = [t for t in traffic.values() if t.outputs or t.exits]
    return out


def _order(m: Matching, r: int, certain: list[int], candidates: list[int],
           out: ChildEdges) -> bool:
    """Order receive ``r`` after ``certain`` and the candidates of other processes;
    True if candidates were needed (relayed)."""
    p = m.proc_of[r]
    for s in certain:
        if m.proc_of[s] != p:
            out.edges.append((s, r))
    chains: dict[int, list[int]] = defaultdict(list)
    for s in sorted(set(candidates)):
        if m.proc_of[s] != p:
            chains[m.proc_of[s]].append(s)  # ids increase with clock within a process
    if not chains:
        return False
    out.uncertain.append((r, tuple(chains[x] for x in sorted(chains))))
    return True


def notes(traffic: Sequence[ChildTraffic]) -> list[str]:
    """Informational lines: which receives came from non-Python children."""
    by_program: dict[str, list[ChildTraffic]] = defaultdict(list)
    for t in traffic:
        by_program[program(t.child)].append(t)
    lines = []
    for name, ts in sorted(by_program.items()):
        outputs, exits = sum(t.outputs for t in ts), sum(t.exits for t in ts)
        relayed = sum(t.relayed for t in ts)
        what = " and ".join(part for part in (
            f"{outputs} read(s) of their output" if outputs else "",
            f"{exits} exit(s)" if exits else "") if part)
        lines.append(f"{len(ts)} non-Python child(ren) {name}: {what} ordered after their "
                     "spawn and what was written to their stdin"
                     + (f" ({relayed} after every earlier write of other processes: safe, "
                        "less precise)" if relayed else "")
                     + (f"; {name} only prints, so nothing else it does goes unobserved"
                        if all(is_quiet(t.child) for t in ts) else ""))
    return lines
