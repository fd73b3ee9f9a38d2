"""Starts the server, calls Greet (unary), Tally (bidirectional streaming) and Count
(server streaming), then Quit; sync or grpc.aio."""

import asyncio
import os
import subprocess
import sys
import time

import grpc
import service


def start_server(mode):
    port_file = f"port-{os.getpid()}"
    server = subprocess.Popen([sys.executable, "server.py", mode, port_file])
    while not os.path.exists(port_file):
        time.sleep(0.02)
    with open(port_file) as port:
        target = f"127.0.0.1:{port.read()}"
    os.remove(port_file)
    return server, target


class Tagging(grpc.UnaryUnaryClientInterceptor):
    """A client interceptor that counts unary calls: it must keep working under distea."""

    calls = 0

    def intercept_unary_unary(self, continuation, client_call_details, request):
        Tagging.calls += 1
        return continuation(client_call_details, request)


def stubs(channel):
    """Multicallables made the way generated stubs make them."""
    codec = {"request_serializer": service.encode, "response_deserializer": service.decode,
             "_registered_method": True}
    return (channel.unary_unary(service.path("Greet"), **codec),
            channel.stream_stream(service.path("Tally"), **codec),
            channel.unary_stream(service.path("Count"), **codec),
            channel.unary_unary(service.path("Quit"), **codec))


def numbers():
    yield from ("1", "2", "3")


def greet_twice(greet):
    for name in ("ada", "bob"):
        print(greet(name))


def tally(tally_call):
    print(list(tally_call(numbers())))


def count(count_call):
    print(list(count_call("3")))


def run_sync(target):
    with grpc.insecure_channel(target) as plain:
        channel = grpc.intercept_channel(plain, Tagging())
        greet, tally_call, count_call, quit_ = stubs(channel)
        greet_twice(greet)
        tally(tally_call)
        count(count_call)
        print(quit_("now"), "after", Tagging.calls, "unary calls")


async def greet_twice_async(greet):
    for name in ("ada", "bob"):
        print(await greet(name))


async def numbers_async():
    for n in ("1", "2", "3"):
        yield n


async def tally_async(tally_call):
    print([total async for total in tally_call(numbers_async())])


async def count_async(count_call):
    print([item async for item in count_call("3")])


async def run_aio(target):
    async with grpc.aio.insecure_channel(target) as channel:
        greet, tally_call, count_call, quit_ = stubs(channel)
        await greet_twice_async(greet)
        await tally_async(tally_call)
        await count_async(count_call)
        print(await quit_("now"))


def main(mode):
    server, target = start_server(mode)
    if mode == "sync":
        run_sync(target)
    else:
        asyncio.run(run_aio(target))
    print("server exit", server.wait(timeout=30))


if __name__ == "__main__":
    main(sys.argv[1])
