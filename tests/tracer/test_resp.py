"""The Redis protocol reader of the tracer, on hand-written RESP bytes.

Expected values are worked out by hand: fingerprints are ``(len << 32) |
crc32``, and a reply reads the keys of the command it answers.
"""

from __future__ import annotations

from zlib import crc32

from distea.tracer.channels.resp import ANY, RespStream, looks_like_resp


def fp(data: bytes) -> int:
    return (len(data) << 32) | crc32(data)


def command(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def test_commands_name_their_writes_and_messages_even_split_across_sends() -> None:
    stream = RespStream()
    data = command(b"LPUSH", b"jobs", b"job-1") + command(b"set", b"k", b"v")
    first: dict[str, object] = {}
    stream.sent(data, 10, first)  # the first 10 bytes complete nothing
    assert first == {"cmds": [], "w": []}
    rest: dict[str, object] = {}
    stream.sent(data[10:], len(data) - 10, rest)
    assert rest == {"cmds": ["LPUSH", "SET"], "w": [fp(b"k")], "fps": [fp(b"job-1")]}


def test_replies_read_the_keys_of_the_commands_they_answer() -> None:
    stream = RespStream()
    stream.sent(command(b"GET", b"a") + command(b"BRPOP", b"q1", b"q2", b"0")
                + command(b"PING"), 10**6, {})
    meta: dict[str, object] = {}
    stream.received(b"$1\r\nx\r\n*2\r\n$2\r\nq1\r\n$3\r\njob\r\n", meta)
    assert meta == {"fps": [fp(b"x"), fp(b"q1"), fp(b"job")],
                    "r": [fp(b"a"), fp(b"q1"), fp(b"q2")]}
    meta = {}
    stream.received(b"+PONG\r\n:1\r\n", meta)  # the second reply answers nothing sent
    assert meta == {"fps": [], "r": [ANY]}


def test_a_transaction_reads_at_exec_and_pushes_answer_nothing() -> None:
    stream = RespStream()
    stream.sent(command(b"MULTI") + command(b"INCR", b"n") + command(b"EXEC"), 10**6, {})
    queued: dict[str, object] = {}
    stream.received(b"+OK\r\n+QUEUED\r\n", queued)
    assert queued["r"] == []
    done: dict[str, object] = {}
    stream.received(b"*1\r\n:5\r\n", done)
    assert done["r"] == [fp(b"n")]
    sub = RespStream()
    sub.sent(command(b"SUBSCRIBE", b"ch"), 10**6, {})
    pushed: dict[str, object] = {}
    sub.received(b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
                 b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n", pushed)
    assert pushed["r"] == [] and fp(b"hello") in pushed["fps"]  # type: ignore[operator]


def test_unknown_commands_and_scripts_may_touch_any_key() -> None:
    stream = RespStream()
    meta: dict[str, object] = {}
    stream.sent(command(b"EVALSHA", b"abc", b"1", b"k"), 10**6, meta)
    assert meta["w"] == [ANY]


def test_bytes_that_are_not_resp_stop_the_reader_for_good() -> None:
    stream = RespStream()
    meta: dict[str, object] = {}
    stream.sent(b"*x\r\n", 4, meta)
    assert meta == {}
    later: dict[str, object] = {}
    stream.sent(command(b"GET", b"a"), 10**6, later)
    assert later == {}  # no w: the analyzer's safe rule
    reply: dict[str, object] = {}
    stream.received(b"$1\r\nx\r\n", reply)
    assert reply["r"] == [ANY]
    assert looks_like_resp(command(b"PING")) and not looks_like_resp(b"GET / HTTP/1.1\r\n")
