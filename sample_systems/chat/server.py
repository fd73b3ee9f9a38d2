"""Chat server: one thread per client, a line-based protocol, one shared room.

Protocol (client -> server): ``JOIN name``, ``SAY text``, ``TELL name text``,
``LEAVE``. Server -> client: ``WELCOME name``, ``ROOM a,b,c`` (once everybody
expected has joined), ``MSG from text``, ``PRIV from text``, ``LEFT name``,
``BYE``.

Every delivery happens under the room lock, so deliveries form one total order
that respects causality: a client that reacts to a message can never have its
reaction overtake that message at a third client. That is what makes the
clients' transcripts deterministic.
"""

from __future__ import annotations

import argparse
import socket
import socketserver
import threading
from dataclasses import dataclass, field

from sample_systems._launch import announce_ready

CLIENT_TIMEOUT_S = 10.0
ROOM_TIMEOUT_S = 20.0
POLL_S = 0.05  # how often serve_forever checks for shutdown (the default 0.5 s is slow)


@dataclass
class ChatRoom:
    """Members by name, their sockets, and counters for the final summary."""

    expected: int
    members: dict[str, socket.socket] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: threading.Event = field(default_factory=threading.Event)
    joined: int = 0
    broadcasts: int = 0
    privates: int = 0

    def join(self, name: str, conn: socket.socket) -> None:
        """Register a member; announce the roster once everybody expected is in."""
        with self.lock:
            self.members[name] = conn
            self.joined += 1
            deliver(conn, f"WELCOME {name}")
            if self.joined == self.expected:
                roster = ",".join(sorted(self.members))
                for member in sorted(self.members):
                    deliver(self.members[member], f"ROOM {roster}")

    def broadcast_message(self, sender: str, text: str) -> None:
        """Relay `text` to every member except its sender."""
        with self.lock:
            self.broadcasts += 1
            for name in sorted(self.members):
                if name != sender:
                    deliver(self.members[name], f"MSG {sender} {text}")

    def send_private(self, sender: str, recipient: str, text: str) -> None:
        """Relay `text` to one member only."""
        with self.lock:
            self.privates += 1
            deliver(self.members[recipient], f"PRIV {sender} {text}")

    def leave(self, name: str) -> None:
        """Drop a member, tell the others, and close the room when it empties."""
        with self.lock:
            conn = self.members.pop(name)
            deliver(conn, "BYE")
            for member in sorted(self.members):
                deliver(self.members[member], f"LEFT {name}")
            if not self.members and self.joined == self.expected:
                self.closed.set()


def deliver(conn: socket.socket, line: str) -> None:
    """Send one protocol line."""
    conn.sendall(line.encode() + b"\n")


class ChatHandler(socketserver.StreamRequestHandler):
    """Reads one client's lines and turns them into room operations."""

    timeout = CLIENT_TIMEOUT_S
    server: ChatServer

    def handle(self) -> None:
        name = ""
        for raw in self.rfile:
            command, _, rest = raw.decode().rstrip("\n").partition(" ")
            if command == "JOIN":
                name = rest
                self.server.room.join(name, self.connection)
            elif command == "SAY":
                self.server.room.broadcast_message(name, rest)
            elif command == "TELL":
                recipient, _, text = rest.partition(" ")
                self.server.room.send_private(name, recipient, text)
            elif command == "LEAVE":
                self.server.room.leave(name)
                return


class ChatServer(socketserver.ThreadingTCPServer):
    """A threading TCP server that owns the room; handler threads are joined on close."""

    daemon_threads = False
    block_on_close = True

    def __init__(self, room: ChatRoom) -> None:
        super().__init__(("127.0.0.1", 0), ChatHandler)
        self.room = room


def serve(expected_members: int) -> ChatRoom:
    """Serve until every expected member has joined and left again."""
    room = ChatRoom(expected_members)
    with ChatServer(room) as server:
        announce_ready(server.server_address[1])
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": POLL_S}, name="chat-accept"
        )
        thread.start()
        finished = room.closed.wait(ROOM_TIMEOUT_S)
        server.shutdown()
        thread.join()
    if not finished:
        raise SystemExit("chat server: the room never emptied")
    return room


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--members", type=int, default=3)
    args = parser.parse_args()
    room = serve(args.members)
    print(
        f"{room.joined} members joined; relayed {room.broadcasts} broadcast and "
        f"{room.privates} private messages; room closed"
    )


if __name__ == "__main__":
    main()
