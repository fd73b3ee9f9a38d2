"""sys.monitoring callbacks: the first and last clock of every in-scope method.

Compact mode records only what Execute-After needs (DESIGN.md §3, §6):

- ``first(m)``: the clock at m's first start. A first start is an event: it
  advances the clock and opens a new *epoch*.
- ``last(m)``: the latest clock at which m was executing. Impact compares
  ``last`` only with epoch starts (first starts and receives), so one
  sighting of m per epoch is enough.

How the events are armed (compact mode; the choice is measured, see
docs/performance.md and ``python -m benchmarks.workloads.hotpath``):

- ``PY_START`` is a *global* event, used only to meet each code object once:
  out-of-scope code is decided once (cached by ``id(code)``; the state keeps
  the code alive so the id stays unique) and disabled; in-scope code gets its
  first start recorded, gets the *local* events ``PY_RESUME | PY_RETURN |
  PY_YIELD`` switched on, and its ``PY_START`` is disabled too. Later starts
  need no sighting: every frame that starts ends by returning, yielding or
  unwinding (each recorded in the epoch where it happens, which is later
  than the start) or is still on a stack at exit (the stack walk).
- a local callback that sees a code for the first time at the current
  clock records it and leaves the location armed (code that runs once per
  epoch, such as a request handler, then never needs re-arming); seen again
  at the same clock, it has nothing new to say until the next epoch, so it
  returns ``DISABLE`` and the code goes on a re-arm list (once per epoch).
  When a new epoch opens, only the codes on that list are re-armed, by
  switching their local events off and on again (``set_local_events``; two
  re-instrumentations of that one code object). Nothing calls
  ``restart_events()`` per epoch: it is global, so it re-arms every disabled
  location of every tool, out-of-scope code included, which then fires and
  is disabled again in every epoch.
- ``PY_UNWIND`` is global (CPython accepts it only as a global event) and is
  never disabled: CPython forbids ``DISABLE`` there.

Invariant (what ``tests/tracer/test_monitor.py`` checks against full mode):
when an epoch opens, every ``PY_RESUME``/``PY_RETURN``/``PY_YIELD`` location
of every in-scope code that has started is armed, so a method executing after
the epoch opens is seen in that epoch (or later, which compares the same).

The callbacks are closures over local names (no ``self.`` lookups, no bound
method calls): that is what runs millions of times. After ``fork`` the child
forgets every first and last and calls ``restart_events()`` once, so each
method is met again by ``PY_START``.

``--mode full`` records every entry and exit as CALL/RETURN records with
global events and never disables in-scope code; it is the oracle that
compact mode is tested against.
"""

from __future__ import annotations

import sys
from _thread import get_ident

from distea.tracer.clock import LogicalClock
from distea.tracer.scope import Scope
from distea.wire import Tag

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import CodeType, FrameType
    from typing import Any

MONITOR = sys.monitoring
EVENTS = MONITOR.events
DISABLE = MONITOR.DISABLE
TOOL_NAME = "distea"

LOCAL_EVENTS = EVENTS.PY_RESUME | EVENTS.PY_RETURN | EVENTS.PY_YIELD
"""What compact mode arms per in-scope code object, and re-arms per epoch."""
COMPACT_GLOBAL_EVENTS = EVENTS.PY_START | EVENTS.PY_UNWIND
FULL_EVENTS = (EVENTS.PY_START | EVENTS.PY_RESUME | EVENTS.PY_RETURN | EVENTS.PY_YIELD
               | EVENTS.PY_UNWIND)
_ALL_EVENTS = (EVENTS.PY_START, EVENTS.PY_RESUME, EVENTS.PY_RETURN, EVENTS.PY_YIELD,
               EVENTS.PY_UNWIND)

_CALL = int(Tag.CALL)
_RETURN = int(Tag.RETURN)


class CodeState:
    """What the monitor knows of one in-scope code object."""

    __slots__ = ("announced", "armed", "code", "dirty", "last", "mid", "module")

    def __init__(self, code: CodeType, mid: int, module: str) -> None:
        self.code = code
        self.mid = mid
        self.module = module
        self.announced = False
        """A METHOD record for it is in this process's log (reset by fork)."""
        self.last = -1
        """Latest clock seen executing in this process; -1: not yet started here."""
        self.dirty = False
        """``last`` changed since the last flush."""
        self.armed = False
        """Compact mode: local events on and nothing disabled since the last re-arm."""


