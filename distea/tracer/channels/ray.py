"""Ray: task and actor submissions, their execution, and ``ray.get`` of their results.

Ray moves arguments and results in its C++ core worker (through raylet and
the object store), so no byte of it is seen. Every task has an id that
both ends can read, and that is what names the channel: ``ObjectRef.
task_id()`` in the submitter (for an actor's creation, the creation task id
of its ``ActorID``), the runtime context's task id in the worker.

Records (kind ``ray``):

- submission (``RemoteFunction._remote``, ``ActorClass._remote``,
  ``ActorMethod._remote``; ``.remote()`` and ``.options(...).remote()``
  go through them): a send on ``"TASK>"``, its clock taken before the
  submission; ``meta["deps"]`` lists the task ids of top-level
  ``ObjectRef`` arguments, whose values the worker is handed;
- execution, in the worker (the functions that
  ``FunctionActorManager.get_execution_info`` hands to the core worker are
  wrapped): a receive on ``"TASK>"`` before the function runs, a send on
  ``"TASK<"`` when it has returned or raised (for a coroutine, when it has
  finished), and then a flush: a worker runs Python only inside tasks, and
  Ray may kill it as soon as the result is stored;
- ``ray.get`` and ``ray.wait``: a receive on ``"TASK<"`` for every ref
  whose value (or readiness) was returned.

Pairing is in :mod:`distea.analyzer.match_rpc`. Not seen, and reported as
a problem in the process where it may happen: ``await ref`` and
``ref.future()`` (ObjectRef is a C extension type), streaming generator
tasks' items, Ray Client (``ray://``) refs, and a Ray whose hook points are
not as described here (an unknown version).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import threading
from types import ModuleType
from typing import Any

from distea.tracer.channels.importhooks import IMPORT_HOOKS
from distea.tracer.channels.patching import Patches
from distea.tracer.session import TracerSession

KIND = "ray"
MODULE = "ray"
ASYNC_NOTE = ("Ray: a ref submitted from a running event loop may be awaited "
              "(`await ref`, `ref.future()`): such receives are not recorded")
GENERATOR_NOTE = ("Ray: items of a streaming generator task are not recorded as they "
                  "are produced")


class RayChannel:
    def __init__(self) -> None:
        self.patches = Patches()
        self.session: TracerSession | None = None
        self.local = threading.local()
        """``submitting``: inside a wrapped submission (Ray calls ``_remote`` again
        from ``_remote``: only the outermost one is recorded)."""
        self.object_ref: Any = None
        self.task_id_class: Any = None
        self.ray: Any = None

    def install(self, session: TracerSession) -> None:
        self.session = session
        IMPORT_HOOKS.when_imported(MODULE, self._on_import)

    def uninstall(self) -> None:
        IMPORT_HOOKS.forget(MODULE)
        self.patches.restore()

    def note(self, text: str) -> None:
        session = self.session
        if session is not None:
            session.say_unseen(text)

    def _on_import(self, ray: ModuleType) -> None:
        if self.session is None:
            return
        try:
            raylet = importlib.import_module("ray._raylet")
            remote_function = importlib.import_module("ray.remote_function")
            actor = importlib.import_module("ray.actor")
            manager = importlib.import_module("ray._private.function_manager")
            self.object_ref = raylet.ObjectRef
            self.task_id_class = raylet.TaskID
            self.ray = ray
            hooks = [(remote_function.RemoteFunction, "_remote", self._submitter(self._ref_ids)),
                     (actor.ActorMethod, "_remote", self._submitter(self._ref_ids)),
                     (actor.ActorClass, "_remote", self._submitter(self._creation_ids)),
                     (manager.FunctionActorManager, "get_execution_info", None),
                     (ray, "get", None), (ray, "wait", None)]
            originals = [getattr(owner, name) for owner, name, _ in hooks]  # all or none
        except Exception:
            version = getattr(ray, "__version__", "of unknown version")
            self.note(f"Ray {version}: its task submission and execution are not as distea "
                      "knows them; Ray tasks are not recorded")
            return
        for (owner, name, wrap), original in zip(hooks, originals, strict=True):
            if name == "_remote":
                self.patches.replace(owner, name, wrap(original))
            elif name == "get_execution_info":
                self.patches.replace(owner, name, self._execution_info(original))
            elif name == "get":
                self.patches.replace(owner, name, self._getter(original))
            else:
                self.patches.replace(owner, name, self._waiter(original))

    # -- the submitting side ----------------------------------------------------

    def _ref_ids(self, result: Any) -> list[str]:
        """Task ids of what ``.remote()`` returned: one ref, or a list of refs."""
        refs = result if isinstance(result, list | tuple) else [result]
        ids = []
        for ref in refs:
            task_id = getattr(ref, "task_id", None)
            if task_id is None:
                self.note(f"Ray: a submission returned a {type(ref).__name__}, not an "
                          "ObjectRef: that task is not recorded")
                continue
            ids.append(task_id().hex())
        return ids

    def _creation_ids(self, handle: Any) -> list[str]:
        return [self.task_id_class.for_actor_creation_task(handle._actor_id).hex()]

    def _submitter(self, ids_of: Any) -> Any:
        channel = self

        def wrap(original: Any) -> Any:
            def _remote(*args: Any, **kwargs: Any) -> Any:
                local = channel.local
                session = channel.session
                if getattr(local, "submitting", False) or session is None:
                    return original(*args, **kwargs)
                stamp = None
                try:
                    stamp = session.stamp()
                except Exception:
                    session.tracer_error()
                local.submitting = True
                try:
                    result = original(*args, **kwargs)
                finally:
                    local.submitting = False
                if stamp is not None:
                    try:
                        channel._record_submission(session, ids_of(result), args, kwargs,
                                                   stamp)
                    except Exception:
                        session.tracer_error()
                return result

            _remote.__wrapped__ = original  # type: ignore[attr-defined]
            return _remote

        return wrap

    def _record_submission(self, session: TracerSession, ids: list[str], args: tuple[Any, ...],
                           kwargs: dict[str, Any], stamp: tuple[int, int]) -> None:
        if asyncio._get_running_loop() is not None:
            self.note(ASYNC_NOTE)
        call_args = kwargs.get("args") if "args" in kwargs else (args[1] if len(args) > 1
                                                                  else None)
        call_kwargs = kwargs.get("kwargs") if "kwargs" in kwargs else (args[2] if len(args) > 2
                                                                        else None)
        object_ref = self.object_ref
        deps = [a.task_id().hex() for a in (*(call_args or ()), *(call_kwargs or {}).values())
                if isinstance(a, object_ref)]
        meta: dict[str, Any] | None = {"deps": deps} if deps else None
        for task_id in ids:
            session.send(KIND, f"{task_id}>", 0, 1, meta, stamp)

    # -- the executing side -------------------------------------------------------

    def _execution_info(self, original: Any) -> Any:
        channel = self
        wrapped: dict[int, tuple[Any, Any]] = {}
        """id(the manager's info) → (that info, its traced copy): wrapped once each."""

        def get_execution_info(*args: Any, **kwargs: Any) -> Any:
            info = original(*args, **kwargs)
            try:
                known = wrapped.get(id(info))
                if known is not None and known[0] is info:
                    return known[1]
                traced = info._replace(function=channel._executor(info.function))
                wrapped[id(info)] = (info, traced)
                return traced
            except Exception:
                if channel.session is not None:
                    channel.session.tracer_error()
                return info

        get_execution_info.__wrapped__ = original  # type: ignore[attr-defined]
        return get_execution_info

    def _executor(self, function: Any) -> Any:
        channel = self
        session = self.session
        assert session is not None
        context = self.ray.get_runtime_context

        def execute(*args: Any, **kwargs: Any) -> Any:
            task_id = None
            try:
                task_id = context().get_task_id()
                if task_id is not None:
                    session.recv(KIND, f"{task_id}>", 0, 1)
            except Exception:
                session.tracer_error()
            try:
                result = function(*args, **kwargs)
            except BaseException:
                channel._returned(task_id)
                raise
            if task_id is not None:
                if inspect.iscoroutine(result):
                    return channel._finish_later(result, task_id)
                if inspect.isgenerator(result) or inspect.isasyncgen(result):
                    channel.note(GENERATOR_NOTE)
            channel._returned(task_id)
            return result

        execute.__wrapped__ = function  # type: ignore[attr-defined]
        # Ray reads attributes it set on its executors (``name``, ``method``: is the
        # actor method a coroutine function?); they must be found on ours too
        execute.__dict__.update(getattr(function, "__dict__", {}))
        return execute

    async def _finish_later(self, coroutine: Any, task_id: str) -> Any:
        """An async actor's method: it has returned when its coroutine has finished."""
        try:
            return await coroutine
        finally:
            self._returned(task_id)

    def _returned(self, task_id: str | None) -> None:
        """The task's result is final: record the send of it, and flush now."""
        session = self.session
        if task_id is None or session is None:
            return
        try:
            session.send(KIND, f"{task_id}<", 0, 1)
            session.flush_idle()
        except Exception:
            session.tracer_error()

    # -- results ------------------------------------------------------------------

    def _received(self, refs: Any) -> None:
        session = self.session
        if session is None:
            return
        try:
            object_ref = self.object_ref
            if isinstance(refs, object_ref):
                refs = (refs,)
            elif not isinstance(refs, list | tuple):
                return
            recv = session.recv
            for ref in refs:
                if isinstance(ref, object_ref):
                    recv(KIND, f"{ref.task_id().hex()}<", 0, 1)
        except Exception:
            session.tracer_error()

    def _getter(self, original: Any) -> Any:
        channel = self

        def get(object_refs: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                values = original(object_refs, *args, **kwargs)
            except channel.ray.exceptions.RayTaskError:
                channel._received_if_ready(object_refs)  # the error is the task's result
                raise
            channel._received(object_refs)
            return values

        get.__wrapped__ = original  # type: ignore[attr-defined]
        return get

    def _received_if_ready(self, refs: Any) -> None:
        try:
            if isinstance(refs, list | tuple) and len(refs) > 1:
                refs = self.ray.wait.__wrapped__(list(refs), num_returns=len(refs),
                                                 timeout=0)[0]
        except Exception:
            if self.session is not None:
                self.session.tracer_error()
            return
        self._received(refs)

    def _waiter(self, original: Any) -> Any:
        channel = self

        def wait(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            try:
                channel._received(result[0])
            except Exception:
                if channel.session is not None:
                    channel.session.tracer_error()
            return result

        wait.__wrapped__ = original  # type: ignore[attr-defined]
        return wait
