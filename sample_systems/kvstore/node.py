"""A store node: primary or backup, with synchronous primary-backup replication.

The primary numbers every write, applies it, and forwards it to each backup,
answering the client only once every backup has acknowledged, so a promoted
backup holds every acknowledged write. Backups serve reads and apply
replicated writes strictly in sequence order. `promote` turns a backup into
the primary for the remaining backups.
"""

from __future__ import annotations

import argparse
import json
import socket
import socketserver
import threading
from dataclasses import dataclass, field

from sample_systems._launch import announce_ready
from sample_systems.kvstore.protocol import (
    TIMEOUT_S,
    Connection,
    Message,
    read_message,
    send_message,
)

RUN_TIMEOUT_S = 30.0
POLL_S = 0.05  # how often serve_forever checks for shutdown (the default 0.5 s is slow)


@dataclass
class NodeState:
    """One node's data and role; `lock` serialises every operation on it."""

    name: str
    role: str
    replica_ports: list[int]
    seq: int = 0
    store: dict[str, str] = field(default_factory=dict)
    replicas: list[Connection] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopped: threading.Event = field(default_factory=threading.Event)

    def handle_put(self, key: str, value: str) -> Message:
        """A client write: only the primary accepts it, and replicates it first."""
        with self.lock:
            if self.role != "primary":
                return {"ok": False, "error": f"{self.name} is not the primary"}
            self.seq += 1
            self.store[key] = value
            replicate_write(self, self.seq, key, value)
            return {"ok": True, "seq": self.seq}

    def handle_get(self, key: str) -> Message:
        """A read: any node answers from its own copy."""
        with self.lock:
            return {"ok": True, "value": self.store.get(key), "seq": self.seq}

    def apply_replicated(self, seq: int, key: str, value: str) -> Message:
        """A write forwarded by the primary; must be the next one in sequence."""
        with self.lock:
            if seq != self.seq + 1:
                return {"ok": False, "error": f"{self.name} expected seq {self.seq + 1}"}
            self.seq = seq
            self.store[key] = value
            return {"ok": True, "seq": seq}

    def promote_to_primary(self, replica_ports: list[int]) -> Message:
        """Fail over: become the primary for the given backups."""
        with self.lock:
            self.role = "primary"
            self.replica_ports = replica_ports
            self.replicas = []
            return {"ok": True, "seq": self.seq}

    def handle_status(self) -> Message:
        with self.lock:
            return {"ok": True, "role": self.role, "seq": self.seq, "keys": sorted(self.store)}


def replicate_write(state: NodeState, seq: int, key: str, value: str) -> None:
    """Forward one write to every backup and require each to acknowledge it."""
    if not state.replicas:
        state.replicas = [Connection(port) for port in state.replica_ports]
    for replica in state.replicas:
        ack = replica.call({"op": "replicate", "seq": seq, "key": key, "value": value})
        if not ack["ok"]:
            raise RuntimeError(f"replication of seq {seq} failed: {ack['error']}")


def dispatch(state: NodeState, request: Message) -> Message:
    """Route one request to the operation it names."""
    op = request["op"]
    if op == "put":
        return state.handle_put(request["key"], request["value"])
    if op == "get":
        return state.handle_get(request["key"])
    if op == "replicate":
        return state.apply_replicated(request["seq"], request["key"], request["value"])
    if op == "promote":
        return state.promote_to_primary(request["replicas"])
    if op == "status":
        return state.handle_status()
    if op == "stop":
        state.stopped.set()
        return {"ok": True}
    return {"ok": False, "error": f"unknown op {op!r}"}


class NodeHandler(socketserver.StreamRequestHandler):
    """Serves one connection's requests, one at a time, in order."""

    timeout = TIMEOUT_S
    server: NodeServer

    def handle(self) -> None:
        sock: socket.socket = self.connection
        while (request := read_message(self.rfile)) is not None:
            send_message(sock, dispatch(self.server.state, request))
            if request["op"] == "stop":
                return


class NodeServer(socketserver.ThreadingTCPServer):
    """Threaded TCP server for one node; handler threads are joined on close."""

    daemon_threads = False
    block_on_close = True

    def __init__(self, state: NodeState) -> None:
        super().__init__(("127.0.0.1", 0), NodeHandler)
        self.state = state


def serve(state: NodeState) -> None:
    """Serve until a `stop` request arrives, then close replication links."""
    with NodeServer(state) as server:
        announce_ready(server.server_address[1])
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": POLL_S},
            name=f"{state.name}-accept",
        )
        thread.start()
        stopped = state.stopped.wait(RUN_TIMEOUT_S)
        server.shutdown()
        thread.join()
        for replica in state.replicas:
            replica.close()
    if not stopped:
        raise SystemExit(f"{state.name}: never told to stop")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", required=True)
    parser.add_argument("--role", choices=["primary", "backup"], required=True)
    parser.add_argument("--replicas", default="", help="comma-separated backup ports")
    args = parser.parse_args()
    ports = [int(port) for port in args.replicas.split(",") if port]
    state = NodeState(args.name, args.role, ports)
    serve(state)
    store = json.dumps(state.store, sort_keys=True)
    print(f"stopped as {state.role} at seq {state.seq}: {store}")


if __name__ == "__main__":
    main()
