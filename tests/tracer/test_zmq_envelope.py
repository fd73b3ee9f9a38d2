"""The routing envelope a DEALER's messages carry (``meta["env"]``), frame by frame."""

from __future__ import annotations

import zmq

from distea.tracer.channels.zmq import MAX_ENVELOPE_FRAMES, _Envelope


def test_frames_up_to_the_delimiter_whatever_their_type() -> None:
    envelope = _Envelope()
    for frame in (b"\x00\x01", zmq.Frame(b"ab"), memoryview(b"cd"), b"", b"body-part"):
        envelope.add(frame)
    assert envelope.take() == "0001.6162.6364"
    envelope.add(b"")  # a bare delimiter: an empty envelope, not none
    assert envelope.take() == ""


def test_no_delimiter_or_too_many_frames_is_no_envelope() -> None:
    envelope = _Envelope()
    envelope.add(b"topic")
    assert envelope.take() is None
    for _ in range(MAX_ENVELOPE_FRAMES + 1):
        envelope.add(b"hop")
    envelope.add(b"")
    assert envelope.take() is None
    envelope.add(b"x" * 100)  # each frame kept to its first 64 bytes
    envelope.add(b"")
    assert envelope.take() == (b"x" * 64).hex()
