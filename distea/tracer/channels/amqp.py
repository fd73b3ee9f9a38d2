"""What an AMQP 0-9-1 client's bytes say about the path of its messages (RabbitMQ).

The counterpart of :mod:`distea.tracer.channels.resp` for a broker: a body
published with Basic.Publish reaches the consumer whose Basic.Deliver (or
Basic.Get-Ok) carries the same body, so the analyzer pairs them by the
body's fingerprint (``meta["fps"]``) instead of ordering the consumer after
everything every client sent (the relay's safe rule). Methods that change
what other clients see in another shape — declaring, binding, purging or
deleting exchanges and queues — are writes of any key (``meta["w"] =
[-1]``), and a receive that completes a reply of those classes reads any
key (``meta["r"] = [-1]``); everything else (connection and channel
set-up, consume, ack, qos, heartbeats) neither writes nor reads.

Paid only on connections whose first bytes sent are the AMQP 0-9-1 protocol
header. A frame that breaks the framing (size, frame-end octet) stops the
reader for that connection for good: its records then carry no ``w``/``r``,
and the analyzer keeps the safe rule.
"""

from __future__ import annotations

from zlib import crc32

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
ANY = -1
FRAME_END = 0xCE
METHOD, HEADER, BODY = 1, 2, 3
PUBLISH = (60, 40)
CARRYING = frozenset(((60, 60), (60, 71), (60, 50)))  # deliver, get-ok, return
CONFIG_CLASSES = frozenset((40, 50))  # exchange, queue


class _Direction:
    """Frames of one direction of a connection, and the contents being assembled."""

    __slots__ = ("broken", "contents", "header_left", "pending")

    def __init__(self, header_left: int) -> None:
        self.pending = b""
        self.broken = False
        self.header_left = header_left
        """Bytes of the protocol header still to come (the client's first 8)."""
        self.contents: dict[int, list] = {}
        """Channel → [body size or -1 before the header frame, bytes so far] of a content
        announced by a method frame."""

    def feed(self, data: bytes) -> tuple[list[tuple[int, int]], list[int]] | None:
        """((class, method) of completed method frames, fingerprints of completed
        bodies); None once broken."""
        if self.broken:
            return None
        buf = self.pending + data if self.pending else data
        pos = 0
        if self.header_left:
            take = min(self.header_left, len(buf))
            self.header_left -= take
            pos = take
        methods: list[tuple[int, int]] = []
        bodies: list[int] = []
        size = len(buf)
        while size - pos >= 8:
            kind = buf[pos]
            channel = int.from_bytes(buf[pos + 1:pos + 3], "big")
            length = int.from_bytes(buf[pos + 3:pos + 7], "big")
            end = pos + 7 + length
            if end >= size:
                break  # the frame-end octet has not arrived yet
            if buf[end] != FRAME_END or kind not in (METHOD, HEADER, BODY, 8):
                self.broken = True
                self.pending = b""
                return None
            payload = buf[pos + 7:end]
            if kind == METHOD and length >= 4:
                method = (int.from_bytes(payload[0:2], "big"),
                          int.from_bytes(payload[2:4], "big"))
                methods.append(method)
                if method == PUBLISH or method in CARRYING:
                    self.contents[channel] = [-1, b""]
            elif kind == HEADER and channel in self.contents and length >= 12:
                content = self.contents[channel]
                content[0] = int.from_bytes(payload[4:12], "big")
                if content[0] == 0:
                    bodies.append(crc32(b""))
                    del self.contents[channel]
            elif kind == BODY and channel in self.contents:
                content = self.contents[channel]
                content[1] += payload
                if content[0] >= 0 and len(content[1]) >= content[0]:
                    bodies.append((len(content[1]) << 32) | crc32(content[1]))
                    del self.contents[channel]
            pos = end + 1
        self.pending = buf[pos:]
        return methods, bodies


class AmqpStream:
    """Both directions of one client connection to an AMQP 0-9-1 broker."""

    __slots__ = ("incoming", "named", "outgoing")

    def __init__(self) -> None:
        self.outgoing = _Direction(len(PROTOCOL_HEADER))
        self.incoming = _Direction(0)
        self.named = False

    def sent(self, data: object, count: int, meta: dict[str, object]) -> None:
        direction = self.outgoing
        try:
            got = direction.feed(bytes(memoryview(data)[:count]))  # type: ignore[arg-type]
        except Exception:  # a buffer list (sendmsg): stop, safe rule
            direction.broken, got = True, None
        if got is None:
            return
        methods, bodies = got
        if not self.named:
            meta["p"] = "amqp"
            self.named = True
        meta["cmds"] = [f"{c}.{m}" for c, m in methods]
        meta["w"] = [ANY] if any(c in CONFIG_CLASSES for c, _ in methods) else []
        if bodies:
            meta["fps"] = bodies

    def received(self, data: bytes | None, meta: dict[str, object]) -> None:
        direction = self.incoming
        got = direction.feed(data) if data is not None else None
        if got is None:
            direction.broken = True
            return
        methods, bodies = got
        meta["fps"] = bodies
        # a reply that reads broker state (a queue's message count, a binding) reads any key
        meta["r"] = [ANY] if any(c in CONFIG_CLASSES for c, _ in methods) \
            or self.outgoing.broken else []


def looks_like_amqp(data: object) -> bool:
    try:
        return bytes(memoryview(data)[:8]) == PROTOCOL_HEADER  # type: ignore[arg-type]
    except TypeError:
        return False
