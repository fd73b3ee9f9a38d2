"""Fingerprints of the messages a Redis client moves (RESP, the Redis protocol).

An untraced server in the middle (docs/semantics.md, "Relays") is ordered
safely by time: a send to it happens before every later receive from it.
Where the bytes carry a message unchanged through Redis — a list push read
by a blocking pop, a stream entry read by XREAD, a PUBLISH delivered to a
subscriber — the producer's send and the consumer's receive can be paired
exactly by the message itself. This module gives the analyzer what it needs
for that, from the bytes the program already moves:

- per send: the names of the commands it completed (``meta["cmds"]``) and the
  fingerprints of the payloads of its message commands (``meta["fps"]``);
- per receive: the fingerprints of every bulk string it completed
  (``meta["fps"]``).

It is only paid on connections whose first bytes sent are a RESP array
(``*``): the client side of a Redis connection. The sockets channel decides
that once per connection; every other stream costs one attribute test. A
parser that meets bytes it does not understand stops for good (``broken``):
the analyzer then falls back on the safe rule for that connection.

Fingerprints are ``(length << 32) | crc32`` as on the other message channels.
"""

from __future__ import annotations

from zlib import crc32

MESSAGE_COMMANDS = {
    b"LPUSH": 2, b"RPUSH": 2, b"LPUSHX": 2, b"RPUSHX": 2,
    b"PUBLISH": 2, b"SPUBLISH": 2, b"XADD": 2,
}
"""Commands that carry a message to a reader: fingerprint their arguments from this index
on (after the key or channel)."""
NEWLINE = b"\r\n"
AGGREGATES = frozenset(b"*~>")  # arrays, sets, pushes: N elements
MAPS = frozenset(b"%|")  # maps and attributes: 2N elements
BULKS = frozenset(b"$!=")  # bulk string, bulk error, verbatim string: length, then bytes
LINES = frozenset(b"+-:_,#(")  # one line each


class RespParser:
    """Incremental RESP reader for one direction of one connection.

    ``feed`` returns what the bytes completed; an element split across reads
    is kept (``pending``) and finished by a later feed. Only whole top-level
    elements are consumed, so a partial one is parsed again when more
    arrives (cheap: bulk strings are skipped by their length).
    """

    __slots__ = ("broken", "commands", "pending")

    def __init__(self, commands: bool) -> None:
        self.pending = b""
        self.commands = commands
        """True for the client's sends (arrays of bulk strings: commands)."""
        self.broken = False

    def feed(self, data: bytes) -> tuple[list[str], list[int]] | None:
        """(command names, fingerprints) completed by ``data``; None once broken."""
        if self.broken:
            return None
        buf = self.pending + data if self.pending else data
        names: list[str] = []
        fps: list[int] = []
        pos, size = 0, len(buf)
        while pos < size:
            end = self._element(buf, pos, names, fps)
            if end is None:
                break
            if end < 0:
                self.broken = True
                self.pending = b""
                return None
            pos = end
        self.pending = buf[pos:]
        return names, fps

    def _element(self, buf: bytes, pos: int, names: list[str], fps: list[int]) -> int | None:
        """Parse one top-level element at ``pos``: its end, None if incomplete, -1 if bad."""
        top_fps: list[int] = []
        args: list[bytes] | None = [] if self.commands else None
        remaining = 1  # elements still to read at the current nesting, flattened
        size = len(buf)
        while remaining:
            if pos >= size:
                return None
            line_end = buf.find(NEWLINE, pos)
            if line_end < 0:
                return None
            kind = buf[pos]
            remaining -= 1
            if kind in BULKS:
                try:
                    length = int(buf[pos + 1:line_end])
                except ValueError:
                    return -1
                if length < 0:  # a null bulk string
                    pos = line_end + 2
                    continue
                start = line_end + 2
                stop = start + length
                if stop + 2 > size:
                    return None
                if args is not None:
                    args.append(buf[start:stop])
                else:
                    top_fps.append((length << 32) | crc32(buf[start:stop]))
                pos = stop + 2
            elif kind in AGGREGATES or kind in MAPS:
                try:
                    count = int(buf[pos + 1:line_end])
                except ValueError:
                    return -1
                if count > 0:
                    remaining += count * 2 if kind in MAPS else count
                pos = line_end + 2
            elif kind in LINES:
                pos = line_end + 2
            else:
                return -1
        if args:
            name = args[0].upper()
            names.append(name.decode("ascii", "replace"))
            first = MESSAGE_COMMANDS.get(name)
            if first is not None:
                fps.extend((len(a) << 32) | crc32(a) for a in args[first:])
        else:
            fps.extend(top_fps)
        return pos


class RespStream:
    """Both directions of one client connection to a Redis server."""

    __slots__ = ("incoming", "outgoing")

    def __init__(self) -> None:
        self.outgoing = RespParser(commands=True)
        self.incoming = RespParser(commands=False)

    def sent(self, data: object, count: int, meta: dict[str, object]) -> None:
        """Add to ``meta`` what the first ``count`` bytes of ``data`` completed."""
        parser = self.outgoing
        try:
            got = parser.feed(bytes(memoryview(data)[:count]))  # type: ignore[arg-type]
        except Exception:  # a buffer list (sendmsg), a bad buffer: stop, safe rule
            parser.broken, got = True, None
        if got is not None:
            meta["cmds"] = got[0]
            if got[1]:
                meta["fps"] = got[1]

    def received(self, data: bytes | None, meta: dict[str, object]) -> None:
        parser = self.incoming
        if data is None:
            parser.broken = True
            return
        got = parser.feed(data)
        if got is not None:
            meta["fps"] = got[1]


def looks_like_resp(data: object) -> bool:
    """Whether the first bytes a client sends are a RESP array of bulk strings."""
    try:
        head = bytes(memoryview(data)[:16])  # type: ignore[arg-type]
    except TypeError:
        return False
    return head[:1] == b"*" and b"\r\n$" in head
