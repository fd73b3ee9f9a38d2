"""What ``distea run``'s summary says about a run, read quickly or from the trace model.

The summary is printed after every ``distea run``. Reading the run back with
:func:`distea.traceformat.load_run` imports the trace model (``dataclasses``,
which imports ``inspect``, ``ast``, ``dis`` and ``tokenize``; ``pathlib``;
``typing``; ``json``): about 28 ms of CPU on our test machine with bytecode
caches, more than all the rest of ``distea run`` above the interpreter's own
start. :func:`glance` reads the same files with msgpack alone (which the
collector has imported already) and ``_json``'s C scanner, and gives the same
:class:`RunFacts`, but only for runs on which ``load_run`` has nothing to
report: no problem line, no note of an untraced or lost process, no damaged
or malformed record, every process complete. For anything else, and on any
doubt, it returns None and the summary reads the run with ``load_run``, so
what the summary reports is always what ``distea show`` reports.
``tests/reliability/test_summary_facts.py`` compares both readings on real runs.

Plain classes, not dataclasses, for the same reason as
:mod:`distea.runwriter`'s: ``dataclasses`` is most of what this module avoids.
"""

from __future__ import annotations

import os

from distea.rundir import PROCS_DIR, RUN_META
from distea.tracer.config import read_json_object
from distea.wire import FORMAT_VERSION, LOST_DIR, PROC_SUFFIX, UNTRACED_DIR, Tag

TYPE_CHECKING = False  # not typing's: this module runs after the command, on every run
if TYPE_CHECKING:
    from typing import Any

    from distea.model import RunData

CHANNEL_NUMBERS_SINCE = 2
"""The first format whose SEND and RECV records name their channel by number
(as :mod:`distea.traceformat` reads them)."""
READ_SIZE = 1 << 20


class ProcessFacts:
    """One traced process as the summary's tree shows it."""

    __slots__ = ("complete", "key", "methods", "parent_token", "pid", "role", "start_method",
                 "started_ns")

    def __init__(self, key: str, pid: int, role: str, start_method: str, started_ns: int,
                 parent_token: str | None, complete: bool, methods: int) -> None:
        self.key = key
        self.pid = pid
        self.role = role
        self.start_method = start_method
        self.started_ns = started_ns
        self.parent_token = parent_token
        self.complete = complete
        self.methods = methods
        """How many methods ran in it."""

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProcessFacts):
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # compared by value, mutable

    def __repr__(self) -> str:
        return f"ProcessFacts{self._values()!r}"


class RunFacts:
    """Everything :func:`distea.cli.summary.print_summary` prints about a run."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        """Where ``distea run`` was started (run.json's ``cwd``, else ``.``)."""
        self.processes: dict[str, ProcessFacts] = {}
        self.methods: set[str] = set()
        """Every method that ran, in any process."""
        self.message_events = 0
        self.spawned_by: dict[str, str] = {}
        """A ``proc`` send's spawn token → the key of the process that sent it."""
        self.first_sender: tuple[int, str] | None = None
        """The least (clock, method) of a message send by a named method other than a
        module's body, ``proc`` and ``exit`` sends left out."""
        self.untraced: list[tuple[object, tuple[str, ...], str]] = []
        """Untraced children: pid, argv, reason."""
        self.problems: list[str] = []

    def example_query(self) -> str:
        """A query worth trying: a method that sent a message (its impact can cross
        processes), else any method that ran other than a module's body, else any."""
        if self.first_sender is not None:
            return self.first_sender[1]
        names = sorted(n for n in self.methods if not n.endswith("<module>"))
        return names[0] if names else min(self.methods)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RunFacts):
            return NotImplemented
        return vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]  # compared by value, mutable

    def __repr__(self) -> str:
        return f"RunFacts({vars(self)!r})"


def facts_of(data: RunData) -> RunFacts:
    """The facts of a run read whole by :func:`distea.traceformat.load_run`."""
    facts = RunFacts(str(data.meta.get("cwd") or "."))
    for key, info in data.processes.items():
        facts.processes[key] = ProcessFacts(
            key, info.pid, info.role, info.start_method, info.started_ns, info.parent_token,
            info.complete, len(data.executions.get(key, {})))
    facts.methods = {name for execs in data.executions.values() for name in execs}
    for key, events in data.messages.items():
        facts.message_events += len(events)
        for event in events:
            if event.direction != "send":
                continue
            if event.kind == "proc":
                facts.spawned_by[event.channel] = key
            elif event.kind != "exit":
                _note_sender(facts, event.clock, event.method)
    facts.untraced = [(child.pid, child.argv, child.reason) for child in data.untraced]
    facts.problems = list(data.problems)
    return facts


def _note_sender(facts: RunFacts, clock: int, method: str | None) -> None:
    if not method or method.endswith("<module>"):
        return
    if facts.first_sender is None or (clock, method) < facts.first_sender:
        facts.first_sender = (clock, method)


class _Doubt(Exception):
    """Something ``load_run`` would report, or might: the summary reads the run whole."""


def glance(run_dir: str) -> RunFacts | None:
    """The run's facts without the trace model, or None unless ``load_run`` would report
    no problem, no untraced child's note and no lost records for it (see above)."""
    try:
        return _glance(run_dir)
    except (_Doubt, OSError, ValueError, TypeError, KeyError, IndexError):
        return None
    except Exception:  # msgpack's own errors, anything unforeseen: the full reading decides
        return None


