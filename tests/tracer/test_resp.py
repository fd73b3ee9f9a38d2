"""The protocol readers of the tracer (Redis RESP, AMQP 0-9-1), on hand-written bytes.

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
    assert first == {"p": "redis", "cmds": [], "w": []}  # the first send names the protocol
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


# -- AMQP 0-9-1 (RabbitMQ): hand-built frames -----------------------------------

AMQP_HEADER = b"AMQP\x00\x00\x09\x01"


def frame(kind: int, channel: int, payload: bytes) -> bytes:
    return bytes([kind]) + channel.to_bytes(2, "big") + len(payload).to_bytes(4, "big") \
        + payload + b"\xce"


def method(class_id: int, method_id: int, args: bytes = b"") -> bytes:
    return class_id.to_bytes(2, "big") + method_id.to_bytes(2, "big") + args


def content(channel: int, body: bytes, split: int) -> bytes:
    header = (60).to_bytes(2, "big") + b"\x00\x00" + len(body).to_bytes(8, "big") + b"\x00\x00"
    return frame(2, channel, header) + frame(3, channel, body[:split]) \
        + frame(3, channel, body[split:])


def test_amqp_publish_and_deliver_carry_the_body_fingerprint() -> None:
    from distea.tracer.channels.amqp import AmqpStream, looks_like_amqp

    body = b'{"task": "add", "args": [1, 2]}'
    stream = AmqpStream()
    sent = AMQP_HEADER + frame(1, 0, method(10, 11)) + frame(1, 1, method(20, 10)) \
        + frame(1, 1, method(60, 40, b"\x00\x00\x00\x05tasks\x00")) + content(1, body, 7)
    assert looks_like_amqp(sent)
    meta: dict[str, object] = {}
    stream.sent(sent[:30], 30, meta)  # a frame split across sends
    rest: dict[str, object] = {}
    stream.sent(sent[30:], len(sent) - 30, rest)
    assert meta["p"] == "amqp" and "fps" not in meta
    assert rest["fps"] == [fp(body)] and rest["w"] == []
    declare: dict[str, object] = {}
    stream.sent(frame(1, 1, method(50, 10, b"\x00\x00\x05tasks")), 1 << 20, declare)
    assert declare["w"] == [ANY]  # a queue declared: others may see it in another shape
    got: dict[str, object] = {}
    stream.received(frame(1, 1, method(60, 60, b"\x00")) + content(1, body, 3), got)
    assert got == {"fps": [fp(body)], "r": []}
    ok: dict[str, object] = {}
    stream.received(frame(1, 1, method(50, 11, b"\x00")), ok)
    assert ok == {"fps": [], "r": [ANY]}
    bad: dict[str, object] = {}
    stream.received(b"\x01\x00\x01\x00\x00\x00\x01\x00\x00", bad)  # no frame-end octet
    assert bad == {}
