"""The lookupd V1 codec (nsqbox.wire.lookupd): byte-exact, fed one byte at a time."""

from __future__ import annotations

import struct

import pytest

from nsqbox.wire.errors import NSQError, ProtocolViolation
from nsqbox.wire.lookupd import (
    MAGIC_V1,
    NEED_DATA,
    ConnectionClosed,
    Identify,
    LookupdV1Parser,
    Ping,
    Register,
    ResponseReader,
    Unregister,
    encode_error,
    encode_identify,
    encode_ping,
    encode_register,
    encode_response,
    encode_unregister,
)

IDENTIFY = encode_identify(
    broadcast_address="ip.address", hostname="host", tcp_port=5000, http_port=5555, version="1.3.0"
)


def events_of(data: bytes, *, eof: bool = False, bytewise: bool = True) -> list[object]:
    """Every event the parser yields for ``data`` (fed a byte at a time by default)."""
    parser = LookupdV1Parser()
    out: list[object] = []
    chunks = [data[i : i + 1] for i in range(len(data))] if bytewise else [data]
    if eof:
        chunks.append(b"")
    for chunk in chunks:
        parser.receive_data(chunk)
        while (event := parser.next_event()) is not NEED_DATA:
            out.append(event)
            if isinstance(event, ConnectionClosed):
                return out
    return out


def error_of(data: bytes, *, eof: bool = False) -> str:
    """The reply an nsqd would get for ``data``, as text."""
    with pytest.raises(NSQError) as info:
        events_of(data, eof=eof)
    return encode_error(info.value)[4:].decode()


def test_session_bytewise() -> None:
    data = MAGIC_V1 + b"PING\n" + IDENTIFY + b"REGISTER t c\nUNREGISTER t\r\n"
    assert events_of(data, eof=True) == [
        Ping(),
        Identify("ip.address", "host", 5000, 5555, "1.3.0"),
        Register("t", "c"),
        Unregister("t", ""),
        ConnectionClosed(),
    ]


def test_session_in_one_chunk() -> None:
    data = MAGIC_V1 + IDENTIFY + b"REGISTER a\nREGISTER a b extra\n"
    assert events_of(data, bytewise=False) == [
        Identify("ip.address", "host", 5000, 5555, "1.3.0"),
        Register("a", ""),
        Register("a", "b"),
    ]


def test_partial_line_at_eof_is_dropped() -> None:
    assert events_of(MAGIC_V1 + b"PING\nPIN", eof=True) == [Ping(), ConnectionClosed()]


def test_eof_before_magic() -> None:
    assert events_of(b"  V", eof=True) == [ConnectionClosed()]


def test_identify_with_nulls_and_unknown_keys() -> None:
    body = (
        b'{"broadcast_address":"b","hostname":null,"tcp_port":1,"http_port":2,"version":"v","x":[]}'
    )
    data = MAGIC_V1 + b"IDENTIFY\n" + struct.pack(">I", len(body)) + body
    assert events_of(data) == [Identify("b", "", 1, 2, "v")]


