"""How many ZeroMQ receives stay ambiguous in the shapes of ``workloads/zmq_shapes.py``,
checked against the programs' own account of which message each process got.

    uv run python -m benchmarks.zmq_ambiguity [--rounds 3] [--shape broker ...] [--base main]

Each round runs every shape under ``distea run`` and prints, per shape, the
ZeroMQ receives, how many the analyzer left ambiguous (several candidate
sends) and how many of its answers contradict the programs' account
(``wrong``: must be 0). Timing decides how many messages wait together, so
the share varies between rounds and with the machine's load; ``--base REV``
also analyses each same run with the analyzer of commit REV (checked out in
a temporary worktree), a comparison that timing cannot skew. (Facts this
checkout's tracer records and REV's analyzer does not know are unused there.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import distea
from benchmarks.compare import worktree
from benchmarks.workloads import zmq_shapes
from benchmarks.workloads.tools import REPO, distea_command
from distea.analyzer.run import Run

SCRIPT = Path(zmq_shapes.__file__)


@dataclass
class Verdict:
    """One traced run of one shape, against its oracle."""

    receives: int = 0
    """ZeroMQ receives of the run."""
    ambiguous: int = 0
    checked: int = 0
    """Receives whose real send the oracle names (its payload is unique on its port)."""
    wrong: list[str] = field(default_factory=list)
    """Answers that contradict the oracle: a certain pair that is not the real send
    (nor a later send of the sender with only sends in between), an uncertain
    receive without the real send among its candidates, or no answer at all."""

    @property
    def share(self) -> float:
        return self.ambiguous / self.receives if self.receives else 0.0


def trace(shape: str, workdir: Path) -> tuple[Run, dict[int, list[list[object]]]]:
    """Run ``shape`` under ``distea run``; the run and every process's account by pid."""
    logs = workdir / "logs"
    logs.mkdir(parents=True)
    command = distea_command("compact", [sys.executable, str(SCRIPT), shape, str(logs)],
                             workdir)
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if result.returncode:
        raise RuntimeError(f"{shape} failed: {result.stderr[-2000:]}")
    accounts = {int(f.stem.rsplit("-", 1)[1]): json.loads(f.read_text())
                for f in logs.glob("*.json")}
    return distea.load(workdir / "run"), accounts


def _port(channel: str) -> int:
    """``"tcp://10.0.0.1:5555 bind>connect"`` → 5555."""
    return int(channel.split(" ", 1)[0].rsplit(":", 1)[1])


def truth(run: Run, accounts: dict[int, list[list[object]]]) -> dict[int, int]:
    """Receive id → the id of the send it read, where the oracle says so.

    Each process's events of one port and direction are, in order, the items
    of its account of that port and direction; a receive read the send of the
    same payload on its port, where that payload was sent once."""
    m = run.matching
    ids: dict[tuple[int, int, str], list[int]] = defaultdict(list)
    for i, ev in enumerate(m.events):
        if ev.kind == "zmq":
            ids[(run.processes[ev.process].pid, _port(ev.channel), ev.direction)].append(i)
    payload_of: dict[int, tuple[int, str]] = {}
    for pid, items in accounts.items():
        logged: dict[tuple[int, int, str], list[str]] = defaultdict(list)
        for port, direction, payload in items:
            logged[(pid, int(port), str(direction))].append(str(payload))  # type: ignore[call-overload]
        for key, payloads in logged.items():
            events = ids.get(key, [])
            if len(events) != len(payloads):
                raise AssertionError(f"{key}: {len(events)} events, {len(payloads)} logged")
            for i, payload in zip(events, payloads, strict=True):
                payload_of[i] = (key[1], payload)
    sends: dict[tuple[int, str], list[int]] = defaultdict(list)
    for i, key in payload_of.items():
        if m.events[i].direction == "send":
            sends[key].append(i)
    return {i: sends[key][0] for i, key in payload_of.items()
            if m.events[i].direction == "recv" and len(sends.get(key, ())) == 1}


