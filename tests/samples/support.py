"""Run a sample system under the real ``distea run`` and ask the analyzer about it.

Every expectation in this package is derived by hand from the samples' code and
written next to the assertion with its reasoning. The helpers here only run
programs, name processes and look up recorded facts (raw message events, byte
offsets, fingerprints); none of them computes an expected answer from the
analyzer's own output.

Each test module runs its sample once (a module-scoped fixture calling
`run_sample`), traced and untraced at the same time, and asks it many questions.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import distea
from distea.analyzer.impact import ImpactResult
from distea.analyzer.run import Run
from distea.model import MessageEvent, ProcessInfo
from sample_systems import SAMPLES
from tests.tracing import DISTEA, REPO, run_traced

RUN_TIMEOUT_S = 120

LAUNCH = "sample_systems._launch"
LAUNCHER_BEFORE_CHILDREN_RUN = (
    f"{LAUNCH}.RoleGroup.start",
    f"{LAUNCH}.RoleGroup.wait_ready",
    f"{LAUNCH}.read_line",
)
"""Methods of a `_launch`-based launcher that return before its last role even starts.

The launcher's receives are its children's exits and their stdout: `read_line`
(inside `wait_ready`) reads a role's READY line, which the role prints once its
ports are bound (`announce_ready`), and `drain_pipes` the rest. Exits are reaped
in `RoleGroup.finish`, after every `RoleGroup.start`/`wait_ready` call has
returned. So for any query whose methods run only in the roles, and there only
after the role announced itself (or in roles started after the last
`wait_ready`), these three are never impacted in the launcher. (`drain_pipes` is
*not* in this list: whether its last call comes after the first relevant exit
or output is timing-dependent.)
"""


def fingerprint(payload: bytes) -> int:
    """The message fingerprint every tracer records: ``len << 32 | crc32``."""
    return len(payload) << 32 | zlib.crc32(payload)


def fp_of(ev: MessageEvent) -> int:
    """The fingerprint a message event recorded."""
    assert ev.meta is not None and "fp" in ev.meta, ev
    fp = ev.meta["fp"]
    assert isinstance(fp, int)
    return fp


def stable_name(info: ProcessInfo) -> str:
    """A name for a process that is the same in every run of a sample.

    From its argv: ``launcher`` for the traced command itself; ``rank-R`` for a
    process that carries a rank; the value of ``--name`` (chat, echo, kvstore,
    pipeline workers); ``worker-R`` for ``--rank R``; ``resource-tracker`` for
    multiprocessing's helper; otherwise the last part of the ``-m`` module.
    """
    argv = list(info.argv)
    if info.start_method == "main":
        return "launcher"
    if info.rank is not None:
        return f"rank-{info.rank}"
    for flag, prefix in (("--name", ""), ("--rank", "worker-")):
        if flag in argv[:-1]:
            return prefix + argv[argv.index(flag) + 1]
    if any("resource_tracker" in arg for arg in argv):
        return "resource-tracker"
    if "-m" in argv[:-1]:
        return argv[argv.index("-m") + 1].rsplit(".", 1)[-1]
    return info.key


@dataclass
class SampleRun:
    """One traced run of a sample, its untraced twin's stdout, and `show --json`."""

    sample: str
    mode: str
    run: Run
    run_dir: Path
    traced: subprocess.CompletedProcess[str]
    untraced: subprocess.CompletedProcess[str]
    show: dict[str, Any]
    keys: dict[str, str]
    """Stable process name -> process key."""

    # -- processes and recorded facts -----------------------------------------

    def info(self, name: str) -> ProcessInfo:
        return self.run.processes[self.keys[name]]

    def names(self, prefix: str = "") -> list[str]:
        return sorted(n for n in self.keys if n.startswith(prefix))

    def first(self, name: str, method: str) -> int:
        """first_P(method), read from the recorded executions."""
        return self.run.executions[self.keys[name]][method].first

    def executed(self, name: str, method: str) -> bool:
        return method in self.run.executions.get(self.keys[name], {})

    def events(
        self, name: str, direction: str | None = None, kind: str | None = None
    ) -> list[MessageEvent]:
        """The raw message events one process recorded, in clock order."""
        return [
            ev for ev in self.run.messages.get(self.keys[name], [])
            if (direction is None or ev.direction == direction)
            and (kind is None or ev.kind == kind)
        ]

    def send_channels(self, name: str, kind: str) -> set[str]:
        """Channels a process sent on (for streams: the directions it wrote)."""
        return {ev.channel for ev in self.events(name, "send", kind)}

    def first_recv_past(self, name: str, offset: int, channels: Iterable[str] | None = None,
                        kind: str = "tcp") -> int:
        """Clock of the first stream receive in `name` that reads a byte at or past `offset`.

        A receive of bytes [a, b) happens after the send that carried byte b-1
        (docs/semantics.md), so when the bytes from `offset` on were written only
        after some event E, this is the first receive that is after E.
        """
        wanted = set(channels) if channels is not None else None
        clocks = [ev.clock for ev in self.events(name, "recv", kind)
                  if ev.end > offset and (wanted is None or ev.channel in wanted)]
        assert clocks, f"{name} never read past byte {offset}"
        return min(clocks)

    # -- analysis --------------------------------------------------------------

    def impact(self, *queries: str) -> ImpactResult:
        return self.run.impact(list(queries))

    def impacted(self, res: ImpactResult, name: str) -> set[str]:
        return set(res.impacted.get(self.keys[name], ()))

    def start(self, res: ImpactResult, name: str) -> int | None:
        """s_P(Q) for the named process, None where the impact never arrives."""
        return res.starts.get(self.keys[name])

    def expect(
        self,
        res: ImpactResult,
        name: str,
        impacted: Iterable[str] = (),
        not_impacted: Iterable[str] = (),
    ) -> None:
        """Check hand-derived members and non-members of one process's impact set.

        Every method named must have executed in that process (otherwise a
        "not impacted" claim would hold vacuously).
        """
        impacted, not_impacted = list(impacted), list(not_impacted)
        never_ran = [m for m in impacted + not_impacted if not self.executed(name, m)]
        assert not never_ran, f"{name} never executed {never_ran}"
        got = self.impacted(res, name)
        missing = [m for m in impacted if m not in got]
        wrong = [m for m in not_impacted if m in got]
        assert not missing and not wrong, (
            f"impact({res.queries}) in {name}: missing {missing}, wrongly impacted {wrong}; "
            f"start {self.start(res, name)}; impacted there: {sorted(got)}"
        )

    def start_event(self, res: ImpactResult, name: str) -> MessageEvent:
        """The receive at which the impact arrived in `name` (the start must be one)."""
        start = self.start(res, name)
        assert start is not None, f"impact({res.queries}) never reaches {name}"
        hits = [ev for ev in self.events(name, "recv") if ev.clock == start]
        assert len(hits) == 1, (
            f"impact({res.queries}) starts in {name} at clock {start}, which is not a receive"
        )
        return hits[0]


