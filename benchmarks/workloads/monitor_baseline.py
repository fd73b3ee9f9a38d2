"""The tracer hot path as first written: restart_events() per epoch, bound methods.

Kept verbatim, apart from this docstring, as the baseline that
``python -m benchmarks.workloads.hotpath`` compares ``distea.tracer.monitor``
against (see docs/performance.md). distea itself never imports it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from distea.tracer.clock import LogicalClock
from distea.tracer.scope import Scope
from distea.wire import Tag

MONITOR = sys.monitoring
EVENTS = MONITOR.events
DISABLE = MONITOR.DISABLE
TOOL_NAME = "distea"


class OutOfScope:
    """The state of code that is not the user's; holds the code so its id stays unique."""

    __slots__ = ("code",)

    def __init__(self, code: CodeType) -> None:
        self.code = code


class CodeState:
    """What the monitor knows of one in-scope code object."""

    __slots__ = ("announced", "code", "dirty", "last", "mid", "module")

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


def claim_tool_id() -> int:
    """The first free sys.monitoring tool id (coverage.py and others use some)."""
    for tool in (MONITOR.PROFILER_ID, 3, 4, MONITOR.OPTIMIZER_ID, MONITOR.DEBUGGER_ID,
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
        self.states: dict[int, CodeState | OutOfScope] = {}
        """By ``id(code)``; every state holds its code, so no id is reused while cached."""
        self.dirty_states: list[CodeState] = []
        self.disabled_since_restart = False
        self.tool: int | None = None
        self._next_mid = 0

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        self.tool = claim_tool_id()
        tool = self.tool
        if self.full:
            callbacks = {
                EVENTS.PY_START: self._full_entry,
                EVENTS.PY_RESUME: self._full_entry,
                EVENTS.PY_RETURN: self._full_exit,
                EVENTS.PY_YIELD: self._full_exit,
                EVENTS.PY_UNWIND: self._full_unwind,
            }
        else:
            callbacks = {
                EVENTS.PY_START: self._seen,
                EVENTS.PY_RESUME: self._seen,
                EVENTS.PY_RETURN: self._seen_with_value,
                EVENTS.PY_YIELD: self._seen_with_value,
                EVENTS.PY_UNWIND: self._seen_unwinding,
            }
        mask = 0
        for event, callback in callbacks.items():
            MONITOR.register_callback(tool, event, callback)
            mask |= event
        MONITOR.set_events(tool, mask)

    def stop(self) -> None:
        if self.tool is None:
            return
        tool, self.tool = self.tool, None
        MONITOR.set_events(tool, 0)
        for event in (EVENTS.PY_START, EVENTS.PY_RESUME, EVENTS.PY_RETURN, EVENTS.PY_YIELD,
                      EVENTS.PY_UNWIND):
            MONITOR.register_callback(tool, event, None)
        MONITOR.free_tool_id(tool)

    def reset_after_fork(self) -> None:
        """A forked child starts with nothing executed: forget firsts and lasts."""
        for state in self.states.values():
            if type(state) is CodeState:
                state.last = -1
                state.dirty = False
                state.announced = False
        self.dirty_states = []
        self.rearm()

    def adopt_stack(self, frame: FrameType | None) -> None:
        """A forked child is executing its parent's stack: those methods start here."""
        while frame is not None:
            state = self.states.get(id(frame.f_code))
            if type(state) is CodeState and state.last < 0:
                self._first_start(state)
            frame = frame.f_back

    # -- epochs --------------------------------------------------------------

    def new_epoch(self) -> None:
        """The clock just advanced at a receive or a first start: re-arm if needed."""
        self.clock.epoch = self.clock.value
        if self.disabled_since_restart:
            self.rearm()

    def rearm(self) -> None:
        self.disabled_since_restart = False
        MONITOR.restart_events()

    # -- compact-mode callbacks ---------------------------------------------

    def _seen(self, code: CodeType, offset: int) -> Any:
        state = self.states.get(id(code))
        if state is None:
            state = self._classify(code)
        if type(state) is not CodeState:
            return DISABLE
        if state.last < 0:
            self._first_start(state)
        elif state.last != self.clock.value:
            state.last = self.clock.value
            if not state.dirty:
                state.dirty = True
                self.dirty_states.append(state)
        self.disabled_since_restart = True
        return DISABLE

    def _seen_with_value(self, code: CodeType, offset: int, value: object) -> Any:
        return self._seen(code, offset)

    def _seen_unwinding(self, code: CodeType, offset: int, exc: BaseException) -> None:
        state = self.states.get(id(code))
        if type(state) is CodeState and state.last >= 0 and state.last != self.clock.value:
            state.last = self.clock.value
            if not state.dirty:
                state.dirty = True
                self.dirty_states.append(state)

    def _first_start(self, state: CodeState) -> None:
        if not state.announced:
            self._announce(state)
        clock = self.clock.tick()
        state.last = clock
        self.emit([Tag.FIRST, state.mid, clock])
        self.new_epoch()

    # -- full-mode callbacks ------------------------------------------------

    def _full_entry(self, code: CodeType, offset: int) -> Any:
        state = self._state_of(code)
        if state is None:
            return DISABLE
        if state.last < 0:
            self._first_start(state)
        self.emit([Tag.CALL, state.mid, self.clock.value, threading.get_ident()])
        return None

    def _full_exit(self, code: CodeType, offset: int, value: object) -> Any:
        state = self._state_of(code)
        if state is None:
            return DISABLE
        if state.last < 0:
            self._first_start(state)
        self.emit([Tag.RETURN, state.mid, self.clock.value, threading.get_ident()])
        return None

    def _full_unwind(self, code: CodeType, offset: int, exc: BaseException) -> None:
        state = self.states.get(id(code))
        if type(state) is CodeState and state.last >= 0:
            self.emit([Tag.RETURN, state.mid, self.clock.value, threading.get_ident()])

    # -- code objects ---------------------------------------------------------

    def _state_of(self, code: CodeType) -> CodeState | None:
        """The in-scope state of ``code``, or None when it is not the user's."""
        state = self.states.get(id(code))
        if state is None:
            state = self._classify(code)
        return state if type(state) is CodeState else None

    def _classify(self, code: CodeType) -> CodeState | OutOfScope:
        module = self.scope.module_of(code)
        if module is None:
            ignored = self.states[id(code)] = OutOfScope(code)
            return ignored
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

    def method_on_stack(self, frame: FrameType | None) -> int:
        """The id of the innermost in-scope method from ``frame`` outwards, or -1."""
        states = self.states
        while frame is not None:
            state = states.get(id(frame.f_code))
            if type(state) is CodeState:
                if not state.announced:
                    self._announce(state)
                return state.mid
            frame = frame.f_back
        return -1

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
        """LAST records for every method whose last clock moved since the last drain."""
        dirty, self.dirty_states = self.dirty_states, []
        records = []
        for state in dirty:
            state.dirty = False
            records.append([Tag.LAST, state.mid, state.last])
        return records
