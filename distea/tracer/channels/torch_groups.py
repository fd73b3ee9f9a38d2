"""torch.distributed process groups: every operation, whoever issues it.

A process group's C++ ``ProcessGroup`` runs a *pre-hook* before it issues
any operation (``ProcessGroup.register_pre_hook``, torch 2.15 here): the
same place for a Python ``dist.all_reduce``, DistributedDataParallel's C++
reducer (gradient buckets, the initial broadcast), FSDP2's
``all_gather_single``/``reduce_scatter_single``, functional collectives,
DTensor and object collectives. Hooking every group is therefore complete
where wrapping Python names never can be (they drift behind torch and miss
C++ callers), cheap (one Python call per operation, nothing per tensor
element), and it changes nothing: the hook only reads its arguments.

Naming: every rank issues the collectives of a group in the same order, so
the n-th collective of group G is channel ``"G:n"`` on every rank (``G`` is
``WORLD`` for the default group, else ``group_name``, which torch makes the
same on every rank). The hook's ``op_id`` is not used: it counts
point-to-point operations too, which differ between ranks.

Groups are found when torch registers them (``_register_process_group``,
through which ``init_process_group``, ``new_group``, ``split_group`` and
DeviceMesh pass) and by a sweep of ``_world.pg_map`` as a fallback. The
hooked groups are held weakly: tracing never keeps a destroyed group alive.

Completeness is checked, not assumed: the group's own sequence number
(``_get_sequence_number_for_group``, one per issued operation) is compared
with the operations the hook saw; a group that could not be hooked (an
older torch, a backend that does not run hooks) reports everything it
issued that no Python wrapper recorded. See :meth:`GroupHooks.unseen`.
"""

from __future__ import annotations

import weakref

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any

HOOK_ID = 0x64697374  # "dist": an id no user hook is likely to take

ALL, ROOT_SRC, ROOT_DST, SEND, RECV = "all", "src", "dst", "send", "recv"
HOOK_RULES: dict[str, str] = {
    "BROADCAST": ROOT_SRC,
    "SCATTER": ROOT_SRC,
    "REDUCE": ROOT_DST,
    "GATHER": ROOT_DST,
    "SEND": SEND,
    "RECV": RECV,
}
"""Operation (``HookOpName`` member) → data flow; every other one (all_reduce,
all_gather*, reduce_scatter*, all_to_all*, barrier, coalesced forms, split,
UNKNOWN) is all-to-all, which is also the safe reading of one not known."""


class GroupState:
    """What the hook has seen of one process group."""

    __slots__ = ("attached", "group", "name", "ops", "reported")

    def __init__(self, group: Any, name: str, attached: bool) -> None:
        self.group = weakref.ref(group)
        self.name = name
        self.attached = attached
        self.ops = 0
        """Operations the hook saw (every kind: the group's sequence counts them all)."""
        self.reported = 0
        """Unseen operations already reported."""


class GroupHooks:
    """Pre-hooks on every process group of the process; see the module docstring.

    ``record(state, op_name, root)`` is the channel's recorder, called from
    the hook in the thread that issues the operation.
    """

    def __init__(self, record: Any, on_error: Any) -> None:
        self.record = record
        self.on_error = on_error
        self.states: dict[int, GroupState] = {}
        """id(group) → state, for live groups (a finalizer forgets dead ones)."""
        self.names_of_ops: dict[int, str] = {}

    def state_of(self, group: Any) -> GroupState | None:
        state = self.states.get(id(group))
        return state if state is not None and state.group() is group else None

    def attach(self, group: Any, name: str) -> GroupState | None:
        """Hook ``group`` once; None if it is not a process group we can watch."""
        if group is None:
            return None
        state = self.state_of(group)
        if state is not None:
            return state
        try:
            state = GroupState(group, name, False)
        except TypeError:  # not weakly referenceable: not a ProcessGroup
            return None
        key = id(group)
        self.states[key] = state
        weakref.finalize(group, self.states.pop, key, None)
        register = getattr(group, "register_pre_hook", None)
        if register is None:
            return state
        try:
            register(HOOK_ID, self._hook_for(state))
        except Exception:
            self.on_error()
            return state
        state.attached = True
        return state

    def _hook_for(self, state: GroupState) -> Any:
        names = self.names_of_ops
        record = self.record

        def distea_pre_hook(args: Any) -> None:
            try:
                state.ops += 1
                kind = args.name
                value = int(kind)
                op = names.get(value)
                if op is None:
                    op = names[value] = str(getattr(kind, "name", kind))
                record(state, op, args.root)
            except Exception:
                self.on_error()

        return distea_pre_hook

    def detach_all(self) -> None:
        for state in list(self.states.values()):
            group = state.group()
            if group is not None and state.attached:
                try:
                    group.unregister_pre_hook(HOOK_ID)
                except Exception:
                    self.on_error()
        self.states.clear()

    def unseen(self, state: GroupState, recorded_from_python: int) -> int:
        """Operations the group issued that nothing recorded, not yet reported.

        The group's sequence number counts every operation it issued; the hook
        (where attached) or the Python wrappers (where not) counted what was
        recorded. Zero where the group cannot tell its sequence number.
        """
        group = state.group()
        if group is None:
            return 0
        try:
            issued = int(group._get_sequence_number_for_group())
        except Exception:
            return 0
        seen = state.ops if state.attached else recorded_from_python
        missing = max(0, issued - seen) - state.reported
        if missing > 0:
            state.reported += missing
        return max(0, missing)
