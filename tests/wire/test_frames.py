"""Frames and the message encoding, byte for byte."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nsqbox.wire import commands
from nsqbox.wire.errors import NSQError, go_quote
from nsqbox.wire.frames import FrameReader, FrameTooLarge, FrameType, encode_frame
from nsqbox.wire.message import decode_message, encode_message, encode_message_frame
from nsqbox.wire.names import is_valid_name

MSG_ID = b"0123456789abcdef"


def test_importing_wire_does_not_import_trio() -> None:
    code = "import sys, nsqbox.wire, nsqbox.wire.parser, nsqbox.wire.commands, "
    code += "nsqbox.wire.lookupd; print('trio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_encode_frame() -> None:
    assert encode_frame(FrameType.RESPONSE, b"OK") == b"\x00\x00\x00\x06\x00\x00\x00\x00OK"
    assert encode_frame(FrameType.ERROR, b"E_INVALID x") == (
        b"\x00\x00\x00\x0f\x00\x00\x00\x01E_INVALID x"
    )


def test_message_encoding_layout() -> None:
    data = encode_message(0x0102030405060708, 3, MSG_ID, b"body")
    assert data == b"\x01\x02\x03\x04\x05\x06\x07\x08\x00\x03" + MSG_ID + b"body"
    assert decode_message(data) == (0x0102030405060708, 3, MSG_ID, b"body")
    frame = encode_message_frame(0x0102030405060708, 3, MSG_ID, b"body")
    assert frame == b"\x00\x00\x00\x22\x00\x00\x00\x02" + data
    with pytest.raises(ValueError, match="invalid message buffer size"):
        decode_message(data[:25])


def test_frame_reader_one_byte_at_a_time() -> None:
    stream = (
        encode_frame(FrameType.RESPONSE, b"OK")
        + encode_message_frame(1, 1, MSG_ID, b"x" * 300)
        + encode_frame(FrameType.ERROR, b"E_FIN_FAILED y")
    )
    reader = FrameReader()
    frames = []
    for i in range(len(stream)):
        reader.receive_data(stream[i : i + 1])
        frames.extend(reader.frames())
    assert [f[0] for f in frames] == [FrameType.RESPONSE, FrameType.MESSAGE, FrameType.ERROR]
    assert decode_message(frames[1][1]).body == b"x" * 300
    assert reader.buffered == 0


def test_frame_reader_rejects_oversized_frames() -> None:
    reader = FrameReader(max_frame_size=1000)
    reader.receive_data(b"\x00\x01\x00\x00\x00\x00\x00\x02")
    with pytest.raises(FrameTooLarge):
        reader.next_frame()


@pytest.mark.parametrize(
    ("built", "expected"),
    [
        (commands.sub("t", "c"), b"SUB t c\n"),
        (commands.rdy(100), b"RDY 100\n"),
        (commands.fin(MSG_ID), b"FIN " + MSG_ID + b"\n"),
        (commands.req(MSG_ID, 5000), b"REQ " + MSG_ID + b" 5000\n"),
        (commands.touch(MSG_ID), b"TOUCH " + MSG_ID + b"\n"),
        (commands.cls(), b"CLS\n"),
        (commands.nop(), b"NOP\n"),
        (commands.pub("t", b"hi"), b"PUB t\n\x00\x00\x00\x02hi"),
        (commands.dpub("t", 10, b"hi"), b"DPUB t 10\n\x00\x00\x00\x02hi"),
        (commands.auth("s"), b"AUTH\n\x00\x00\x00\x01s"),
        (
            commands.mpub("t", [b"a", b"bc"]),
            b"MPUB t\n\x00\x00\x00\x0f\x00\x00\x00\x02\x00\x00\x00\x01a\x00\x00\x00\x02bc",
        ),
        (commands.identify({"a": 1}), b'IDENTIFY\n\x00\x00\x00\x07{"a":1}'),
    ],
    ids=[
        "sub",
        "rdy",
        "fin",
        "req",
        "touch",
        "cls",
        "nop",
        "pub",
        "dpub",
        "auth",
        "mpub",
        "identify",
    ],
)
def test_client_encoders(built: bytes, expected: bytes) -> None:
    assert built == expected


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("t", True),
        ("a.b-c_D9", True),
        ("x" * 64, True),
        ("x" * 65, False),
        ("", False),
        ("t#ephemeral", True),
        ("x" * 54 + "#ephemeral", True),
        ("t#other", False),
        ("a b", False),
        ("t\n", False),
        ("é", False),
    ],
)
def test_names(name: str, valid: bool) -> None:
    assert is_valid_name(name) is valid


@pytest.mark.parametrize(
    ("raw", "quoted"),
    [
        (b"a*b", '"a*b"'),
        (b'a"\\', '"a\\"\\\\"'),
        (b"\x00\n\t\x7f", '"\\x00\\n\\t\\x7f"'),
        (b"\xff", '"\\xff"'),
        ("é".encode(), '"é"'),
    ],
)
def test_go_quote(raw: bytes, quoted: str) -> None:
    assert go_quote(raw) == quoted


def test_error_round_trip() -> None:
    err = NSQError.from_frame_body(b"E_REQ_FAILED REQ x failed ID not in flight")
    assert (err.code, err.fatal) == ("E_REQ_FAILED", False)
    assert NSQError.from_frame_body(b"E_BAD_TOPIC x").fatal
