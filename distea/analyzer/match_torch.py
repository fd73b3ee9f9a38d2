"""torch.distributed: what the tracer could not see, as problem lines.

The tracer records operations that a process group issued but nobody
recorded (and the use of ``torch.distributed.rpc``, whose messages move in
C++) as an ``unseen`` collective: every rank of the group sends and receives
on ``"GROUP:unseen"``, which the collective hub already orders safely at the
point they were found. This module only words the problem line, one per
process and group, naming the process by its role (``rank 1/2``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from distea.model import ProcessInfo

if TYPE_CHECKING:
    from distea.analyzer.matching import Matching


def unseen_notes(m: Matching, processes: Mapping[str, ProcessInfo] | None) -> list[str]:
    """One line per (process, what) the tracer reported as not seen."""
    notes: list[str] = []
    for i, ev in enumerate(m.events):
        meta = ev.meta
        if ev.kind != "torch" or ev.direction != "send" or not meta or meta.get("op") != "unseen":
            continue
        key = m.process_keys[m.proc_of[i]]
        info = processes.get(key) if processes else None
        who = f"{info.role} (pid {info.pid})" if info else key
        notes.append(f"{who}: torch.distributed: {meta.get('what', 'operations not seen')}; "
                     "their cross-rank order is missing (ordered only where they were found)")
    return notes
