"""torch.distributed.rpc: calls, the callee's run, replies, RRef values.

RPC's bytes move in C++ (TensorPipe), but every Python payload passes
through one Python object on both ends: the RPC pickler
(``torch.distributed.rpc.internal._internal_rpc_pickler``). The caller
serializes ``PythonUDF(func, args, kwargs)`` (``rpc_sync``, ``rpc_async``,
``remote``); the callee's agent thread deserializes it, runs the function
(``_run_function``) and serializes the result; the caller deserializes the
reply before its future completes. RRef values (``to_here``) and
exceptions travel the same way. So each ``serialize`` is a send and each
``deserialize`` a receive of kind ``torch``, channel ``"rpc"``, paired by a
fingerprint of the pickled bytes, which both ends see unchanged
(``meta["fp"]``), FIFO per sender among equal bytes. The instance's methods
are replaced (instance attributes, removed again at uninstall): the
module-level ``serialize``/``deserialize`` that C++ calls, and the API's
``_default_pickler``, look them up on that instance at every call.

Not seen: calls of builtin operators (``rpc_sync(to, torch.add, ...)``) and
TorchScript functions, serialized in C++. The public ``rpc_sync``,
``rpc_async`` and ``remote`` are wrapped to count calls that serialized no
Python payload; the channel reports them as unseen. A pickler installed
with ``_use_rpc_pickler`` is not seen either (it replaces the instance).
Equal payloads (same function, same non-tensor arguments: tensors travel
outside the pickled bytes) from several senders pair uncertainly (safe).
"""

from __future__ import annotations

import threading
import zlib

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from distea.tracer.session import TracerSession

KIND = "torch"
CHANNEL = "rpc"
CALLS = ("rpc_sync", "rpc_async", "remote")


def fingerprint(data: Any) -> int:
    return len(data) << 32 | zlib.crc32(data)


class RpcRecorder:
    """Wraps the RPC pickler of one process; counts what it could not see."""

    def __init__(self, session: TracerSession, on_error: Callable[[], None]) -> None:
        self.session = session
        self.on_error = on_error
        self.pickler: Any = None
        self.local = threading.local()
        self.unseen_calls = 0
        """rpc_sync/rpc_async/remote calls that serialized no Python payload."""

    def install(self, rpc: Any) -> list[tuple[Any, str, Callable[..., Any]]]:
        """Patch the pickler; returns (owner, name, wrapper) for the API calls to wrap."""
        internal = getattr(rpc, "internal", None)
        pickler = getattr(internal, "_internal_rpc_pickler", None)
        if pickler is None:
            return []
        serialize, deserialize = pickler.serialize, pickler.deserialize
        pickler.serialize = self._serialize_wrapper(serialize)
        pickler.deserialize = self._deserialize_wrapper(deserialize)
        self.pickler = pickler
        wrappers = []
        api = getattr(rpc, "api", None)
        for owner in (rpc, api):
            for name in CALLS:
                original = getattr(owner, name, None) if owner is not None else None
                if original is not None:
                    wrappers.append((owner, name, self._call_wrapper(original)))
        return wrappers

    def uninstall(self) -> None:
        pickler, self.pickler = self.pickler, None
        if pickler is not None:
            for name in ("serialize", "deserialize"):
                vars(pickler).pop(name, None)

    def _serialize_wrapper(self, original: Callable[..., Any]) -> Callable[..., Any]:
        session = self.session
        local = self.local

        def serialize(obj: Any) -> Any:
            stamp = session.stamp()
            result = original(obj)
            try:
                local.serialized = True
                if not session.finished:
                    session.send(KIND, CHANNEL, 0, 1, {"op": "rpc", "fp": fingerprint(result[0])},
                                 stamp=stamp)
            except Exception:
                self.on_error()
            return result

        return serialize

    def _deserialize_wrapper(self, original: Callable[..., Any]) -> Callable[..., Any]:
        session = self.session

        def deserialize(binary_data: Any, tensor_table: Any) -> Any:
            try:
                if not session.finished:
                    session.recv(KIND, CHANNEL, 0, 1,
                                 {"op": "rpc", "fp": fingerprint(binary_data)})
            except Exception:
                self.on_error()
            return original(binary_data, tensor_table)

        return deserialize

    def _call_wrapper(self, original: Callable[..., Any]) -> Callable[..., Any]:
        local = self.local

        def call(*args: Any, **kwargs: Any) -> Any:
            outer = getattr(local, "serialized", None)
            local.serialized = False
            try:
                return original(*args, **kwargs)
            finally:
                seen = local.serialized
                if not seen:
                    self.unseen_calls += 1
                local.serialized = seen or bool(outer)

        call.__wrapped__ = original  # type: ignore[attr-defined]
        call.__name__ = getattr(original, "__name__", "call")
        call.__doc__ = getattr(original, "__doc__", None)
        return call
