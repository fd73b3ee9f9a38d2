"""Chat client: joins the room and plays a fixed script against the others.

Each client acts only after it has *received* the message it reacts to, so
the conversation is causally chained across the three processes:
alice says hello -> bob privately tells carol -> carol thanks bob publicly ->
alice leaves -> bob leaves -> carol leaves.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Callable, Iterator

CLIENT_TIMEOUT_S = 10.0


class ChatSession:
    """A connected client: sends protocol lines and waits for expected ones."""

    def __init__(self, port: int, name: str) -> None:
        self.name = name
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT_S)
        self.lines: Iterator[str] = (raw.rstrip("\n") for raw in self.sock.makefile("r"))

    def send(self, line: str) -> None:
        """Send one protocol line and log it."""
        print(f"-> {line}")
        self.sock.sendall(line.encode() + b"\n")

    def wait_for(self, prefix: str) -> str:
        """Log received lines until one starts with `prefix`; return it."""
        for line in self.lines:
            print(f"<- {line}")
            if line.startswith(prefix):
                return line
        raise ConnectionError(f"{self.name}: connection closed while waiting for {prefix!r}")

    def close(self) -> None:
        self.sock.close()


def join_room(session: ChatSession) -> None:
    """Join and wait until the whole room is assembled."""
    session.send(f"JOIN {session.name}")
    session.wait_for("WELCOME")
    session.wait_for("ROOM")


def send_broadcast(session: ChatSession, text: str) -> None:
    """Say something to everybody else in the room."""
    session.send(f"SAY {text}")


def send_private(session: ChatSession, recipient: str, text: str) -> None:
    """Say something to one member only."""
    session.send(f"TELL {recipient} {text}")


def leave_room(session: ChatSession) -> None:
    """Leave and wait for the server's goodbye."""
    session.send("LEAVE")
    session.wait_for("BYE")


def alice_script(session: ChatSession) -> None:
    """Alice opens the conversation and leaves once carol has spoken."""
    send_broadcast(session, "hello everyone")
    session.wait_for("MSG carol")
    leave_room(session)


def bob_script(session: ChatSession) -> None:
    """Bob answers alice's hello with a private word to carol."""
    session.wait_for("MSG alice")
    send_private(session, "carol", "psst, alice is here")
    session.wait_for("LEFT alice")
    leave_room(session)


def carol_script(session: ChatSession) -> None:
    """Carol thanks bob in public and leaves last."""
    session.wait_for("PRIV bob")
    send_broadcast(session, "thanks bob")
    session.wait_for("LEFT bob")
    leave_room(session)


SCRIPTS: dict[str, Callable[[ChatSession], None]] = {
    "alice": alice_script,
    "bob": bob_script,
    "carol": carol_script,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--name", choices=sorted(SCRIPTS), required=True)
    args = parser.parse_args()
    session = ChatSession(args.port, args.name)
    try:
        join_room(session)
        SCRIPTS[args.name](session)
    finally:
        session.close()


if __name__ == "__main__":
    main()
