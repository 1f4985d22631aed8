"""Sans-IO fuzzing of ``nsqbox.wire``: the parsers never raise anything but their own
errors, and how the bytes are chunked never changes what comes out."""

from __future__ import annotations

import itertools
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nsqbox.wire import commands
from nsqbox.wire.errors import NSQError, ProtocolViolation
from nsqbox.wire.frames import FrameReader, FrameTooLarge, encode_frame
from nsqbox.wire.lookupd import NEED_DATA as V1_NEED_DATA
from nsqbox.wire.lookupd import ConnectionClosed, LookupdV1Parser, ResponseReader
from nsqbox.wire.parser import NEED_DATA, Body, Command, CommandParser, MPUBBody
from tests.reliability import figures
from tests.reliability.figures import WIRE_EXAMPLES, reliability_settings
from tests.reliability.nsqd_errors import classify
from tests.reliability.strategies import VALID_NAMES, mutated, v1_streams, v2_streams

MAX_MSG = 1024
MAX_BODY = 4096
_INT32 = struct.Struct(">i")

Outcome = tuple[list[Any], str | None, str | None]


def _error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def _splits(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def chunkings(data: bytes, cuts: list[int]) -> list[list[bytes]]:
    """The same bytes whole, one byte at a time, and cut at ``cuts``."""
    return [[data], [data[i : i + 1] for i in range(len(data))], _splits(data, cuts)]


def run_v2(chunks: list[bytes]) -> Outcome:
    """Feed a CommandParser as nsqd's handlers would; events, error, and the EOF error."""
    parser = CommandParser()
    events: list[Any] = []
    try:
        for chunk in chunks:
            parser.receive_data(chunk)
            while (event := parser.next_event()) is not NEED_DATA:
                events.append(event)
                if isinstance(event, Command):
                    if event.name in (b"PUB", b"DPUB"):
                        parser.expect_body(event.name.decode(), MAX_MSG, message=True)
                    elif event.name in (b"IDENTIFY", b"AUTH"):
                        parser.expect_body(event.name.decode(), MAX_BODY, message=False)
                    elif event.name == b"MPUB":
                        parser.expect_mpub(MAX_BODY, MAX_MSG)
    except (NSQError, ProtocolViolation) as exc:
        return events, _error(exc), None
    eof = parser.eof_error()
    return events, None, None if eof is None else eof.frame_body().decode("latin-1")


@reliability_settings(WIRE_EXAMPLES)
@given(data=v2_streams(), cuts=st.lists(st.integers(min_value=0), max_size=6))
def test_v2_parser_errors_and_chunking(data: bytes, cuts: list[int]) -> None:
    figures.add("wire fuzz: V2 parser cases", 1)
    data = data[4:] if data.startswith(commands.MAGIC_V2) else data
    outcomes = [run_v2(chunks) for chunks in chunkings(data, cuts)]
    assert outcomes[1] == outcomes[0]
    assert outcomes[2] == outcomes[0]
    events, error, eof = outcomes[0]
    for event in events:
        assert isinstance(event, Command | Body | MPUBBody)
    if error is not None and error.startswith("NSQError"):
        text = error.removeprefix("NSQError: ")
        assert classify(text.encode("latin-1", "replace")) is not None, text
    if eof is not None:
        assert classify(eof.encode("latin-1")) is not None, eof


_ops = st.one_of(
    st.tuples(
        st.just("PUB"), st.sampled_from(VALID_NAMES), st.binary(min_size=1, max_size=MAX_MSG)
    ),
    st.tuples(
        st.just("DPUB"), st.sampled_from(VALID_NAMES), st.binary(min_size=1, max_size=MAX_MSG)
    ),
    st.tuples(
        st.just("MPUB"),
        st.sampled_from(VALID_NAMES),
        st.lists(st.binary(min_size=1, max_size=200), min_size=1, max_size=10),
    ),
    st.tuples(st.just("IDENTIFY"), st.just(""), st.binary(min_size=1, max_size=200)),
    st.tuples(st.just("SUB"), st.sampled_from(VALID_NAMES), st.sampled_from(VALID_NAMES)),
    st.tuples(st.just("RDY"), st.just(""), st.integers(min_value=0, max_value=2500)),
    st.tuples(st.just("NOP"), st.just(""), st.none()),
)


def _encode(op: tuple[str, str, Any]) -> tuple[bytes, list[Any]]:
    kind, name, value = op
    if kind == "PUB":
        return commands.pub(name, value), [Command(b"PUB", [b"PUB", name.encode()]), Body(value)]
    if kind == "DPUB":
        line = [b"DPUB", name.encode(), b"10"]
        return commands.dpub(name, 10, value), [Command(b"DPUB", line), Body(value)]
    if kind == "MPUB":
        return commands.mpub(name, value), [
            Command(b"MPUB", [b"MPUB", name.encode()]),
            MPUBBody(value),
        ]
    if kind == "IDENTIFY":
        wire = b"IDENTIFY\n" + _INT32.pack(len(value)) + value
        return wire, [Command(b"IDENTIFY", [b"IDENTIFY"]), Body(value)]
    if kind == "SUB":
        params = [b"SUB", name.encode(), value.encode()]
        return commands.sub(name, value), [Command(b"SUB", params)]
    if kind == "RDY":
        return commands.rdy(value), [Command(b"RDY", [b"RDY", str(value).encode()])]
    return commands.nop(), [Command(b"NOP", [b"NOP"])]


@reliability_settings(WIRE_EXAMPLES)
@given(ops=st.lists(_ops, max_size=12), cuts=st.lists(st.integers(min_value=0), max_size=6))
def test_v2_parser_round_trips_what_the_encoders_write(
    ops: list[tuple[str, str, Any]], cuts: list[int]
) -> None:
    figures.add("wire fuzz: V2 round-trip cases", 1)
    encoded = [_encode(op) for op in ops]
    data = b"".join(wire for wire, _ in encoded)
    expected = [event for _, events in encoded for event in events]
    for chunks in chunkings(data, cuts):
        assert run_v2(chunks) == (expected, None, None)


def run_frames(chunks: list[bytes]) -> tuple[list[tuple[int, bytes]], str | None]:
    reader = FrameReader(max_frame_size=MAX_BODY)
    frames: list[tuple[int, bytes]] = []
    try:
        for chunk in chunks:
            reader.receive_data(chunk)
            while (frame := reader.next_frame()) is not None:
                frames.append(frame)
    except FrameTooLarge as exc:
        return frames, _error(exc)
    return frames, None


_frames = st.lists(
    st.tuples(st.integers(min_value=-1, max_value=3), st.binary(max_size=100)), max_size=8
).map(lambda fs: b"".join(encode_frame(t, d) for t, d in fs))


@reliability_settings(WIRE_EXAMPLES)
@given(data=st.data(), cuts=st.lists(st.integers(min_value=0), max_size=6))
def test_frame_reader_errors_and_chunking(data: st.DataObject, cuts: list[int]) -> None:
    figures.add("wire fuzz: frame reader cases", 1)
    stream = data.draw(_frames.flatmap(lambda raw: mutated(raw)))
    outcomes = [run_frames(chunks) for chunks in chunkings(stream, cuts)]
    assert outcomes[1] == outcomes[0]
    assert outcomes[2] == outcomes[0]


def run_v1(chunks: list[bytes]) -> tuple[list[Any], str | None]:
    parser = LookupdV1Parser()
    events: list[Any] = []
    try:
        for chunk in [*chunks, b""]:
            parser.receive_data(chunk)
            while (event := parser.next_event()) is not V1_NEED_DATA:
                events.append(event)
                if isinstance(event, ConnectionClosed):
                    return events, None
    except (NSQError, ProtocolViolation) as exc:
        return events, _error(exc)
    return events, "no ConnectionClosed after the end of the stream"


@reliability_settings(WIRE_EXAMPLES)
@given(data=v1_streams(), cuts=st.lists(st.integers(min_value=0), max_size=6))
def test_lookupd_v1_parser_errors_and_chunking(data: bytes, cuts: list[int]) -> None:
    figures.add("wire fuzz: lookupd V1 parser cases", 1)
    outcomes = [run_v1(chunks) for chunks in chunkings(data, cuts)]
    assert outcomes[1] == outcomes[0]
    assert outcomes[2] == outcomes[0]
    assert outcomes[0][1] != "no ConnectionClosed after the end of the stream"


def run_responses(chunks: list[bytes]) -> tuple[list[bytes], str | None]:
    reader = ResponseReader(max_size=MAX_BODY)
    replies: list[bytes] = []
    try:
        for chunk in chunks:
            reader.receive_data(chunk)
            while (reply := reader.next_response()) is not V1_NEED_DATA:
                assert isinstance(reply, bytes)
                replies.append(reply)
    except ProtocolViolation as exc:
        return replies, _error(exc)
    return replies, None


_replies = st.lists(st.binary(max_size=100), max_size=8).map(
    lambda rs: b"".join(_INT32.pack(len(r)) + r for r in rs)
)


@reliability_settings(WIRE_EXAMPLES)
@given(data=st.data(), cuts=st.lists(st.integers(min_value=0), max_size=6))
def test_lookupd_response_reader_errors_and_chunking(data: st.DataObject, cuts: list[int]) -> None:
    figures.add("wire fuzz: lookupd response reader cases", 1)
    stream = data.draw(_replies.flatmap(lambda raw: mutated(raw)))
    outcomes = [run_responses(chunks) for chunks in chunkings(stream, cuts)]
    assert outcomes[1] == outcomes[0]
    assert outcomes[2] == outcomes[0]


def test_frame_reader_frames_keeps_good_frames_before_a_bad_one() -> None:
    reader = FrameReader(max_frame_size=MAX_BODY)
    reader.receive_data(encode_frame(1, b"E_INVALID why") + _INT32.pack(0) * 2)
    got: list[tuple[int, bytes]] = []
    try:
        got.extend(reader.frames())
    except FrameTooLarge:
        pass
    assert got == [(1, b"E_INVALID why")]
    with pytest.raises(FrameTooLarge):
        reader.frames()


def test_mpub_bytes_read_are_bounded_by_max_body_size() -> None:
    """A declared body size is only a claim: what is read is held to the limit too."""
    parser = CommandParser()
    parser.receive_data(b"MPUB t\n")
    assert parser.next_event() == Command(b"MPUB", [b"MPUB", b"t"])
    parser.expect_mpub(MAX_BODY, MAX_MSG)
    # claims 100 bytes, then sends 5 messages of 1000 bytes (5024 bytes in all)
    parser.receive_data(_INT32.pack(100) + _INT32.pack(5))
    message = _INT32.pack(1000) + b"m" * 1000
    parser.receive_data(message * 4)
    assert parser.next_event() is NEED_DATA
    parser.receive_data(_INT32.pack(1000))
    with pytest.raises(NSQError, match=r"^E_BAD_BODY MPUB body too big 5024 > 4096$"):
        parser.next_event()


def test_eof_errors_are_nsqds() -> None:
    """A body cut short by the end of the stream gets the error of nsqd's failed read."""
    cases = [
        (b"PUB t\n", b"E_BAD_MESSAGE PUB failed to read message body size"),
        (b"PUB t\n\x00\x00\x00\x05ab", b"E_BAD_MESSAGE PUB failed to read message body"),
        (b"DPUB t 1\n\x00\x00", b"E_BAD_MESSAGE DPUB failed to read message body size"),
        (b"IDENTIFY\n\x00\x00\x00", b"E_BAD_BODY IDENTIFY failed to read body size"),
        (b"AUTH\n\x00\x00\x00\x05ab", b"E_BAD_BODY AUTH failed to read body"),
        (b"MPUB t\n\x00", b"E_BAD_BODY MPUB failed to read body size"),
        (b"MPUB t\n\x00\x00\x00\x10\x00", b"E_BAD_BODY MPUB failed to read message count"),
        (
            b"MPUB t\n\x00\x00\x00\x10\x00\x00\x00\x02\x00\x00\x00\x01a\x00",
            b"E_BAD_MESSAGE MPUB failed to read message(1) body size",
        ),
        (
            b"MPUB t\n\x00\x00\x00\x10\x00\x00\x00\x02\x00\x00\x00\x03a",
            b"E_BAD_MESSAGE MPUB failed to read message body",
        ),
    ]
    for data, expected in cases:
        _, error, eof = run_v2([data])
        assert error is None
        assert eof is not None
        assert eof.encode("latin-1") == expected, data
    assert run_v2([b"PUB t\n\x00\x00\x00\x01a", b"RDY 1"])[2] is None  # a partial line: silence
