"""gRPC (grpcio), sync and ``grpc.aio``: every request and response message.

gRPC moves its bytes in its C core, so the socket channel sees none of
them. Each message does pass through Python once on each side: a
serializer where it is sent and a deserializer where it is received
(``None`` for raw ``bytes`` methods, where the bytes themselves pass).
Those are the points wrapped here; the functions themselves are called
unchanged, with the same arguments, and their results, exceptions and the
call (its metadata included) are left as they are:

- client: ``Channel.unary_unary``/``unary_stream``/``stream_unary``/
  ``stream_stream`` of ``grpc._channel`` and ``grpc.aio._channel`` build
  every multicallable (generated stubs, ``grpc.experimental`` simple stubs
  and interceptor chains all go through them); the request serializer and
  response deserializer they are given are wrapped;
- server, sync: ``grpc._server._find_method_handler`` returns the handler
  of every call (generic and registered handlers, after the server's
  interceptors); its ``request_deserializer`` and ``response_serializer``
  are wrapped in a copy of the handler (``RpcMethodHandler`` is a named
  tuple);
- server, ``grpc.aio``: the lookup is in C, so handlers are wrapped as the
  server gets them: ``grpc.aio.server(handlers=...)``,
  ``add_generic_rpc_handlers`` and ``add_registered_method_handlers``.

Records (kind ``grpc``): the request is a send at the client on channel
``"METHOD>"`` (``METHOD`` is the full path, ``/package.Service/Name``)
and a receive on it in the server, just before the handler gets the
message; the response is a send in the server on ``"METHOD<"`` and a
receive at the client. ``meta["fp"]`` is the serialized message's length
and CRC-32: the very bytes both ends hold. ``start`` is the message's
index on that channel at this end. Pairing is in
:mod:`distea.analyzer.match_rpc`.

A send's clock is taken before the user's serializer runs and recorded
after it: the message leaves after that, so the send is never later than
its bytes.

Not seen (reported as a problem where it applies): a grpcio whose hook
points are missing (an unknown version); messages of a server handler
object that is not an ``RpcMethodHandler`` named tuple.
"""

from __future__ import annotations

import itertools
from types import ModuleType
from typing import Any

from distea.tracer.channels.importhooks import IMPORT_HOOKS
from distea.tracer.channels.multiprocessing import fingerprint
from distea.tracer.channels.patching import Patches
from distea.tracer.session import TracerSession

KIND = "grpc"
MODULE = "grpc"
FACTORIES = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")


def method_name(method: Any) -> str:
    return method.decode() if isinstance(method, bytes) else str(method)


