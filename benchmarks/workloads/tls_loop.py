"""TLS request/response: a client process and a server process, N round trips.

python -m benchmarks.workloads.tls_loop [--n 5000] [--server block|asyncio]
                                        [--client block|asyncio]

The server is a blocking ``ssl.SSLSocket`` (OpenSSL reads and writes the
socket in C; distea records the plaintext at ``SSLSocket.send``/``read``) or
asyncio streams over TLS (``ssl.SSLObject`` over a memory BIO; distea
records the plaintext at ``SSLObject.write``/``read`` and only counts the
ciphertext of the socket under it), and so is the client, so the loop
measures what one TLS message costs at each kind of end. Each request and
reply is one line and passes through a few functions on each side. The
certificate is made at start (trustme) in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.workloads.timing import timed


def encode_request(i: int) -> bytes:
    return f"add {i} {i * 3}\n".encode()


def handle(request: bytes) -> bytes:
    _, a, b = request.split()
    return f"{compute(int(a), int(b))}\n".encode()


def compute(a: int, b: int) -> int:
    return a + b


def server_context(certs: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "cert.pem", certs / "key.pem")
    return context


def client_context(certs: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=certs / "ca.pem")


def serve_blocking(certs: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        print(listener.getsockname()[1], flush=True)
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with server_context(certs).wrap_socket(conn, server_side=True) as tls, \
                tls.makefile("rb") as reader:
            while line := reader.readline():
                tls.sendall(handle(line))


async def serve_asyncio(certs: Path) -> None:
    done = asyncio.Event()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            writer.write(handle(line))
        writer.close()
        done.set()

    server = await asyncio.start_server(connection, "127.0.0.1", 0, ssl=server_context(certs))
    print(server.sockets[0].getsockname()[1], flush=True)
    await done.wait()
    server.close()


def client_blocking(certs: Path, port: int, n: int) -> int:
    total = 0
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with client_context(certs).wrap_socket(sock, server_hostname="localhost") as tls, \
            tls.makefile("rb") as reader, timed():
        for i in range(n):
            tls.sendall(encode_request(i))
            total += int(reader.readline())
    return total


async def client_asyncio(certs: Path, port: int, n: int) -> int:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=client_context(certs), server_hostname="localhost")
    total = 0
    with timed():
        for i in range(n):
            writer.write(encode_request(i))
            total += int(await reader.readline())
    writer.close()
    with contextlib.suppress(ConnectionError, ssl.SSLError):  # no close_notify back
        await writer.wait_closed()
    return total


def make_certificates(folder: Path) -> None:
    import trustme

    authority = trustme.CA()
    issued = authority.issue_cert("localhost", "127.0.0.1")
    issued.private_key_pem.write_to_path(folder / "key.pem")
    issued.cert_chain_pems[0].write_to_path(folder / "cert.pem")
    authority.cert_pem.write_to_path(folder / "ca.pem")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--server", choices=("block", "asyncio"), default="block")
    parser.add_argument("--client", choices=("block", "asyncio"), default="asyncio")
    parser.add_argument("--serve", type=Path, metavar="CERTS")
    args = parser.parse_args()
    if args.serve is not None:
        if args.server == "block":
            serve_blocking(args.serve)
        else:
            asyncio.run(serve_asyncio(args.serve))
        return
    with tempfile.TemporaryDirectory(prefix="tls-loop-") as folder:
        certs = Path(folder)
        make_certificates(certs)
        server = subprocess.Popen([sys.executable, "-m", __spec__.name, "--server", args.server,
                                   "--serve", str(certs)], stdout=subprocess.PIPE, text=True)
        assert server.stdout is not None
        port = int(server.stdout.readline())
        if args.client == "block":
            total = client_blocking(certs, port, args.n)
        else:
            total = asyncio.run(client_asyncio(certs, port, args.n))
        server.wait(timeout=60)
    print(total)


if __name__ == "__main__":
    main()
