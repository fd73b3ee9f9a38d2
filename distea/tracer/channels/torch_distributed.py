"""torch.distributed: collectives and point-to-point, sync and async.

Installed by a post-import hook the moment ``torch.distributed`` finishes
importing (a program without torch pays one dict lookup per import).

Where torch runs process-group hooks (``ProcessGroup.register_pre_hook``),
every operation of every group is recorded from the group's pre-hook
(:mod:`distea.tracer.channels.torch_groups`): Python calls, DDP's C++
reducer, FSDP2, functional collectives and DTensor alike. The public
functions are still wrapped (in both ``torch.distributed`` and
``torch.distributed.distributed_c10d``, so ``P2POp(dist.isend, ...)`` keeps
working) for what only the Python call knows: that the caller will wait for
the result (``async_op=True``) and point-to-point tags. Where a group has no
hooks (an older torch), the wrappers record the collectives themselves and
the group's sequence number tells how many operations they missed.

Collectives (kind ``torch``, ``meta["op"]``, ``meta["role"]``): every rank
calls the collectives of a group in the same order, so each process keeps a
counter per group and names the n-th collective ``"GROUP:n"`` (``GROUP`` is
the group's ``group_name`` where it is hooked, else ``WORLD`` for the
default group, else the group's name, else its ranks). Roles follow the
data: ``all`` (all_reduce, all_gather*, reduce_scatter*, all_to_all*,
barrier: each rank sends and receives), ``root``/``leaf`` for one-to-all
(broadcast*, scatter*: the root sends, the leaves receive) and all-to-one
(reduce, gather*: the leaves send, the root receives). The analyzer puts
every send of a ``GROUP:n`` before every receive of it.

Point-to-point (``send``/``isend``/``recv``/``irecv``/``batch_isend_irecv``,
no role): channel ``"p2p:GROUP:SRC>DST:TAG"`` with global ranks, in order;
issued from C++ (no Python call around it), the tag is taken as 0.

Order: the send is recorded when the operation is issued (the contribution
is handed over). The receive, when the data can be there: at return for a
synchronous Python call, at the first ``Work.wait()`` (or ``is_completed()`` saying yes,
``get_future()``, ``result()``, ``synchronize()``) for ``async_op=True``
and ``i*`` calls; for work issued from C++ (DDP's gradient buckets, which
the reducer waits for in C++) at issue, the earliest the data can arrive,
which only adds order (safe). Where ``Work.wait`` cannot be patched, or
more than ``MAX_PENDING`` handles are never waited for, the receive is
recorded without waiting. Calls that torch makes from inside a wrapped call
(``all_gather_object`` runs ``all_gather``) are not named again: every rank
makes the same nested calls, so counts stay aligned.

Never silent: before a group is destroyed and at exit, each group's
sequence number is compared with what was recorded; operations nobody saw
are recorded as an ``unseen`` collective on ``"GROUP:unseen"`` (every rank
sends and receives: safe order at the point they were found) whose
``meta["unseen"]`` and ``meta["what"]`` the analyzer turns into a problem
line. ``torch.distributed.rpc`` is recorded at its pickler
(:mod:`distea.tracer.channels.torch_rpc`); RPC calls it cannot see are
reported the same way.

The transport's own connections: the TCP connections a process group's
backend opens in C while ``_new_process_group_helper`` builds it (gloo
connects every pair of ranks there) move bytes no channel sees, which the
unseen-traffic detector finds. Where the new group is hooked and can tell
its sequence number (so operations nobody saw would be reported), the
sockets that appeared during its creation are claimed for it
(:func:`~distea.tracer.channels.unseen.claim_transport`), except those of
the group's store (its port: a program may pass its own data through a
store); the detector's reports then name the group, and the analyzer
decides whether they are covered (:mod:`distea.analyzer.unseen`).
"""

from __future__ import annotations

import atexit
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from types import ModuleType
from typing import Any