def run_sample(sample: str, tmp: Path, mode: str = "compact") -> SampleRun:
    """Run `python -m sample_systems.SAMPLE` traced and untraced (concurrently)."""
    info = SAMPLES[sample]
    command = [sys.executable, *info.command]
    untraced = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        traced = run_traced(command, REPO, tmp / f"run-{mode}", "--mode", mode,
                            timeout=RUN_TIMEOUT_S)
        out, err = untraced.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if untraced.poll() is None:
            untraced.kill()
            untraced.wait()
    plain = subprocess.CompletedProcess(command, untraced.returncode, out, err)
    assert plain.returncode == 0, f"untraced {sample} failed:\n{err}"
    assert traced.result.returncode == 0, (
        f"traced {sample} failed ({traced.result.returncode}):\n{traced.result.stderr}"
    )
    shown = subprocess.run(
        [str(DISTEA), "show", "--json", "--run", str(traced.run_dir)],
        cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
    )
    assert shown.returncode == 0, shown.stderr
    run = distea.load(traced.run_dir)
    keys: dict[str, str] = {}
    for key, proc in run.processes.items():
        name = stable_name(proc)
        assert name not in keys, f"two processes named {name}: {keys[name]} and {key}"
        keys[name] = key
    return SampleRun(sample, mode, run, traced.run_dir, traced.result, plain,
                     json.loads(shown.stdout), keys)


# -- checks shared by every sample ------------------------------------------------


def check_processes(sr: SampleRun, roles: dict[str, str | None]) -> None:
    """The process tree: exactly these stable names with these roles (None: checked
    elsewhere), all children of the launcher, every one traced to its end with
    nothing dropped, and no problem line about the run."""
    assert sorted(sr.keys) == sorted(roles), f"processes: {sorted(sr.keys)}"
    assert len(sr.run.processes) == SAMPLES[sr.sample].processes
    shown = {p["key"]: p for p in sr.show["processes"]}
    assert set(shown) == set(sr.run.processes)
    launcher = sr.info("launcher")
    for name, role in roles.items():
        proc = sr.info(name)
        if role is not None:
            assert proc.role == role, f"{name}: role {proc.role!r}, expected {role!r}"
        assert shown[proc.key]["role"] == proc.role
        if name != "launcher":
            assert proc.ppid == launcher.pid, f"{name} is not a child of the launcher"
        assert proc.mode == sr.mode
        assert shown[proc.key]["complete"] is True, f"{name} did not end cleanly"
        assert proc.end_reason == "exit"
        assert proc.dropped_events == 0 and proc.tracer_errors == 0, name
    assert sr.show["untraced"] == []
    # A sample's standard run is what a newcomer sees first (`distea demo`):
    # nothing ambiguous, external or lost, so `show` prints no problem line.
    assert sr.show["problems"] == [], sr.show["problems"]


