"""The V2 command parser, fed one byte at a time: events and errors must not depend on chunking."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from nsqbox.wire import commands
from nsqbox.wire.errors import NSQError, ProtocolViolation
from nsqbox.wire.parser import NEED_DATA, Body, Command, CommandParser, Event, MPUBBody

SIZE = struct.Struct(">i")


def run(
    data: bytes, on_command: Callable[[CommandParser, Command], None], *, chunk: int
) -> list[Event]:
    """Feed ``data`` ``chunk`` bytes at a time; ``on_command`` may ask for a body."""
    parser = CommandParser()
    events: list[Event] = []
    for i in range(0, len(data), chunk):
        parser.receive_data(data[i : i + chunk])
        while (event := parser.next_event()) is not NEED_DATA:
            events.append(event)
            if isinstance(event, Command):
                on_command(parser, event)
    assert parser.buffered == 0
    return events


def nsqd_like(parser: CommandParser, cmd: Command) -> None:
    """Ask for bodies the way nsqd's handlers do (limits: 1 KiB messages, 4 KiB bodies)."""
    if cmd.name in (b"PUB", b"DPUB"):
        parser.expect_body(cmd.name.decode(), 1024, message=True)
    elif cmd.name in (b"IDENTIFY", b"AUTH"):
        parser.expect_body(cmd.name.decode(), 4096, message=False)
    elif cmd.name == b"MPUB":
        parser.expect_mpub(4096, 1024)


STREAM = (
    commands.identify({"client_id": "x"})
    + commands.sub("t", "c")
    + commands.rdy(10)
    + b"FIN 0123456789abcdef\r\n"
    + commands.pub("t", b"hello")
    + commands.mpub("t", [b"a", b"bb", b"ccc"])
    + commands.dpub("t", 100, b"later")
    + commands.auth("s3cret")
    + commands.nop()
    + b"\n"
)

EXPECTED: list[Event] = [
    Command(b"IDENTIFY", [b"IDENTIFY"]),
    Body(b'{"client_id":"x"}'),
    Command(b"SUB", [b"SUB", b"t", b"c"]),
    Command(b"RDY", [b"RDY", b"10"]),
    Command(b"FIN", [b"FIN", b"0123456789abcdef"]),
    Command(b"PUB", [b"PUB", b"t"]),
    Body(b"hello"),
    Command(b"MPUB", [b"MPUB", b"t"]),
    MPUBBody([b"a", b"bb", b"ccc"]),
    Command(b"DPUB", [b"DPUB", b"t", b"100"]),
    Body(b"later"),
    Command(b"AUTH", [b"AUTH"]),
    Body(b"s3cret"),
    Command(b"NOP", [b"NOP"]),
    Command(b"", [b""]),
]


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, len(STREAM)])
def test_stream_in_any_chunking(chunk: int) -> None:
    assert run(STREAM, nsqd_like, chunk=chunk) == EXPECTED


def test_params_split_like_go_bytes_split() -> None:
    # nsqd splits on single spaces: doubled spaces make empty params
    assert run(b"SUB  t c\n", lambda p, c: None, chunk=1) == [
        Command(b"SUB", [b"SUB", b"", b"t", b"c"])
    ]


@pytest.mark.parametrize(
    ("data", "code", "text"),
    [
        pytest.param(
            b"PUB t\n" + SIZE.pack(0),
            "E_BAD_MESSAGE",
            "PUB invalid message body size 0",
            id="pub-zero",
        ),
        pytest.param(
            b"PUB t\n" + SIZE.pack(1025),
            "E_BAD_MESSAGE",
            "PUB message too big 1025 > 1024",
            id="pub-big",
        ),
        pytest.param(
            b"IDENTIFY\n" + SIZE.pack(-1),
            "E_BAD_BODY",
            "IDENTIFY invalid body size -1",
            id="identify-negative",
        ),
        pytest.param(
            b"IDENTIFY\n" + SIZE.pack(4097),
            "E_BAD_BODY",
            "IDENTIFY body too big 4097 > 4096",
            id="identify-big",
        ),
        pytest.param(
            b"MPUB t\n" + SIZE.pack(4097),
            "E_BAD_BODY",
            "MPUB body too big 4097 > 4096",
            id="mpub-big",
        ),
        pytest.param(
            b"MPUB t\n" + SIZE.pack(9) + SIZE.pack(-3),
            "E_BAD_BODY",
            "MPUB invalid message count -3",
            id="mpub-count",
        ),
        pytest.param(
            b"MPUB t\n" + SIZE.pack(9) + SIZE.pack(2) + SIZE.pack(1) + b"x" + SIZE.pack(0),
            "E_BAD_MESSAGE",
            "MPUB invalid message(1) body size 0",
            id="mpub-second",
        ),
    ],
)
def test_body_errors_in_any_chunking(data: bytes, code: str, text: str) -> None:
    for chunk in (1, len(data)):
        with pytest.raises(NSQError) as info:
            run(data, nsqd_like, chunk=chunk)
        assert (info.value.code, info.value.description, info.value.fatal) == (code, text, True)
        assert info.value.frame_body() == f"{code} {text}".encode()


def test_mpub_reads_structure_not_declared_size() -> None:
    # nsqd only range-checks MPUB's size and then reads the messages off the stream; a body
    # shorter than declared leaves the next command intact, as with nsqd.
    mpub = b"MPUB t\n" + SIZE.pack(100) + SIZE.pack(1) + SIZE.pack(1) + b"x"
    assert run(mpub + b"NOP\n", nsqd_like, chunk=1) == [
        Command(b"MPUB", [b"MPUB", b"t"]),
        MPUBBody([b"x"]),
        Command(b"NOP", [b"NOP"]),
    ]


def test_line_longer_than_nsqds_read_buffer() -> None:
    parser = CommandParser()
    parser.receive_data(b"X" * (16 * 1024 - 1))
    assert parser.next_event() is NEED_DATA
    parser.receive_data(b"X")
    with pytest.raises(ProtocolViolation):
        parser.next_event()


def test_take_buffered_hands_over_unparsed_bytes() -> None:
    parser = CommandParser()
    parser.receive_data(b"NOP\n\x16\x03\x01")  # a TLS ClientHello starting after the command
    assert parser.next_event() == Command(b"NOP", [b"NOP"])
    assert parser.take_buffered() == b"\x16\x03\x01"
    assert parser.buffered == 0