class GrpcChannel:
    def __init__(self) -> None:
        self.patches = Patches()
        self.session: TracerSession | None = None
        self.indexes: dict[str, itertools.count[int]] = {}
        """Channel name → the next message index on it at this end."""

    def install(self, session: TracerSession) -> None:
        self.session = session
        IMPORT_HOOKS.when_imported(MODULE, self._on_import)

    def uninstall(self) -> None:
        IMPORT_HOOKS.forget(MODULE)
        self.patches.restore()

    def _on_import(self, grpc: ModuleType) -> None:
        session = self.session
        if session is None:
            return
        missing: list[str] = []
        for module_name, patch in (("grpc._channel", self._patch_client),
                                   ("grpc.aio._channel", self._patch_client),
                                   ("grpc._server", self._patch_sync_server),
                                   ("grpc.aio._server", self._patch_aio_server)):
            try:
                import importlib

                patch(importlib.import_module(module_name))
            except Exception:
                missing.append(module_name)
        if missing:
            version = getattr(grpc, "__version__", "of unknown version")
            session.say_unseen(
                f"grpcio {version}: {', '.join(missing)} not as distea knows it; gRPC "
                "messages through it are not recorded")

    # -- patching ------------------------------------------------------------

    def _patch_client(self, module: ModuleType) -> None:
        channel_class = module.Channel
        originals = [getattr(channel_class, name) for name in FACTORIES]  # all or none
        for name, original in zip(FACTORIES, originals, strict=True):
            self.patches.replace(channel_class, name, self._client_factory(original))

    def _patch_sync_server(self, module: ModuleType) -> None:
        find = module._find_method_handler
        channel = self

        def _find_method_handler(rpc_event: Any, *args: Any, **kwargs: Any) -> Any:
            handler = find(rpc_event, *args, **kwargs)
            if handler is None:
                return handler
            try:
                method = method_name(rpc_event.call_details.method)
            except Exception:
                channel._error()
                return handler
            return channel.traced_handler(method, handler)

        self.patches.replace(module, "_find_method_handler", _find_method_handler)

    def _patch_aio_server(self, module: ModuleType) -> None:
        server_class = module.Server
        init = server_class.__init__
        add_generic = server_class.add_generic_rpc_handlers
        add_registered = server_class.add_registered_method_handlers
        channel = self

        def __init__(self: Any, thread_pool: Any, generic_handlers: Any, *args: Any,
                     **kwargs: Any) -> None:
            init(self, thread_pool, channel.traced_generic_handlers(generic_handlers),
                 *args, **kwargs)

        def add_generic_rpc_handlers(self: Any, generic_rpc_handlers: Any) -> None:
            add_generic(self, channel.traced_generic_handlers(generic_rpc_handlers))

        def add_registered_method_handlers(self: Any, service_name: str,
                                           method_handlers: Any) -> None:
            traced = method_handlers
            try:
                if isinstance(method_handlers, dict):
                    traced = {name: channel.traced_handler(f"/{service_name}/{name}", handler)
                              for name, handler in method_handlers.items()}
            except Exception:
                channel._error()
                traced = method_handlers
            add_registered(self, service_name, traced)

        self.patches.replace(server_class, "__init__", __init__)
        self.patches.replace(server_class, "add_generic_rpc_handlers", add_generic_rpc_handlers)
        self.patches.replace(server_class, "add_registered_method_handlers",
                             add_registered_method_handlers)

    # -- wrappers --------------------------------------------------------------

    def _client_factory(self, original: Any) -> Any:
        channel = self

        def factory(self: Any, method: Any, request_serializer: Any = None,
                    response_deserializer: Any = None, *args: Any, **kwargs: Any) -> Any:
            serializer, deserializer = request_serializer, response_deserializer
            try:
                name = method_name(method)
                serializer = channel.sender(f"{name}>", request_serializer)
                deserializer = channel.receiver(f"{name}<", response_deserializer)
            except Exception:
                channel._error()
            return original(self, method, serializer, deserializer, *args, **kwargs)

        factory.__wrapped__ = original  # type: ignore[attr-defined]
        return factory

    def traced_generic_handlers(self, handlers: Any) -> Any:
        """The same handlers, each answering with traced method handlers.

        Anything that is not a sequence of objects with ``service`` is passed
        as it is, so that grpc reports the program's mistake as before.
        """
        try:
            if handlers is None or not all(callable(getattr(h, "service", None))
                                           for h in handlers):
                return handlers
            return [TracedGenericHandler(self, handler) for handler in handlers]
        except Exception:
            self._error()
            return handlers

    def traced_handler(self, method: str, handler: Any) -> Any:
        """A copy of ``handler`` whose messages are recorded (the handler itself if it
        cannot be copied: then that is reported)."""
        replace = getattr(handler, "_replace", None)
        if replace is None:
            session = self.session
            note = (f"gRPC handler {type(handler).__name__} of {method} is not an "
                    "RpcMethodHandler: its messages are not recorded")
            if session is not None:
                session.say_unseen(note)
            return handler
        try:
            return replace(
                request_deserializer=self.receiver(f"{method}>", handler.request_deserializer),
                response_serializer=self.sender(f"{method}<", handler.response_serializer))
        except Exception:
            self._error()
            return handler

    def sender(self, name: str, serializer: Any) -> Any:
        """``serializer`` (or the identity, for raw bytes) that records a send of the result."""
        session = self.session
        assert session is not None
        index = self.indexes.setdefault(name, itertools.count())
        stamp_of, send = session.stamp, session.send

        def serialize(message: Any) -> Any:
            stamp = None
            try:
                stamp = stamp_of()
            except Exception:
                session.tracer_error()
            data = message if serializer is None else serializer(message)
            if stamp is not None:
                try:
                    n = next(index)
                    send(KIND, name, n, n + 1, {"fp": fingerprint(data)}, stamp)
                except Exception:
                    session.tracer_error()
            return data

        if serializer is not None:
            serialize.__wrapped__ = serializer  # type: ignore[attr-defined]
        return serialize

    def receiver(self, name: str, deserializer: Any) -> Any:
        """``deserializer`` (or the identity) that records a receive of its input."""
        session = self.session
        assert session is not None
        index = self.indexes.setdefault(name, itertools.count())
        recv = session.recv

        def deserialize(data: Any) -> Any:
            message = data if deserializer is None else deserializer(data)
            try:
                n = next(index)
                recv(KIND, name, n, n + 1, {"fp": fingerprint(data)})
            except Exception:
                session.tracer_error()
            return message

        if deserializer is not None:
            deserialize.__wrapped__ = deserializer  # type: ignore[attr-defined]
        return deserialize

    def _error(self) -> None:
        if self.session is not None:
            self.session.tracer_error()


class TracedGenericHandler:
    """A ``grpc.GenericRpcHandler`` whose method handlers record their messages."""

    def __init__(self, channel: GrpcChannel, handler: Any) -> None:
        self._channel = channel
        self._handler = handler

    def service(self, handler_call_details: Any) -> Any:
        handler = self._handler.service(handler_call_details)
        if handler is None:
            return None
        try:
            method = method_name(handler_call_details.method)
        except Exception:
            self._channel._error()
            return handler
        return self._channel.traced_handler(method, handler)