def check_stdout(sr: SampleRun) -> None:
    """The samples are deterministic: tracing must not change a byte of the output."""
    assert sr.traced.stdout == sr.untraced.stdout
    assert sr.traced.stdout.strip(), "the sample printed nothing"


def kind_counts(sr: SampleRun, kind: str) -> dict[str, int]:
    return sr.show["messages"]["by_kind"].get(kind, {
        "sends": 0, "recvs": 0, "matched": 0, "ambiguous": 0, "external": 0,
        "unmatched_sends": 0,
    })


def check_clean_channel(sr: SampleRun, kind: str) -> dict[str, int]:
    """Every receive of `kind` paired with certainty, every send read by someone."""
    counts = kind_counts(sr, kind)
    assert counts["recvs"] > 0, f"no {kind} receives recorded"
    assert counts["ambiguous"] == 0, counts
    assert counts["external"] == 0, counts
    assert counts["unmatched_sends"] == 0, counts
    assert counts["matched"] == counts["recvs"], counts
    return counts


def check_launcher_channels(sr: SampleRun) -> None:
    """Lifecycle messages and the stdout pipes of a `_launch`-based launcher.

    - proc: one spawn token per role, each received by the role it started.
    - exit: every process records an exit; the launcher reaps each role (one
      matched receive per role). The launcher's own exit is the one unmatched
      send: its parent is ``distea run``, which is not traced.
    - pipe: each role prints to its own stdout pipe (``sys.stdout``, which the
      tracer records at the raw write) and the launcher reads it with
      ``os.read`` until EOF (``read_line``, then ``drain_pipes``). One writer
      and one reader per pipe, every byte read: every pipe receive is in the
      launcher and paired with certainty, and every send on a pipe the launcher
      reads carries bytes it read. The other pipe sends are on pipes no traced
      process reads (the launcher's own stdout, everyone's stderr: the test
      harness reads them), and only those are unmatched.
    """
    children = len(sr.keys) - 1
    proc = kind_counts(sr, "proc")
    assert proc == {"sends": children, "recvs": children, "matched": children,
                    "ambiguous": 0, "external": 0, "unmatched_sends": 0}, proc
    exits = kind_counts(sr, "exit")
    assert exits == {"sends": children + 1, "recvs": children, "matched": children,
                     "ambiguous": 0, "external": 0, "unmatched_sends": 1}, exits
    assert [ev.channel for ev in sr.events("launcher", "send", "exit")] == [
        f"{sr.info('launcher').host}:{sr.info('launcher').pid}"
    ]
    pipe = kind_counts(sr, "pipe")
    launcher_reads = sr.events("launcher", "recv", "pipe")
    assert len(launcher_reads) == pipe["recvs"] > 0, "a pipe receive outside the launcher"
    assert pipe["matched"] == pipe["recvs"] and pipe["external"] == pipe["ambiguous"] == 0, pipe
    read = {ev.channel for ev in launcher_reads}
    role_sends = [ev for name in sr.keys if name != "launcher"
                  for ev in sr.events(name, "send", "pipe") if ev.channel in read]
    assert {ev.channel for ev in role_sends} == read  # every role's stdout carried bytes
    unread = [ev for name in sr.keys for ev in sr.events(name, "send", "pipe")
              if ev.channel not in read]
    assert pipe["unmatched_sends"] == len(unread), pipe


def check_never_impacted(sr: SampleRun) -> None:
    """`SampleInfo.never_impacted` holds for every interesting query, in every process.

    Each claim was checked against the code in the sample's test module; here
    it is only applied. Each listed method must have run somewhere, so the
    check is not vacuous.
    """
    info = SAMPLES[sr.sample]
    for method in info.never_impacted:
        assert any(method in ex for ex in sr.run.executions.values()), f"{method} never ran"
    for query in info.interesting_queries:
        res = sr.impact(query)
        for key, names in res.impacted.items():
            bad = sorted(set(names) & set(info.never_impacted))
            assert not bad, f"impact({query}) holds {bad} in {stable_name(sr.run.processes[key])}"
