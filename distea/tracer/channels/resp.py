"""What a Redis client's bytes say about the path of its data (RESP, the Redis protocol).

An untraced server in the middle (docs/semantics.md, "Relays") is ordered
safely by time: a send to it happens before every later receive from it.
Redis says more in its bytes, and this module reads it, from the bytes the
program moves anyway, for the analyzer (:mod:`distea.analyzer.relays`):

- a message carried by value — a list push read by a pop, a stream entry
  read by XREAD, a PUBLISH delivered to a subscriber — pairs the producer's
  send with the consumer's receive by the payload's fingerprint
  (``meta["fps"]``, on the send: the payloads of its message commands; on a
  receive: every bulk string it completed);
- other writes reach only the readers of the same keys: a send names the
  keys its commands write (``meta["w"]``), a receive the keys read by the
  commands whose replies it completed (``meta["r"]``; replies come back in
  command order, so the tracer pairs them per connection, a transaction's
  reads going to its EXEC). ``ANY`` stands for every key (a script, a
  command this table does not know, a reply it cannot place).

It is only paid on connections whose first bytes sent are a RESP array
(``*``): the client side of a Redis connection. The sockets channel decides
that once per connection; every other stream costs one attribute test. A
parser that meets bytes it does not understand stops for good: its records
then carry neither ``w`` nor ``r`` and the analyzer uses the safe rule.

Keys and payloads are fingerprinted as ``(length << 32) | crc32`` like the
other message channels.
"""

from __future__ import annotations

from collections import deque
from zlib import crc32

ANY = -1
"""Every key."""
NEWLINE = b"\r\n"
AGGREGATES = frozenset(b"*~>")  # arrays, sets, pushes: N elements
MAPS = frozenset(b"%|")  # maps and attributes: 2N elements
BULKS = frozenset(b"$!=")  # bulk string, bulk error, verbatim string: length, then bytes
LINES = frozenset(b"+-:_,#(")  # one line each

MESSAGES = {b"LPUSH": 2, b"RPUSH": 2, b"LPUSHX": 2, b"RPUSHX": 2, b"PUBLISH": 2,
            b"SPUBLISH": 2, b"XADD": 2}
"""Commands that carry a message by value: fingerprint their arguments from this index."""
NEUTRAL = frozenset(b"""PING ECHO SELECT AUTH HELLO CLIENT COMMAND TIME MULTI DISCARD
    WATCH UNWATCH QUIT RESET READONLY READWRITE SUBSCRIBE PSUBSCRIBE SSUBSCRIBE UNSUBSCRIBE
    PUNSUBSCRIBE SUNSUBSCRIBE SCRIPT""".split())
"""Commands that neither read nor write keys (SCRIPT LOAD only stores the script text)."""
SUBSCRIBES = frozenset((b"SUBSCRIBE", b"PSUBSCRIBE", b"SSUBSCRIBE"))
SUBSCRIBING = SUBSCRIBES | {b"UNSUBSCRIBE", b"PUNSUBSCRIBE", b"SUNSUBSCRIBE"}
PUSHES = frozenset((b"message", b"pmessage", b"smessage", b"subscribe", b"psubscribe",
                    b"ssubscribe", b"unsubscribe", b"punsubscribe", b"sunsubscribe", b"pong"))
"""First element of a RESP2 array that a subscribed connection gets without asking."""
READ_FIRST = frozenset(b"""GET STRLEN GETRANGE TTL PTTL TYPE HGET HMGET HGETALL HKEYS HVALS
    HLEN HEXISTS HSTRLEN HSCAN HRANDFIELD LRANGE LLEN LINDEX LPOS SMEMBERS SISMEMBER
    SMISMEMBER SCARD SSCAN SRANDMEMBER ZRANGE ZRANGEBYSCORE ZREVRANGE ZREVRANGEBYSCORE ZSCORE
    ZMSCORE ZCARD ZCOUNT ZRANK ZREVRANK ZSCAN XRANGE XREVRANGE XLEN XPENDING XINFO GETBIT
    BITCOUNT PFCOUNT DUMP OBJECT LPOP RPOP""".split())
