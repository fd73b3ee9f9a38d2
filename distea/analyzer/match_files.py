"""Pair file write-closes with the opens that read them (channel kind ``file``).

The tracer (:mod:`distea.tracer.channels.files`) records a send when a file
opened for writing is closed and a receive when one is opened for reading,
both named by the file's identity ``device:inode`` and carrying
CLOCK_MONOTONIC times (``t``; a writer also ``t_open`` and ``trunc``,
whether its open truncated the file) and the size and mtime the file had.

On one host CLOCK_MONOTONIC is system-wide, so real time orders a close
before an open. A read that opens at ``t`` may hold the bytes of every write
closed before ``t`` — back to the latest truncating open among them, which
wiped everything closed before it. The read is ordered after the last such
close of **each** process that wrote after that truncation: certain edges,
one per writer, since the bytes of any of them may be in what was read. No
ambiguity, and safe.

An open that created or truncated the file (``meta["new"]`` on its
receive, ``trunc`` on its send) holds nothing written before it: such a
read is ordered after no earlier write, and writes closed before such an
open are not taken as read after it. Besides truncation this is what keeps
a reused inode apart: a deleted file's inode, given to a file created later
(``tempfile.mkstemp`` in another process), is one channel name for two files.
A file created without ``O_EXCL`` and without truncating (``open(path,
"a")`` of a new path) cannot be told from an old one: writes of a deleted
file that had its inode stay candidates (safe, less precise) and may make a
"changed after its last recorded write" line.

What real time cannot decide is reported, never guessed:

- a writer that still had the file open when the reader opened it (the
  reader may see some of its bytes, written after its open): a problem line;
- a file whose mtime at the read is newer than the last recorded close: it
  was changed by something the tracer did not see (C code, an untraced
  process): a problem line.

Across hosts (a shared filesystem) the clocks are not comparable and the
identity differs: a read is paired, as uncertain, with every write-close of
the same path on other hosts (ordered after each that is not causally after
it: safe, less precise).

Files that no other process writes (inputs, the program's own scratch
files) are dropped: they are neither counted nor reported, so reading a
file that existed before the run is not an "external" receive.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from distea.model import MessageEvent

TYPE_CHECKING = False
if TYPE_CHECKING:
    from distea.analyzer.matching import Matching

KIND = "file"
NOTES_PER_REASON = 3
"""Problem lines of one kind named one by one; the rest are counted."""


@dataclass(slots=True)
class FileCounts:
    """What the file channel adds to the matching's counts."""

    sends: list[int] = field(default_factory=list)
    """Write-closes some other process read."""
    recvs: list[int] = field(default_factory=list)
    """Reads of files some other process wrote."""
    matched: int = 0
    ambiguous: int = 0


def _meta_int(ev: MessageEvent, key: str, default: int = 0) -> int:
    value = ev.meta.get(key) if ev.meta else None
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _path(ev: MessageEvent) -> str:
    path = ev.meta.get("path") if ev.meta else None
    return path if isinstance(path, str) else ev.channel


def match_files(m: Matching, groups: Sequence[tuple[list[int], list[int]]]) -> FileCounts:
    """Pair every ``file`` group (one identity each); see the module docstring."""
    events = m.events
    hosts = [key.split(":", 1)[0] for key in m.process_keys]

    def host(i: int) -> str:
        return hosts[m.proc_of[i]]

    writes_by_path: dict[str, list[int]] = defaultdict(list)
    for sends, _ in groups:
        for s in sends:
            writes_by_path[_path(events[s])].append(s)

    out = FileCounts()
    read_sends: set[int] = set()
    concurrent: dict[str, int] = defaultdict(int)
    unseen: dict[str, int] = defaultdict(int)
    for sends, recvs in groups:
        for r in recvs:
            rev = events[r]
            rp, rh, t = m.proc_of[r], host(r), _meta_int(rev, "t")
            local = [s for s in sends if m.proc_of[s] != rp and host(s) == rh]
            remote = [s for s in writes_by_path.get(_path(rev), ()) if host(s) != rh]
            edges = [] if _is_new(rev) else _local_writers(events, local, t)
            if any(_meta_int(events[s], "t_open") < t < _meta_int(events[s], "t") for s in local):
                concurrent[_path(rev)] += 1
            if edges:
                last = max(edges, key=lambda s: _meta_int(events[s], "t"))
                before = _meta_int(events[last], "mtime", -1)
                if before >= 0 and _meta_int(rev, "mtime", -1) > before:
                    unseen[_path(rev)] += 1
            if not edges and not remote:
                continue
            for s in edges:
                m.edges.append((s, r))
                read_sends.add(s)
            if remote:
                m.uncertain.append((r, _chains(m, remote)))
                read_sends.update(remote)
                out.ambiguous += 1
            else:
                out.matched += 1
            out.recvs.append(r)
    out.sends = sorted(read_sends)
    _note(m, concurrent, "was read while another process had it open for writing; the "
          "reader may have seen bytes written after its open, which nothing orders")
    _note(m, unseen, "had been changed after its last recorded write when it was read "
          "(written by C code or an untraced process?); that change orders nothing")
    return out


def _local_writers(events: Sequence[MessageEvent], local: list[int], t: int) -> list[int]:
    """The last close, per process, of the writes a read at ``t`` may hold (same host)."""
    before = [s for s in local if _meta_int(events[s], "t") <= t]
    if not before:
        return []
    wiped_until = max((_meta_int(events[s], "t_open") for s in before
                       if _truncated(events[s])), default=-1)
    latest: dict[str, int] = {}
    for s in before:
        ev = events[s]
        if _meta_int(ev, "t") < wiped_until:
            continue  # closed before a later truncating open: its bytes are gone
        known = latest.get(ev.process)
        if known is None or _meta_int(events[known], "t") < _meta_int(ev, "t"):
            latest[ev.process] = s
    return sorted(latest.values())


def _truncated(ev: MessageEvent) -> bool:
    return bool(ev.meta and ev.meta.get("trunc"))


def _is_new(ev: MessageEvent) -> bool:
    """A read whose own open created or truncated the file: it holds no earlier write."""
    return bool(ev.meta and ev.meta.get("new"))


def _chains(m: Matching, sends: list[int]) -> tuple[tuple[int, ...], ...]:
    by_process: dict[int, list[int]] = defaultdict(list)
    for s in sends:
        by_process[m.proc_of[s]].append(s)
    return tuple(tuple(sorted(ids, key=lambda i: m.events[i].clock))
                 for _, ids in sorted(by_process.items()))


def _note(m: Matching, counts: dict[str, int], text: str) -> None:
    for k, (path, n) in enumerate(sorted(counts.items())):
        if k == NOTES_PER_REASON:
            m.notes.append(f"{len(counts) - k} more files {text}")
            return
        times = "" if n == 1 else f" ({n} reads)"
        m.notes.append(f"file {path}{times} {text}")