@pytest.mark.parametrize(
    ("data", "eof", "expected"),
    [
        pytest.param(b"  V2", False, "E_BAD_PROTOCOL", id="bad-magic"),
        pytest.param(MAGIC_V1 + b"FOO bar\n", False, "E_INVALID invalid command FOO", id="unknown"),
        pytest.param(MAGIC_V1 + b"\n", False, "E_INVALID invalid command ", id="empty-line"),
        pytest.param(
            MAGIC_V1 + b"REGISTER t\n", False,
            "E_INVALID client must IDENTIFY", id="reg-unidentified",
        ),
        pytest.param(
            MAGIC_V1 + b"UNREGISTER t\n", False,
            "E_INVALID client must IDENTIFY", id="unreg-unidentified",
        ),
        pytest.param(
            MAGIC_V1 + IDENTIFY + IDENTIFY, False,
            "E_INVALID cannot IDENTIFY again", id="identify-twice",
        ),
        pytest.param(
            MAGIC_V1 + IDENTIFY + b"REGISTER\n", False,
            "E_INVALID REGISTER insufficient number of params", id="reg-no-params",
        ),
        pytest.param(
            MAGIC_V1 + IDENTIFY + b"UNREGISTER\n", False,
            "E_INVALID UNREGISTER insufficient number of params", id="unreg-no-params",
        ),
        pytest.param(
            MAGIC_V1 + IDENTIFY + b"REGISTER bad! c\n", False,
            "E_BAD_TOPIC REGISTER topic name 'bad!' is not valid", id="bad-topic",
        ),
        pytest.param(
            MAGIC_V1 + IDENTIFY + b"UNREGISTER  c\n", False,
            "E_BAD_TOPIC UNREGISTER topic name '' is not valid", id="empty-topic",
        ),
        pytest.param(
            MAGIC_V1 + IDENTIFY + b"REGISTER t bad!\n", False,
            "E_BAD_CHANNEL REGISTER channel name 'bad!' is not valid", id="bad-channel",
        ),
        pytest.param(
            MAGIC_V1 + IDENTIFY + b"UNREGISTER t " + b"c" * 65 + b"\n", False,
            "E_BAD_CHANNEL UNREGISTER channel name '" + "c" * 65 + "' is not valid",
            id="long-channel",
        ),
        pytest.param(
            MAGIC_V1 + b"IDENTIFY\n\x00\x00", True,
            "E_BAD_BODY IDENTIFY failed to read body size", id="eof-in-size",
        ),
        pytest.param(
            MAGIC_V1 + b"IDENTIFY\n\x00\x00\x00\x05{}", True,
            "E_BAD_BODY IDENTIFY failed to read body", id="eof-in-body",
        ),
        pytest.param(
            MAGIC_V1 + b"IDENTIFY\n\xff\xff\xff\xff", False,
            "E_BAD_BODY IDENTIFY invalid body size -1", id="negative-size",
        ),
        pytest.param(
            MAGIC_V1 + b"IDENTIFY\n\x00\x00\x00\x03{x}", False,
            "E_BAD_BODY IDENTIFY failed to decode JSON body", id="bad-json",
        ),
        pytest.param(
            MAGIC_V1 + b'IDENTIFY\n\x00\x00\x00\x10{"tcp_port":"1"}', False,
            "E_BAD_BODY IDENTIFY failed to decode JSON body", id="wrong-type",
        ),
        pytest.param(
            MAGIC_V1 + b'IDENTIFY\n\x00\x00\x00\x0e{"tcp_port":1}', False,
            "E_BAD_BODY IDENTIFY missing fields", id="missing-fields",
        ),
    ],
)  # fmt: skip
def test_errors(data: bytes, eof: bool, expected: str) -> None:
    assert error_of(data, eof=eof) == expected


def test_too_long_line_is_a_violation() -> None:
    parser = LookupdV1Parser(max_line_length=8)
    parser.receive_data(MAGIC_V1 + b"PING PING PING")
    with pytest.raises(ProtocolViolation):
        parser.next_event()


def test_error_reply_bytes() -> None:
    assert encode_error(NSQError("E_BAD_PROTOCOL")) == b"\x00\x00\x00\x0eE_BAD_PROTOCOL"
    assert encode_error(NSQError("E_INVALID", "x y")) == b"\x00\x00\x00\x0dE_INVALID x y"


@pytest.mark.parametrize(
    ("encoded", "expected"),
    [
        pytest.param(encode_ping(), b"PING\n", id="ping"),
        pytest.param(encode_register("t"), b"REGISTER t\n", id="register-topic"),
        pytest.param(encode_register("t", "c"), b"REGISTER t c\n", id="register-channel"),
        pytest.param(encode_unregister("t"), b"UNREGISTER t\n", id="unregister-topic"),
        pytest.param(encode_unregister("t", "c"), b"UNREGISTER t c\n", id="unregister-channel"),
        pytest.param(encode_response(b"OK"), b"\x00\x00\x00\x02OK", id="response"),
        pytest.param(
            encode_identify(
                broadcast_address="a", hostname="h", tcp_port=1, http_port=2, version="v"
            ),
            b"IDENTIFY\n\x00\x00\x00\x51"
            b'{"broadcast_address":"a","hostname":"h","http_port":2,"tcp_port":1,"version":"v"}',
            id="identify",
        ),
    ],
)
def test_encoders(encoded: bytes, expected: bytes) -> None:
    assert encoded == expected


def test_response_reader_bytewise() -> None:
    reader = ResponseReader()
    data = encode_response(b"OK") + encode_response(b"") + encode_response(b'{"a":1}')
    out: list[bytes] = []
    for i in range(len(data)):
        reader.receive_data(data[i : i + 1])
        while (resp := reader.next_response()) is not NEED_DATA:
            assert isinstance(resp, bytes)
            out.append(resp)
    assert out == [b"OK", b"", b'{"a":1}']


def test_response_reader_bound() -> None:
    reader = ResponseReader(max_size=3)
    reader.receive_data(encode_response(b"four"))
    with pytest.raises(
        ProtocolViolation, match=r"response body size \(4\) is greater than limit \(3\)"
    ):
        reader.next_response()