"""Commands that read the key at argument 1 and write nothing another client sees
(a pop consumes a message it then carries: paired by its payload)."""
READ_ALL = frozenset((b"MGET", b"EXISTS", b"SINTER", b"SUNION", b"SDIFF", b"TOUCH"))
"""Commands whose arguments are all keys, read."""
BLOCKING_POPS = frozenset((b"BRPOP", b"BLPOP", b"BZPOPMIN", b"BZPOPMAX"))
"""Keys from argument 1 to the last-but-one (the timeout), read."""
WRITE_FIRST = frozenset(b"""SET SETEX PSETEX SETNX GETSET GETDEL GETEX APPEND INCR INCRBY
    DECR DECRBY INCRBYFLOAT SETRANGE SETBIT HSET HSETNX HMSET HDEL HINCRBY HINCRBYFLOAT SADD
    SREM SPOP SMOVE ZADD ZREM ZINCRBY ZPOPMIN ZPOPMAX ZREMRANGEBYSCORE ZREMRANGEBYRANK LSET
    LINSERT LREM LTRIM EXPIRE PEXPIRE EXPIREAT PEXPIREAT PERSIST XDEL XTRIM XACK XGROUP
    XCLAIM XAUTOCLAIM PFADD RESTORE""".split())
"""Commands that write (and read: their reply may depend on it) the key at argument 1."""
WRITE_ALL = frozenset((b"DEL", b"UNLINK", b"RENAME", b"RENAMENX", b"RPOPLPUSH", b"LMOVE"))
"""Commands whose key arguments (all, or the first two) are written."""


def _fingerprint(data: bytes) -> int:
    return (len(data) << 32) | crc32(data)