from distea.tracer.channels.importhooks import IMPORT_HOOKS
from distea.tracer.channels.patching import Patches
from distea.tracer.channels.torch_groups import HOOK_RULES, GroupHooks, GroupState
from distea.tracer.channels.torch_rpc import RpcRecorder
from distea.tracer.channels.unseen import claim_transport, open_socket_inodes
from distea.tracer.session import TracerSession

KIND = "torch"
MODULE = "torch.distributed"
RPC_MODULE = "torch.distributed.rpc"
MAX_PENDING = 4096

ALL, ROOT_SRC, ROOT_DST = "all", "src", "dst"
COLLECTIVES: dict[str, str] = {
    "all_reduce": ALL,
    "all_reduce_coalesced": ALL,
    "all_gather": ALL,
    "all_gather_into_tensor": ALL,
    "_all_gather_base": ALL,
    "all_gather_coalesced": ALL,
    "all_gather_object": ALL,
    "all_gather_single": ALL,
    "all_gather_single_coalesced": ALL,
    "reduce_scatter": ALL,
    "reduce_scatter_tensor": ALL,
    "_reduce_scatter_base": ALL,
    "reduce_scatter_single": ALL,
    "reduce_scatter_single_coalesced": ALL,
    "all_to_all": ALL,
    "all_to_all_single": ALL,
    "barrier": ALL,
    "monitored_barrier": ALL,
    "broadcast": ROOT_SRC,
    "broadcast_object_list": ROOT_SRC,
    "scatter": ROOT_SRC,
    "scatter_object_list": ROOT_SRC,
    "reduce": ROOT_DST,
    "gather": ROOT_DST,
    "gather_object": ROOT_DST,
    "gather_into_tensor": ROOT_DST,
    "gather_single": ROOT_DST,
}
COMPLETION_METHODS: dict[str, bool] = {
    "is_completed": True,
    "synchronize": False,
    "result": False,
    "get_future": False,
    "get_future_result": False,
    "block_current_stream": False,
}
"""Other ways a program can learn that async work completed (besides ``wait``):
the receive is recorded there (for ``is_completed``, once it says yes). The
future is handed out before the data is read from it: recording then is early,
so safe."""
POINT_TO_POINT: dict[str, str] = {"send": "send", "isend": "send", "recv": "recv",
                                  "irecv": "recv"}