def claim_tool_id() -> int:
    """A free sys.monitoring tool id, the unassigned ones first.

    The named ids belong to tools a traced program may start itself:
    cProfile takes PROFILER_ID, debuggers DEBUGGER_ID, coverage.py
    COVERAGE_ID. Taking one of those would make the program's own use of
    that tool fail under distea, so they are the last resort.
    """
    for tool in (3, 4, MONITOR.OPTIMIZER_ID, MONITOR.PROFILER_ID, MONITOR.DEBUGGER_ID,
                 MONITOR.COVERAGE_ID):
        if MONITOR.get_tool(tool) is None:
            MONITOR.use_tool_id(tool, TOOL_NAME)
            return tool
    raise RuntimeError("every sys.monitoring tool id is in use")


class Monitor:
    """Owns the tool id, the per-code states and the callbacks."""

    def __init__(
        self,
        scope: Scope,
        clock: LogicalClock,
        emit: Callable[[list[Any]], None],
        full: bool = False,
    ) -> None:
        self.scope = scope
        self.clock = clock
        self.emit = emit
        self.full = full
        self.states: dict[int, CodeState | CodeType] = {}
        """By ``id(code)``: a :class:`CodeState` for in-scope code, the code itself for
        the rest (so no id is reused while cached). Not an object per out-of-scope
        code: a pool worker meets ~550, which the collections at its exit traverse."""
        self.dirty_states: list[CodeState] = []
        """States whose ``last`` moved since the last drain (emptied in place)."""
        self.to_rearm: list[CodeState] = []
        """Compact mode: states with a location disabled since the last epoch (emptied in place)."""
        self.tool: int | None = None
        self._next_mid = 0
        self.method_of_caller = self._caller_method_finder()

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        self.tool = claim_tool_id()
        callbacks = self._full_callbacks() if self.full else self._compact_callbacks()
        mask = FULL_EVENTS if self.full else COMPACT_GLOBAL_EVENTS
        for event, callback in callbacks.items():
            MONITOR.register_callback(self.tool, event, callback)
        MONITOR.set_events(self.tool, mask)

    def stop(self) -> None:
        if self.tool is None:
            return
        tool, self.tool = self.tool, None
        MONITOR.set_events(tool, 0)
        if not self.full:
            for state in self.states.values():
                if type(state) is CodeState:
                    MONITOR.set_local_events(tool, state.code, 0)
                    state.armed = False
        self.to_rearm.clear()
        for event in _ALL_EVENTS:
            MONITOR.register_callback(tool, event, None)
        MONITOR.free_tool_id(tool)

    def reset_after_fork(self) -> None:
        """A forked child starts with nothing executed: forget firsts and lasts."""
        for state in self.states.values():
            if type(state) is CodeState:
                state.last = -1
                state.dirty = False
                state.announced = False
                state.armed = not self.full
        self.to_rearm.clear()
        self.dirty_states.clear()
        if self.tool is not None:
            # once per fork: PY_START fires again everywhere, so every method
            # is met again (and every disabled local event is armed again)
            MONITOR.restart_events()

    def adopt_stack(self, frame: FrameType | None) -> None:
        """A forked child is executing its parent's stack: those methods start here."""
        while frame is not None:
            state = self.states.get(id(frame.f_code))
            if type(state) is CodeState and state.last < 0:
                self._first_start(state)
            frame = frame.f_back

    # -- epochs --------------------------------------------------------------

    def new_epoch(self) -> None:
        """The clock just advanced at a receive or a first start: re-arm what was disabled.

        Only code that fired since the last epoch was disabled, so only that
        code is re-armed: local events off and on again re-instruments the
        code object with every location armed (measured against
        ``restart_events()`` in docs/performance.md).
        """
        self.clock.epoch = self.clock.value
        pending = self.to_rearm
        if not pending:
            return
        tool = self.tool
        if tool is None:
            pending.clear()
            return
        set_local = MONITOR.set_local_events
        for state in pending:
            code = state.code
            set_local(tool, code, 0)
            set_local(tool, code, LOCAL_EVENTS)
            state.armed = True
        pending.clear()

    def rearm(self) -> None:
        """Re-arm everything now (kept for callers; ``new_epoch`` is the usual way)."""
        self.new_epoch()

    # -- compact-mode callbacks ---------------------------------------------

    def _compact_callbacks(self) -> dict[int, Callable[..., Any]]:
        """PY_START (global), PY_RESUME/PY_RETURN/PY_YIELD (local), PY_UNWIND (global).

        Closures over locals: each name below is a fast local or cell lookup
        instead of an attribute lookup on ``self`` per event.
        """
        # Any: local callbacks only ever meet in-scope code (see the module docstring)
        states_get: Callable[[int], Any] = self.states.get
        classify = self._classify
        first_start = self._first_start
        clock = self.clock
        dirty_append = self.dirty_states.append
        rearm_append = self.to_rearm.append
        set_local = MONITOR.set_local_events
        tool = self.tool
        assert tool is not None, "start() claims the tool id first"
        code_state = CodeState
        disable = DISABLE
        local_events = LOCAL_EVENTS

        def started(code: CodeType, offset: int) -> Any:
            # Once per code object (again only after fork or a restart_events
            # by someone else): decide scope, record the first start, arm the
            # local events. Always DISABLE: later starts are seen by their end.
            state = states_get(id(code))
            if state is None:
                state = classify(code)
                if type(state) is not code_state:
                    return disable
                try:
                    set_local(tool, code, local_events)
                except ValueError:  # the tool was freed meanwhile (stop() on another thread)
                    return disable
                state.armed = True
            elif type(state) is not code_state:
                return disable
            if state.last < 0:
                first_start(state)
            else:
                now = clock.value
                if state.last != now:
                    state.last = now
                    if not state.dirty:
                        state.dirty = True
                        dirty_append(state)
            return disable

        def seen(code: CodeType, offset: int) -> Any:
            # PY_RESUME: local, so only in-scope code reaches here. The first
            # sighting at a clock records it and leaves the location armed
            # (code that runs once per epoch then never needs re-arming); a
            # second sighting at the same clock has nothing new to say until
            # the next epoch: disable, and re-arm when that epoch opens.
            state = states_get(id(code))
            last = state.last
            now = clock.value
            if last == now:
                if state.armed:
                    state.armed = False
                    rearm_append(state)
                return disable
            if last < 0:
                first_start(state)  # a generator made before fork, resumed in the child
            else:
                state.last = now
                if not state.dirty:
                    state.dirty = True
                    dirty_append(state)
            return None

        def seen_with_value(code: CodeType, offset: int, value: object) -> Any:
            # PY_RETURN, PY_YIELD: as ``seen`` (inlined: one call less per event).
            state = states_get(id(code))
            last = state.last
            now = clock.value
            if last == now:
                if state.armed:
                    state.armed = False
                    rearm_append(state)
                return disable
            if last < 0:
                first_start(state)
            else:
                state.last = now
                if not state.dirty:
                    state.dirty = True
                    dirty_append(state)
            return None

        def unwinding(code: CodeType, offset: int, exc: BaseException) -> None:
            # Global and never disabled (CPython forbids DISABLE here). A frame that
            # unwinds a RecursionError is at the limit, and a call from here may fail with
            # one too, which would replace the program's, this frame last in its traceback
            # (CPython's test_traceback): let it pass. The frames below, of the same code,
            # are marked as they unwind.
            try:
                state = states_get(id(code))
                if type(state) is code_state and state.last >= 0:
                    now = clock.value
                    if state.last != now:
                        state.last = now
                        if not state.dirty:
                            state.dirty = True
                            dirty_append(state)
            except RecursionError:
                pass

        return {
            EVENTS.PY_START: started,
            EVENTS.PY_RESUME: seen,
            EVENTS.PY_RETURN: seen_with_value,
            EVENTS.PY_YIELD: seen_with_value,
            EVENTS.PY_UNWIND: unwinding,
        }

    def _first_start(self, state: CodeState) -> None:
        if not state.announced:
            self._announce(state)
        clock = self.clock.tick()
        state.last = clock
        self.emit([Tag.FIRST, state.mid, clock])
        self.new_epoch()

    # -- full-mode callbacks ------------------------------------------------

    def _full_callbacks(self) -> dict[int, Callable[..., Any]]:
        """Every entry and exit of in-scope code; out-of-scope code is disabled."""
        # Any: states are narrowed by the type() checks below
        states_get: Callable[[int], Any] = self.states.get
        classify = self._classify
        first_start = self._first_start
        clock = self.clock
        emit = self.emit
        code_state = CodeState
        disable = DISABLE

        def entry(code: CodeType, offset: int) -> Any:
            state = states_get(id(code))
            if state is None:
                state = classify(code)
            if type(state) is not code_state:
                return disable
            if state.last < 0:
                first_start(state)
            emit([_CALL, state.mid, clock.value, get_ident()])
            return None

        def exit_(code: CodeType, offset: int, value: object) -> Any:
            state = states_get(id(code))
            if state is None:
                state = classify(code)
            if type(state) is not code_state:
                return disable
            if state.last < 0:
                first_start(state)
            emit([_RETURN, state.mid, clock.value, get_ident()])
            return None

        def unwind(code: CodeType, offset: int, exc: BaseException) -> None:
            state = states_get(id(code))
            if type(state) is code_state and state.last >= 0:
                emit([_RETURN, state.mid, clock.value, get_ident()])

        return {
            EVENTS.PY_START: entry,
            EVENTS.PY_RESUME: entry,
            EVENTS.PY_RETURN: exit_,
            EVENTS.PY_YIELD: exit_,
            EVENTS.PY_UNWIND: unwind,
        }

    # -- code objects ---------------------------------------------------------

    def _classify(self, code: CodeType) -> CodeState | CodeType:
        module = self.scope.module_of(code)
        if module is None:
            self.states[id(code)] = code
            return code
        state = CodeState(code, self._next_mid, module)
        self._next_mid += 1
        self.states[id(code)] = state
        return state

    def _announce(self, state: CodeState) -> None:
        code = state.code
        lastline = max((line for _, _, line in code.co_lines() if line is not None),
                       default=code.co_firstlineno)
        self.emit([Tag.METHOD, state.mid, state.module, code.co_qualname, code.co_filename,
                   code.co_firstlineno, lastline])
        state.announced = True

    # -- queries used by the session -------------------------------------------

    def _caller_method_finder(self) -> Callable[[int], int]:
        """``method_of_caller(depth)``: the id of the innermost in-scope method
        ``depth`` frames above its caller or further out, or -1.

        Called at every send and receive, from the session's recorders (the
        frames in between are tracer code: the recorder, then a channel's
        wrapper). ``sys._getframe(depth)`` goes straight to the frame wanted
        without making frame objects for the ones it passes; a closure, so
        that each call is one lookup of a local, not of a bound method.
        """
        # Any: states are narrowed by the type() check below
        states_get: Callable[[int], Any] = self.states.get
        announce = self._announce
        getframe = sys._getframe
        code_state = CodeState

        def method_of_caller(depth: int) -> int:
            try:
                frame: FrameType | None = getframe(depth + 1)
            except ValueError:  # a shallower stack (an atexit handler, a thread's bottom)
                return -1
            while frame is not None:
                state = states_get(id(frame.f_code))
                if type(state) is code_state:
                    if not state.announced:
                        announce(state)
                    return state.mid
                frame = frame.f_back
            return -1

        return method_of_caller

    def mark_stacks_executing(self) -> None:
        """Every in-scope frame on any thread's stack is executing now (used at exit)."""
        clock = self.clock.value
        for frame in sys._current_frames().values():
            current: FrameType | None = frame
            while current is not None:
                state = self.states.get(id(current.f_code))
                if type(state) is CodeState and state.last >= 0 and state.last != clock:
                    state.last = clock
                    if not state.dirty:
                        state.dirty = True
                        self.dirty_states.append(state)
                current = current.f_back

    def drain_lasts(self) -> list[list[Any]]:
        """LAST records for every method whose last clock moved since the last drain.

        Several threads may drain at once (the idle flusher drains from its own
        thread, a message event from any thread) while callbacks append: each
        state is taken with one ``pop`` (atomic), so no two drains take the
        same one and none is removed unread. Its ``dirty`` flag is cleared
        before its clock is read: a callback that moves the clock meanwhile
        either is read here or lists the state again (a duplicate LAST is
        harmless: the reader keeps the highest).
        """
        pop = self.dirty_states.pop
        last = int(Tag.LAST)
        records: list[list[Any]] = []
        while True:
            try:
                state = pop()
            except IndexError:
                return records
            state.dirty = False
            records.append([last, state.mid, state.last])