def _glance(run_dir: str) -> RunFacts:
    with open(os.path.join(run_dir, RUN_META)) as stream:
        meta = read_json_object(stream.read())
    if not isinstance(meta, dict):
        raise _Doubt
    version = meta.get("format")
    collector = meta.get("collector")
    if type(version) is not int or not 1 <= version <= FORMAT_VERSION \
            or not isinstance(collector, dict) or collector.get("problems") \
            or collector.get("rejected") or collector.get("refused"):
        raise _Doubt
    for folder in (UNTRACED_DIR, LOST_DIR):
        if os.path.lexists(os.path.join(run_dir, folder)):
            raise _Doubt  # notes: load_run reads and words them
    names = sorted(os.listdir(os.path.join(run_dir, PROCS_DIR)))
    if any(name.startswith(".") or not name.endswith(PROC_SUFFIX) for name in names):
        raise _Doubt
    written = collector.get("logs")
    if isinstance(written, list) and not {str(n) for n in written} <= set(names):
        raise _Doubt  # a log the collector wrote is missing
    facts = RunFacts(str(meta.get("cwd") or "."))
    for name in names:
        _glance_process(os.path.join(run_dir, PROCS_DIR, name), facts)
    return facts


def _glance_process(path: str, facts: RunFacts) -> None:
    """One log's facts; :class:`_Doubt` (or the error itself) wherever
    ``distea.traceformat._load_process`` would skip, stop or count something."""
    import msgpack

    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=1 << 30)
    header: dict[Any, Any] | None = None
    names: dict[int, str] = {}
    channels: dict[int, tuple[str, str]] = {}
    interned = True
    executed: set[str] = set()
    stats: dict[Any, Any] = {}
    end_reason: str | None = None
    key = ""
    messages = 0
    with open(path, "rb") as stream:
        while chunk := stream.read(READ_SIZE):
            unpacker.feed(chunk)
            for rec in unpacker:
                if type(rec) is not list or not rec or type(rec[0]) is not int:
                    raise _Doubt
                tag = rec[0]
                if header is None:
                    if tag != Tag.HEADER or len(rec) < 2 or not isinstance(rec[1], dict):
                        raise _Doubt
                    header = rec[1]
                    version = header.get("format")
                    key = header.get("key")  # type: ignore[assignment]  # checked next
                    if type(version) is not int or not 1 <= version <= FORMAT_VERSION \
                            or not isinstance(key, str) or key in facts.processes:
                        raise _Doubt
                    interned = version >= CHANNEL_NUMBERS_SINCE
                    continue
                if tag == Tag.SEND or tag == Tag.RECV:
                    if interned:
                        _, clock, cid, start, end, mid, _thread, _meta = rec
                        kind, channel = channels[cid]
                    else:
                        _, clock, kind, channel, start, end, mid, _thread, _meta = rec
                    if (type(clock) is not int or type(start) is not int
                            or type(end) is not int or type(kind) is not str
                            or type(channel) is not str):
                        raise _Doubt
                    method = names.get(mid)  # as load_run looks it up: mid must be hashable
                    messages += 1
                    if tag == Tag.SEND:
                        if kind == "proc":
                            if facts.spawned_by.setdefault(channel, key) != key:
                                raise _Doubt  # one token sent by two processes
                        elif kind != "exit":
                            _note_sender(facts, clock, method)
                elif tag == Tag.FIRST or tag == Tag.LAST or tag == Tag.CALL \
                        or tag == Tag.RETURN:
                    if tag == Tag.FIRST or tag == Tag.LAST:
                        _, mid, clock = rec
                    else:
                        _, mid, clock, _thread = rec
                    name = names[mid]
                    if type(clock) is not int:
                        raise _Doubt
                    if tag == Tag.FIRST:
                        executed.add(name)
                elif tag == Tag.METHOD:
                    _, mid, module, qualname, _file, _first, _last = rec
                    if type(mid) is not int or type(module) is not str \
                            or type(qualname) is not str:
                        raise _Doubt
                    names[mid] = f"{module}.{qualname}"
                elif tag == Tag.CHANNEL:
                    _, cid, kind, channel = rec
                    if type(cid) is not int or type(kind) is not str \
                            or type(channel) is not str:
                        raise _Doubt
                    channels[cid] = (kind, channel)
                elif tag == Tag.STATS:
                    if not isinstance(rec[1], dict):
                        raise _Doubt
                    stats = rec[1]
                    if "role" in stats:
                        header = {**header,
                                  **{k: stats[k] for k in ("role", "rank", "world_size")}}
                elif tag == Tag.END:
                    end_reason = str(rec[2])
                elif tag == Tag.LINK:
                    if len(rec) < 4:
                        raise _Doubt  # load_run reads four fields
                elif tag == Tag.UNTRACED:
                    child_pid, argv, reason = rec[1], rec[2], rec[3]
                    if type(argv) is not list or any(type(a) is not str for a in argv):
                        raise _Doubt  # the summary joins them: let load_run's data decide
                    facts.untraced.append((child_pid, tuple(argv), str(reason)))
        if header is None or unpacker.tell() < os.fstat(stream.fileno()).st_size:
            raise _Doubt  # empty, or its last record torn
    unseen = stats.get("unseen")
    dropped = stats.get("dropped_events")
    if end_reason is None or (isinstance(unseen, list) and unseen) \
            or (isinstance(dropped, int) and not isinstance(dropped, bool) and dropped):
        raise _Doubt  # incomplete, or something lost: load_run says what
    pid, started_ns, token = header.get("pid"), header.get("started_ns"), \
        header.get("parent_token")
    facts.processes[key] = ProcessFacts(
        key, _int(pid), str(header.get("role", "")), str(header.get("start_method", "main")),
        _int(started_ns), token if isinstance(token, str) else None, True, len(executed))
    facts.methods |= executed
    facts.message_events += messages


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