def keys_of(args: list[bytes]) -> tuple[list[int], list[int]]:
    """(keys read, keys written) by one command, as fingerprints; ``[ANY]`` for every key."""
    name = args[0].upper()
    if name in NEUTRAL or name in MESSAGES:
        return [], []
    if name in READ_FIRST:
        return [_fingerprint(args[1])] if len(args) > 1 else [], []
    if name in READ_ALL:
        return [_fingerprint(a) for a in args[1:]], []
    if name in BLOCKING_POPS:
        return [_fingerprint(a) for a in args[1:-1]], []
    if name == b"XREAD" or name == b"XREADGROUP":
        upper = [a.upper() for a in args]
        if b"STREAMS" in upper:
            rest = args[upper.index(b"STREAMS") + 1:]
            return [_fingerprint(a) for a in rest[:len(rest) // 2]], []
        return [ANY], []
    if name in WRITE_FIRST and len(args) > 1:
        key = [_fingerprint(args[1])]
        return key, key
    if name in WRITE_ALL:
        keys = [_fingerprint(a) for a in (args[1:3] if name in (b"RENAME", b"RENAMENX",
                                                                b"RPOPLPUSH", b"LMOVE")
                                          else args[1:])]
        return keys, keys
    if name == b"MSET" or name == b"MSETNX":
        keys = [_fingerprint(a) for a in args[1::2]]
        return keys, keys
    if name == b"EXEC":
        return [], []  # its transaction's reads and writes are added by the connection
    return [ANY], [ANY]  # scripts, FLUSHDB, and what this table does not know


class RespParser:
    """Incremental RESP reader for one direction of one connection.

    ``feed`` returns the top-level elements the bytes completed; an element
    split across reads is kept (``pending``) and parsed again when more
    arrives (cheap: bulk strings are skipped by their length).
    """

    __slots__ = ("broken", "pending")

    def __init__(self) -> None:
        self.pending = b""
        self.broken = False

    def feed(self, data: bytes) -> list[tuple[int, list[bytes]]] | None:
        """(type byte, its bulk strings in order) per completed element; None once broken."""
        if self.broken:
            return None
        buf = self.pending + data if self.pending else data
        out: list[tuple[int, list[bytes]]] = []
        pos, size = 0, len(buf)
        while pos < size:
            strings: list[bytes] = []
            end = _element(buf, pos, strings)
            if end is None:
                break
            if end < 0:
                self.broken = True
                self.pending = b""
                return None
            out.append((buf[pos], strings))
            pos = end
        self.pending = buf[pos:]
        return out


def _element(buf: bytes, pos: int, strings: list[bytes]) -> int | None:
    """Parse one top-level element at ``pos``: its end, None if incomplete, -1 if bad."""
    remaining = 1  # elements still to read, nesting flattened
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
            strings.append(buf[start:stop])
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
    return pos


class RespStream:
    """Both directions of one client connection to a Redis server."""

    __slots__ = ("awaiting", "incoming", "multi", "named", "outgoing", "subscribed")

    def __init__(self) -> None:
        self.named = False
        """Whether a send said ``meta["p"] = "redis"`` already (the first one does)."""
        self.outgoing = RespParser()
        self.incoming = RespParser()
        self.awaiting: deque[list[int]] = deque()
        """Per command sent and not answered yet: the keys its reply reads."""
        self.multi: list[int] | None = None
        """Inside MULTI: the transaction's reads so far (its EXEC's reply carries them)."""
        self.subscribed = False

    def sent(self, data: object, count: int, meta: dict[str, object]) -> None:
        """Add to ``meta`` what the first ``count`` bytes of ``data`` completed."""
        parser = self.outgoing
        try:
            elements = parser.feed(bytes(memoryview(data)[:count]))  # type: ignore[arg-type]
            if elements is None:
                return
            names: list[str] = []
            fps: list[int] = []
            writes: list[int] = []
            for _, args in elements:
                if not args:
                    raise ValueError("a command without a name")
                name = args[0].upper()
                names.append(name.decode("ascii", "replace"))
                first = MESSAGES.get(name)
                if first is not None:
                    fps.extend(_fingerprint(a) for a in args[first:])
                reads, written = keys_of(args)
                writes.extend(written)
                self._expect(name, reads)
            if not self.named:
                meta["p"] = "redis"
                self.named = True
            meta["cmds"] = names
            meta["w"] = writes
            if fps:
                meta["fps"] = fps
        except Exception:  # a buffer list (sendmsg), not RESP after all: stop, safe rule
            parser.broken = True
            meta.pop("cmds", None)
            meta.pop("w", None)

    def _expect(self, name: bytes, reads: list[int]) -> None:
        """Note the reply this command will get, and what that reply reads."""
        if name in SUBSCRIBES:
            self.subscribed = True  # replies no longer follow commands one to one
        if name in SUBSCRIBING or (self.subscribed and name == b"PING"):
            return  # answered by pushes (RESP2 answers PING so once subscribed)
        if name == b"MULTI":
            self.multi = []
        elif self.multi is not None and name not in (b"EXEC", b"DISCARD"):
            self.multi.extend(reads)  # answered QUEUED now, executed at EXEC
            reads = []
        elif name in (b"EXEC", b"DISCARD"):
            reads, self.multi = (self.multi or []) if name == b"EXEC" else [], None
        self.awaiting.append(reads)

    def received(self, data: bytes | None, meta: dict[str, object]) -> None:
        parser = self.incoming
        elements = parser.feed(data) if data is not None else None
        if elements is None:
            parser.broken = True
            return
        fps: list[int] = []
        reads: list[int] = []
        for kind, strings in elements:
            fps.extend(_fingerprint(s) for s in strings)
            if kind == 62 or (self.subscribed and kind == 42 and strings  # '>', '*'
                              and strings[0].lower() in PUSHES):
                continue  # pushed, not a reply: it carries messages (fps) only
            if self.awaiting and not self.outgoing.broken:
                reads.extend(self.awaiting.popleft())
            else:
                reads.append(ANY)  # a reply this parser cannot place: it may read anything
        meta["fps"] = fps
        meta["r"] = reads


def looks_like_resp(data: object) -> bool:
    """Whether the first bytes a client sends are a RESP array of bulk strings."""
    try:
        head = bytes(memoryview(data)[:16])  # type: ignore[arg-type]
    except TypeError:
        return False
    return head[:1] == b"*" and b"\r\n$" in head