def judge(run: Run, real: dict[int, int], pairs: dict[str, Any]) -> Verdict:
    """An analyzer's ``pairs`` of ``run`` (:func:`answer`) against ``real`` (receive →
    its real send)."""
    m = run.matching
    certain = {r: s for s, r in pairs["edges"]}
    uncertain = {r: {s for chain in chains for s in chain} for r, chains in pairs["uncertain"]}
    out = Verdict(receives=m.by_kind["zmq"].recvs, ambiguous=pairs["ambiguous"],
                  checked=len(real))
    for r, s in real.items():
        if r in uncertain:
            if s not in uncertain[r]:
                out.wrong.append(f"uncertain without its send: {m.events[r]}")
        elif r not in certain:
            out.wrong.append(f"no pair: {m.events[r]}")
        elif certain[r] != s and not _same_answers(run, s, certain[r]):
            out.wrong.append(f"wrong pair: {m.events[r]} <- {m.events[certain[r]]}, "
                             f"real {m.events[s]}")
    return out


def _same_answers(run: Run, real: int, paired: int) -> bool:
    """A later send of the same process with nothing but sends in between (consecutive
    clocks): every answer distea gives is the same for both (match_zmq.py)."""
    m = run.matching
    if m.proc_of[real] != m.proc_of[paired] or paired < real:
        return False
    between = m.events[real:paired + 1]
    return (all(e.direction == "send" for e in between)
            and [e.clock for e in between] == list(range(between[0].clock,
                                                         between[-1].clock + 1)))


ANSWER = """
import json, sys
import distea
m = distea.load(sys.argv[1]).matching
zmq = {i for i, e in enumerate(m.events) if e.kind == "zmq"}
print(json.dumps({"edges": [(s, r) for s, r in m.edges if r in zmq],
                  "uncertain": [(r, chains) for r, chains in m.uncertain if r in zmq],
                  "ambiguous": m.by_kind["zmq"].ambiguous}))
"""


def answer(checkout: Path, run_dir: Path) -> dict[str, Any]:
    """The ZeroMQ pairs the analyzer of ``checkout`` finds in ``run_dir``: certain
    edges, uncertain receives with their candidates, how many are ambiguous (event
    ids are the same for every analyzer that loads a run alike)."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    out = subprocess.run([sys.executable, "-c", ANSWER, str(run_dir)], env=env,
                         cwd=checkout, capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout))


def measure(shape: str, base: Path | None) -> tuple[Verdict, Verdict | None]:
    """This checkout's verdict on one traced run of ``shape``, and ``base``'s."""
    with tempfile.TemporaryDirectory(prefix=f"distea-zmq-{shape}-") as workdir:
        run, accounts = trace(shape, Path(workdir))
        real = truth(run, accounts)
        run_dir = Path(workdir) / "run"
        before = None if base is None else judge(run, real, answer(base, run_dir))
        return judge(run, real, answer(REPO, run_dir)), before


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shape", action="append", choices=zmq_shapes.SHAPES)
    parser.add_argument("--base", help="also analyse each run with this commit's analyzer")
    args = parser.parse_args()
    if args.base:
        with worktree(args.base) as base:
            report(args.shape or list(zmq_shapes.SHAPES), args.rounds, base)
    else:
        report(args.shape or list(zmq_shapes.SHAPES), args.rounds, None)


def report(shapes: list[str], rounds: int, base: Path | None) -> None:
    verdicts: dict[str, list[tuple[Verdict, Verdict | None]]] = defaultdict(list)
    for round_ in range(rounds):
        for shape in shapes:
            after, before = measure(shape, base)
            verdicts[shape].append((after, before))
            for name, v in (("base", before), ("this", after)):
                if v is None:
                    continue
                print(f"round {round_ + 1} {shape:9s} {name:4s} receives {v.receives:4d} "
                      f"ambiguous {v.ambiguous:4d} ({v.share:.0%}) checked {v.checked:4d} "
                      f"wrong {len(v.wrong)}", flush=True)
                for line in v.wrong[:3]:
                    print("   ", line[:300])
    print("shape      median ambiguous share (rounds); wrong answers in all rounds")
    for shape, pairs in verdicts.items():
        for name, vs in (("base", [b for _, b in pairs if b is not None]),
                         ("this", [a for a, _ in pairs])):
            if vs:
                shares = [v.share for v in vs]
                print(f"{shape:9s} {name:4s} {statistics.median(shares):4.0%}  "
                      f"({', '.join(f'{x:.0%}' for x in shares)}); "
                      f"wrong {sum(len(v.wrong) for v in vs)}")


if __name__ == "__main__":
    main()