class _Call:
    """A wrapped function's arguments by name, defaults filled in."""

    __slots__ = ("defaults", "names")

    def __init__(self, function: Callable[..., Any]) -> None:
        import inspect  # only once torch.distributed is imported: costs ms at start-up

        parameters: Any
        try:
            parameters = inspect.signature(function).parameters
        except (TypeError, ValueError):
            parameters = {}
        self.names = [n for n, p in parameters.items()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.defaults = {n: p.default for n, p in parameters.items()
                         if p.default is not inspect.Parameter.empty}

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        bound = dict(self.defaults)
        bound.update(zip(self.names, args, strict=False))
        bound.update(kwargs)
        return bound


class TorchDistributedChannel:
    def __init__(self) -> None:
        self.patches = Patches()
        self.sequence: defaultdict[str, int] = defaultdict(int)
        """Collectives issued so far, per group (the same order on every rank)."""
        self.p2p_counts: defaultdict[tuple[str, int], int] = defaultdict(int)
        self.pending: OrderedDict[int, tuple[Any, list[tuple[str, str, dict[str, Any]]]]] = (
            OrderedDict())
        """id(work) → (work, receives to record when it is waited for)."""
        self.guard = threading.local()
        self.wait_patched = False
        self._restore_work: list[tuple[type, str, Any]] = []
        """(Work class, method, its raw class attribute or None) to put back."""
        self.session: TracerSession | None = None
        self.dist: Any = None
        self.hooks = GroupHooks(self._record_hooked, self._error)
        self.python_ops: defaultdict[str, int] = defaultdict(int)
        """Operations recorded by the wrappers on groups without hooks, per group."""
        self.atexit_registered = False
        self.rpc: RpcRecorder | None = None
        self.rpc_reported = 0

    def install(self, session: TracerSession) -> None:
        self.session = session
        IMPORT_HOOKS.when_imported(MODULE, self._on_import)
        IMPORT_HOOKS.when_imported(RPC_MODULE, self._on_rpc_import)

    def uninstall(self) -> None:
        IMPORT_HOOKS.forget(MODULE)
        IMPORT_HOOKS.forget(RPC_MODULE)
        if self.atexit_registered:
            atexit.unregister(self.report_unseen)
            self.atexit_registered = False
        self.hooks.detach_all()
        self.patches.restore()
        if self.rpc is not None:
            self.rpc.uninstall()
            self.rpc = None
        while self._restore_work:
            work, name, raw = self._restore_work.pop()
            if raw is not None:
                setattr(work, name, raw)
            else:
                delattr(work, name)
        self.wait_patched = False

    def _on_import(self, module: ModuleType) -> None:
        try:
            self.patch_module(module)
        except Exception:
            if self.session is not None:
                self.session.tracer_error()

    def _on_rpc_import(self, module: ModuleType) -> None:
        if self.session is None or self.session.finished:
            return
        try:
            self.rpc = RpcRecorder(self.session, self._error)
            for owner, name, wrapper in self.rpc.install(module):
                self.patches.replace(owner, name, wrapper)
        except Exception:
            self._error()

    # -- patching -------------------------------------------------------------------

    def patch_module(self, dist: Any) -> None:
        """Wrap the functions of ``dist`` (``torch.distributed`` or a stand-in)."""
        if self.session is None or self.session.finished:
            return
        if not getattr(dist, "is_available", lambda: True)():
            return
        self.dist = dist
        c10d = getattr(dist, "distributed_c10d", None)
        owners = [dist] + ([c10d] if c10d is not None and c10d is not dist else [])
        for name, rule in COLLECTIVES.items():
            self._wrap(owners, name, self._collective_wrapper, rule)
        for name, direction in POINT_TO_POINT.items():
            self._wrap(owners, name, self._p2p_wrapper, direction)
        self._wrap(owners, "batch_isend_irecv", self._batch_wrapper, "")
        if c10d is not None:
            # Every group torch creates is registered here (by module global lookup).
            self._wrap([c10d], "_register_process_group", self._register_wrapper, "")
            self._wrap([c10d], "_new_process_group_helper", self._creation_wrapper, "")
        self._wrap(owners, "destroy_process_group", self._destroy_wrapper, "")
        if not self.atexit_registered:
            atexit.register(self.report_unseen)  # after the session's: runs before it ends
            self.atexit_registered = True
        work = getattr(dist, "Work", None)
        if work is None and c10d is not None:
            work = getattr(c10d, "Work", None)
        if work is not None and hasattr(work, "wait"):
            self.wait_patched = self._patch_work(work, "wait", False)
            if self.wait_patched:
                for name, only_if_done in COMPLETION_METHODS.items():
                    if hasattr(work, name) and not self._patch_work(work, name, only_if_done):
                        self.wait_patched = False  # a way to see completion unseen: record early
                        break

    def _patch_work(self, work: type, name: str, only_if_done: bool) -> bool:
        """Wrap ``Work.<name>``, keeping the raw class attribute for the restore.

        pybind11 stores methods as ``instancemethod`` objects in the class
        dict; ``getattr`` returns the bare function, which put back would no
        longer bind ``self``. So the raw entry is both the no-op write that
        tests whether the class can be patched at all and what is restored.
        """
        raw = vars(work).get(name)
        try:
            if raw is not None:
                setattr(work, name, raw)  # a no-op write: is it allowed?
            setattr(work, name, self._wait_wrapper(getattr(work, name), only_if_done))
        except (AttributeError, TypeError):
            return False
        self._restore_work.append((work, name, raw))
        return True

    def _wrap(self, owners: list[Any], name: str,
              make: Callable[[str, Callable[..., Any], str], Callable[..., Any]],
              how: str) -> None:
        original = getattr(owners[0], name, None)
        if original is None:
            return
        wrapper = make(name, original, how)
        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        wrapper.__name__ = getattr(original, "__name__", name)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        for owner in owners:
            if getattr(owner, name, None) is original:
                self.patches.replace(owner, name, wrapper)

    def _outermost(self, original: Callable[..., Any], args: tuple[Any, ...],
                   kwargs: dict[str, Any], op: str) -> tuple[bool, Any]:
        """Run ``original``; True if this was not nested in another wrapped call.

        While the outermost call runs, the receives that group hooks record
        wait in ``guard.hooked``; the caller settles them when it returns.
        """
        guard = self.guard
        if getattr(guard, "inside", False):
            return False, original(*args, **kwargs)
        guard.inside = True
        guard.hooked = []
        guard.op = op  # names what hooks record inside: the function the program called
        try:
            return True, original(*args, **kwargs)
        except BaseException:
            self._emit_recvs(guard.hooked)  # issued before it failed: order is safe
            raise
        finally:
            guard.inside = False

    def _collective_wrapper(self, op: str, original: Callable[..., Any],
                            rule: str) -> Callable[..., Any]:
        call = _Call(original)

        def collective(*args: Any, **kwargs: Any) -> Any:
            outermost, result = self._outermost(original, args, kwargs, op)
            try:
                bound = call.bind(args, kwargs)
                state = self.hooks.state_of(self._group_object(bound.get("group")))
                if state is not None and state.attached:
                    if outermost:
                        self._settle(bool(bound.get("async_op")), result)
                elif outermost:
                    self._record_collective(op, rule, bound, result)
                else:
                    self.python_ops[self.group_name(bound.get("group"))] += 1
            except Exception:
                self._error()
            return result

        return collective

    def _settle(self, asynchronous: bool, result: Any) -> None:
        """The receives hooks recorded inside a Python call: now, or at its wait()."""
        recvs = self.guard.hooked
        self.guard.hooked = []
        if asynchronous and result is not None:
            self._defer(result, recvs)
        else:
            self._emit_recvs(recvs)

    def _group_object(self, group: Any) -> Any:
        if group is not None:
            return group
        c10d = getattr(self.dist, "distributed_c10d", self.dist)
        member = getattr(c10d, "GroupMember", None)
        return getattr(member, "WORLD", None)

    def _register_wrapper(self, op: str, original: Callable[..., Any],
                          how: str) -> Callable[..., Any]:
        def register_process_group(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            try:
                self.attach_groups()
            except Exception:
                self._error()
            return result

        return register_process_group

    def _creation_wrapper(self, op: str, original: Callable[..., Any],
                          how: str) -> Callable[..., Any]:
        """Around the creation of a process group: claim the connections it opened."""
        call = _Call(original)

        def new_process_group_helper(*args: Any, **kwargs: Any) -> Any:
            before: set[int] | None = None
            try:
                before = set(open_socket_inodes().values())
            except Exception:
                self._error()
            result = original(*args, **kwargs)
            if before is not None:
                try:
                    self._claim_transport(before, call.bind(args, kwargs), result)
                except Exception:
                    self._error()
            return result

        return new_process_group_helper

    def _claim_transport(self, before: set[int], bound: dict[str, Any], result: Any) -> None:
        group = result[0] if isinstance(result, tuple) else result
        state = self.hooks.state_of(group)
        if state is None or not state.attached:
            return  # operations not hooked: its bytes stay a problem
        try:
            int(group._get_sequence_number_for_group())
        except Exception:
            return  # missed operations could not be told: its bytes stay a problem
        new = {fd: inode for fd, inode in open_socket_inodes().items() if inode not in before}
        if new:
            claim_transport(new, lambda: self._name_of(state), _store_ports(bound.get("store")))

    def _destroy_wrapper(self, op: str, original: Callable[..., Any],
                         how: str) -> Callable[..., Any]:
        def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
            self.report_unseen()
            return original(*args, **kwargs)

        return destroy_process_group

    # -- process groups: hooks and what they could not see ----------------------------

    def attach_groups(self) -> None:
        """Hook every process group torch knows that is not hooked yet."""
        c10d = getattr(self.dist, "distributed_c10d", self.dist)
        world = getattr(c10d, "_world", None)
        pg_map = getattr(world, "pg_map", None)
        if not pg_map:
            return
        for group in list(pg_map):
            if self.hooks.state_of(group) is None:
                self.hooks.attach(group, "")

    def _name_of(self, state: GroupState) -> str:
        """A group's name, decided at its first use: when torch registers the
        default group, ``GroupMember.WORLD`` is not set yet."""
        if not state.name:
            group = state.group()
            state.name = self._unhooked_name(group) if group is not None else "gone"
        return state.name

    def report_unseen(self) -> None:
        """Record, per group, the operations that it issued and nothing recorded."""
        session = self.session
        if session is None or session.finished or self.dist is None:
            return
        try:
            while self.pending:  # handles never waited for: their data is surely there now
                _, (_, recvs) = self.pending.popitem(last=False)
                self._emit_recvs(recvs)
            self.attach_groups()
            for state in list(self.hooks.states.values()):
                name = self._name_of(state)
                missing = self.hooks.unseen(state, self.python_ops[name])
                if missing:
                    how = ("no hook ran for them" if state.attached else
                           "this torch runs no process-group hooks; only Python calls "
                           "of torch.distributed were seen (not DDP's reducer, FSDP, "
                           "functional collectives or DTensor)")
                    self._record_unseen(name, missing, f"{missing} operations on process "
                                        f"group {name} were not seen ({how})")
            rpc_missing = self.rpc.unseen_calls - self.rpc_reported if self.rpc else 0
            if rpc_missing > 0:
                self.rpc_reported += rpc_missing
                self._record_unseen("rpc", rpc_missing, f"{rpc_missing} RPC calls of builtin "
                                    "operators or TorchScript functions were not seen")
        except Exception:
            self._error()

    def _record_unseen(self, name: str, count: int, what: str) -> None:
        session = self.session
        if session is None or session.finished:
            return
        meta = {"op": "unseen", "role": "all", "unseen": count, "what": what}
        channel = f"{name}:unseen"
        session.send(KIND, channel, 0, 1, meta)
        session.recv(KIND, channel, 0, 1, meta)

    def _record_hooked(self, state: GroupState, op: str, root: Any) -> None:
        """One operation issued on a hooked group (called from its pre-hook)."""
        session = self.session
        if session is None or session.finished:
            return
        rule = HOOK_RULES.get(op, ALL)
        guard = self.guard
        inside = getattr(guard, "inside", False)
        group = state.group()
        if rule == "send" or rule == "recv":
            if not inside:  # from C++: no tag known; a Python call records its own
                self._record_hooked_p2p(group, rule, int(root))
            return
        name = self._name_of(state)
        seq = self.sequence[name]
        self.sequence[name] = seq + 1
        channel = f"{name}:{seq}"
        meta_op = guard.op if inside else op.lower()
        sends: str | None
        recv_role: str | None
        if rule == ALL or group is None:
            sends, recv_role = "all", "all"
        elif int(root) == group.rank():
            sends, recv_role = ("root", None) if rule == ROOT_SRC else (None, "root")
        else:
            sends, recv_role = (None, "leaf") if rule == ROOT_SRC else ("leaf", None)
        if sends is not None:
            session.send(KIND, channel, 0, 1, {"op": meta_op, "role": sends})
        if recv_role is not None:
            recv = (channel, "", {"op": meta_op, "role": recv_role})
            if inside:
                guard.hooked.append(recv)
            else:
                self._emit_recvs([recv])

    def _record_hooked_p2p(self, group: Any, direction: str, peer: int) -> None:
        session = self.session
        assert session is not None
        me = self._rank()
        if direction == "send":
            channel = self._p2p_channel(group, me, self._global(group, peer), 0)
            index = self._next(channel, 0)
            session.send(KIND, channel, index, index + 1, {"op": "send"})
            return
        src: Any = "*" if peer < 0 else self._global(group, peer)
        self._emit_recvs([(self._p2p_channel(group, src, me, 0), "p2p", {"op": "recv"})])

    def _p2p_wrapper(self, op: str, original: Callable[..., Any],
                     direction: str) -> Callable[..., Any]:
        call = _Call(original)
        asynchronous = op.startswith("i")

        def point_to_point(*args: Any, **kwargs: Any) -> Any:
            outermost, result = self._outermost(original, args, kwargs, op)
            if outermost:
                try:
                    bound = call.bind(args, kwargs)
                    if direction == "recv" and not asynchronous and isinstance(result, int):
                        bound["src"] = result
                    self._record_p2p(op, direction, bound, result if asynchronous else None)
                except Exception:
                    self._error()
            return result

        return point_to_point

    def _batch_wrapper(self, op: str, original: Callable[..., Any],
                       how: str) -> Callable[..., Any]:
        def batch_isend_irecv(p2p_op_list: Any, *args: Any, **kwargs: Any) -> Any:
            outermost, works = self._outermost(original, (p2p_op_list, *args), kwargs, op)
            if outermost:
                try:
                    self._record_batch(p2p_op_list, works)
                except Exception:
                    self._error()
            return works

        return batch_isend_irecv

    def _wait_wrapper(self, original: Callable[..., Any],
                      only_if_done: bool) -> Callable[..., Any]:
        def wait(work: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(work, *args, **kwargs)
            if self.pending and (result or not only_if_done):
                try:
                    entry = self.pending.pop(id(work), None)
                    if entry is not None and entry[0] is work:
                        self._emit_recvs(entry[1])
                except Exception:
                    self._error()
            return result

        wait.__wrapped__ = original  # type: ignore[attr-defined]
        return wait

    # -- recording ------------------------------------------------------------------

    def _error(self) -> None:
        if self.session is not None:
            self.session.tracer_error()

    def group_name(self, group: Any) -> str:
        """The same name for one group in every rank."""
        state = self.hooks.state_of(self._group_object(group))
        if state is not None:
            return self._name_of(state)
        return self._unhooked_name(group)

    def _unhooked_name(self, group: Any) -> str:
        if group is None:
            return "WORLD"
        dist = self.dist
        c10d = getattr(dist, "distributed_c10d", dist)
        member = getattr(c10d, "GroupMember", None)
        if member is not None and group is getattr(member, "WORLD", None):
            return "WORLD"
        try:
            name = getattr(group, "group_name", None)
            if name:
                return str(name)
        except Exception:
            pass
        try:
            return "ranks" + ",".join(str(r) for r in dist.get_process_group_ranks(group))
        except Exception:
            pass
        try:  # a backend used as a group (RPC's start-up): the same name on every rank
            return f"unregistered-{type(group).__name__}-{int(group.size())}"
        except Exception:
            return f"group@{id(group):x}"

    def _rank(self, group: Any = None) -> int:
        if group is None:
            return int(self.dist.get_rank())
        return int(self.dist.get_rank(group))

    def _global(self, group: Any, group_rank: int) -> int:
        if group is None:
            return group_rank
        try:
            return int(self.dist.get_global_rank(group, group_rank))
        except Exception:
            return group_rank

    def _is_root(self, rule: str, bound: dict[str, Any]) -> bool:
        group = bound.get("group")
        root = bound.get(rule)
        if root is not None:
            return int(root) == self._rank()
        group_root = bound.get("group_" + rule)
        if group_root is not None:
            return int(group_root) == self._rank(group)
        return self._rank(group) == 0

    def _record_collective(self, op: str, rule: str, bound: dict[str, Any],
                           result: Any) -> None:
        session = self.session
        if session is None or session.finished:
            return
        name = self.group_name(bound.get("group"))
        self.python_ops[name] += 1
        seq = self.sequence[name]
        self.sequence[name] = seq + 1
        channel = f"{name}:{seq}"
        sends: str | None
        recv_role: str | None
        if rule == ALL:
            sends, recv_role = "all", "all"
        elif self._is_root(rule, bound):
            sends, recv_role = ("root", None) if rule == ROOT_SRC else (None, "root")
        else:
            sends, recv_role = (None, "leaf") if rule == ROOT_SRC else ("leaf", None)
        if sends is not None:
            session.send(KIND, channel, 0, 1, {"op": op, "role": sends})
        if recv_role is not None:
            recv = (channel, "", {"op": op, "role": recv_role})
            if bound.get("async_op") and result is not None:
                self._defer(result, [recv])
            else:
                self._emit_recvs([recv])

    def _p2p_channel(self, group: Any, src: Any, dst: Any, tag: Any) -> str:
        return f"p2p:{self.group_name(group)}:{src}>{dst}:{tag or 0}"

    def _record_p2p(self, op: str, direction: str, bound: dict[str, Any], work: Any) -> None:
        session = self.session
        if session is None or session.finished:
            return
        group = bound.get("group")
        self._count_python(group)
        me = self._rank()
        if direction == "send":
            peer = bound.get("dst")
            if peer is None and bound.get("group_dst") is not None:
                peer = self._global(group, int(bound["group_dst"]))
            channel = self._p2p_channel(group, me, peer, bound.get("tag"))
            index = self._next(channel, 0)
            session.send(KIND, channel, index, index + 1, {"op": op})
            return
        peer = bound.get("src")
        if peer is None and bound.get("group_src") is not None:
            peer = self._global(group, int(bound["group_src"]))
        channel = self._p2p_channel(group, "*" if peer is None else peer, me, bound.get("tag"))
        recv = (channel, "p2p", {"op": op})
        if work is not None:
            self._defer(work, [recv])
        else:
            self._emit_recvs([recv])

    def _record_batch(self, ops: Any, works: Any) -> None:
        session = self.session
        if session is None or session.finished:
            return
        recvs = []
        me = self._rank()
        for p2p in ops:
            function = getattr(p2p, "op", None)
            name = getattr(function, "__name__", "")
            group, tag, peer = getattr(p2p, "group", None), getattr(p2p, "tag", 0), p2p.peer
            self._count_python(group)
            if name == "isend":
                channel = self._p2p_channel(group, me, peer, tag)
                index = self._next(channel, 0)
                session.send(KIND, channel, index, index + 1, {"op": "batch_isend_irecv"})
            else:
                recvs.append((self._p2p_channel(group, peer, me, tag), "p2p",
                              {"op": "batch_isend_irecv"}))
        if not recvs:
            return
        handles = list(works) if isinstance(works, list | tuple) else [works]
        handles = [w for w in handles if w is not None]
        if not handles:
            self._emit_recvs(recvs)
            return
        # Whichever handle is waited for first completes the batch's receives.
        shared: list[tuple[str, str, dict[str, Any]]] = recvs
        for handle in handles:
            self._defer(handle, shared)

    def _count_python(self, group: Any) -> None:
        """One operation recorded by a wrapper: counted where no hook counts it."""
        state = self.hooks.state_of(self._group_object(group))
        if state is None or not state.attached:
            self.python_ops[self.group_name(group)] += 1

    def _next(self, channel: str, slot: int) -> int:
        key = (channel, slot)
        index = self.p2p_counts[key]
        self.p2p_counts[key] = index + 1
        return index

    def _defer(self, work: Any, recvs: list[tuple[str, str, dict[str, Any]]]) -> None:
        """Record ``recvs`` when ``work`` is waited for (now, if that cannot be seen)."""
        if not self.wait_patched:
            self._emit_recvs(recvs)
            return
        self.pending[id(work)] = (work, recvs)
        while len(self.pending) > MAX_PENDING:
            _, (_, oldest) = self.pending.popitem(last=False)
            self._emit_recvs(oldest)

    def _emit_recvs(self, recvs: list[tuple[str, str, dict[str, Any]]]) -> None:
        session = self.session
        if session is None:
            return
        while recvs:  # shared by the handles of one batch: emptied once
            channel, how, meta = recvs.pop(0)
            index = self._next(channel, 1) if how == "p2p" else 0
            session.recv(KIND, channel, index, index + 1, meta)


def _store_ports(store: Any) -> set[int]:
    """Ports of a TCP store under ``store``'s wrappers (``PrefixStore``): not claimed."""
    ports: set[int] = set()
    for _ in range(8):
        if store is None:
            break
        port = getattr(store, "port", None)
        if isinstance(port, int):
            ports.add(port)
        store = getattr(store, "underlying_store", None)
    return ports
