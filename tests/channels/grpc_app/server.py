"""A gRPC server (sync with generic handlers and an interceptor, or grpc.aio with
registered method handlers) that writes its port to a file and stops on Quit."""

import asyncio
import os
import sys
import threading
from concurrent import futures

import grpc
import service


def make_greeting(name):
    return f"hello {name}"


def greet(request, context):
    return make_greeting(request)


def add(total, n):
    return total + n


def tally(request_iterator, context):
    total = 0
    for n in request_iterator:
        total = add(total, int(n))
        yield str(total)


def count_up(n):
    return [str(i) for i in range(n)]


def count(request, context):
    yield from count_up(int(request))


async def greet_async(request, context):
    return make_greeting(request)


async def tally_async(request_iterator, context):
    total = 0
    async for n in request_iterator:
        total = add(total, int(n))
        yield str(total)


async def count_async(request, context):
    for item in count_up(int(request)):
        yield item


class Counting(grpc.ServerInterceptor):
    """An interceptor that only counts calls: it must keep working under distea."""

    calls = 0

    def intercept_service(self, continuation, handler_call_details):
        Counting.calls += 1
        return continuation(handler_call_details)


def handlers(greet_fn, tally_fn, count_fn, quit_fn):
    codec = {"request_deserializer": service.decode, "response_serializer": service.encode}
    return {
        "Greet": grpc.unary_unary_rpc_method_handler(greet_fn, **codec),
        "Tally": grpc.stream_stream_rpc_method_handler(tally_fn, **codec),
        "Count": grpc.unary_stream_rpc_method_handler(count_fn, **codec),
        "Quit": grpc.unary_unary_rpc_method_handler(quit_fn, **codec),
    }


def announce(port, port_file):
    with open(port_file + ".tmp", "w") as out:
        out.write(str(port))
    os.replace(port_file + ".tmp", port_file)


def serve_sync(port_file):
    done = threading.Event()

    def quit_(request, context):
        done.set()
        return f"bye after {Counting.calls} calls"

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), interceptors=[Counting()])
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service.SERVICE,
                                              handlers(greet, tally, count, quit_)),))
    announce(server.add_insecure_port("127.0.0.1:0"), port_file)
    server.start()
    done.wait()
    server.stop(grace=1).wait()


async def serve_aio(port_file):
    done = asyncio.Event()

    async def quit_(request, context):
        done.set()
        return "bye"

    server = grpc.aio.server()
    server.add_registered_method_handlers(
        service.SERVICE, handlers(greet_async, tally_async, count_async, quit_))
    announce(server.add_insecure_port("127.0.0.1:0"), port_file)
    await server.start()
    await done.wait()
    await server.stop(grace=1)


if __name__ == "__main__":
    if sys.argv[1] == "sync":
        serve_sync(sys.argv[2])
    else:
        asyncio.run(serve_aio(sys.argv[2]))
