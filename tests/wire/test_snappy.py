"""The snappy framing codec: byte-exact chunks, incremental decoding, Go's validation."""

from __future__ import annotations

import random
import struct

import pytest

from nsqbox.wire.snappy import (
    MAX_BLOCK_SIZE,
    STREAM_IDENTIFIER,
    SnappyDecoder,
    SnappyEncoder,
    SnappyError,
)


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def masked_crc(data: bytes) -> int:
    """The framing format's checksum: CRC-32C, rotated and offset ("masked")."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def chunk(kind: int, payload: bytes) -> bytes:
    return bytes([kind]) + len(payload).to_bytes(3, "little") + payload


def uncompressed(data: bytes) -> bytes:
    return chunk(0x01, struct.pack("<I", masked_crc(data)) + data)


def decode_all(wire: bytes, *, step: int = 1, max_bytes: int = 1 << 20) -> bytes:
    """Feed ``wire`` ``step`` bytes at a time, reading after each piece."""
    decoder = SnappyDecoder()
    out = bytearray()
    for i in range(0, len(wire), step):
        decoder.receive_data(wire[i : i + step])
        while data := decoder.read(max_bytes):
            assert len(data) <= max_bytes
            out += data
    return bytes(out)


def test_first_output_starts_with_the_stream_identifier() -> None:
    encoder = SnappyEncoder()
    first = encoder.encode(b"OK")
    assert first.startswith(STREAM_IDENTIFIER)
    second = encoder.encode(b"OK")
    assert not second.startswith(STREAM_IDENTIFIER)
    # small data is sent as an uncompressed chunk with its checksum
    assert second == uncompressed(b"OK")


def test_empty_input_encodes_to_nothing() -> None:
    encoder = SnappyEncoder()
    assert encoder.encode(b"") == b""
    assert encoder.encode(b"x").startswith(STREAM_IDENTIFIER)


def test_checksums_are_masked_crc32c() -> None:
    data = b"hello snappy " * 100
    wire = SnappyEncoder().encode(data)
    body = wire[len(STREAM_IDENTIFIER) :]
    assert body[0] == 0x00  # compressible: a compressed chunk
    length = int.from_bytes(body[1:4], "little")
    assert len(body) == 4 + length
    assert struct.unpack_from("<I", body, 4)[0] == masked_crc(data)


@pytest.mark.parametrize("step", [1, 7, 4096, 1 << 20])
def test_round_trip_fed_in_pieces(step: int) -> None:
    rng = random.Random(step)
    parts = [rng.randbytes(rng.randrange(300)) + b"a" * rng.randrange(70_000) for _ in range(12)]
    encoder = SnappyEncoder()
    wire = b"".join(encoder.encode(p) for p in parts)
    assert decode_all(wire, step=step, max_bytes=rng.randrange(1, 9000)) == b"".join(parts)


def test_large_input_is_split_into_blocks() -> None:
    data = random.Random(0).randbytes(3 * MAX_BLOCK_SIZE + 5)
    wire = SnappyEncoder().encode(data)
    assert decode_all(wire, step=1000) == data


def test_hand_made_stream_with_padding_skippable_and_repeated_identifiers() -> None:
    wire = (
        STREAM_IDENTIFIER
        + uncompressed(b"one ")
        + chunk(0xFE, b"\x00" * 5)  # padding
        + chunk(0x80, b"skip me")  # reserved skippable
        + STREAM_IDENTIFIER  # pynsq starts every write with one
        + uncompressed(b"two")
    )
    assert decode_all(wire) == b"one two"


def test_empty_data_chunks_do_not_read_as_need_more() -> None:
    decoder = SnappyDecoder()
    decoder.receive_data(STREAM_IDENTIFIER + uncompressed(b"") + uncompressed(b"z"))
    assert decoder.read(1) == b"z"


def test_read_honours_max_bytes() -> None:
    wire = SnappyEncoder().encode(b"z" * 50_000)
    decoder = SnappyDecoder()
    decoder.receive_data(wire)
    pieces = []
    while data := decoder.read(1000):
        pieces.append(data)
    assert all(len(p) == 1000 for p in pieces)
    assert b"".join(pieces) == b"z" * 50_000


def test_partial_chunk_needs_more_data() -> None:
    wire = STREAM_IDENTIFIER + uncompressed(b"abc")
    decoder = SnappyDecoder()
    decoder.receive_data(wire[:-1])
    assert decoder.read() == b""
    assert decoder.buffered == len(uncompressed(b"abc")) - 1
    decoder.receive_data(wire[-1:])
    assert decoder.read() == b"abc"
    assert not decoder.eof


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        pytest.param(uncompressed(b"x"), "does not start with sNaPpY", id="no-identifier"),
        pytest.param(b"\xff\x06\x00\x00sNaPpZ", "bad stream identifier", id="bad-identifier"),
        pytest.param(b"\xff\x05\x00\x00sNaPp", "identifier length", id="identifier-length"),
        pytest.param(STREAM_IDENTIFIER + chunk(0x02, b"x"), "reserved chunk type", id="reserved"),
        pytest.param(
            STREAM_IDENTIFIER + b"\x01\x02\x00\x00ab", "uncompressed chunk", id="short-uncompressed"
        ),
        pytest.param(
            STREAM_IDENTIFIER + b"\x00\xff\xff\x01", "compressed chunk", id="huge-compressed"
        ),
        pytest.param(
            STREAM_IDENTIFIER + chunk(0x01, b"\x00\x00\x00\x00abc"), "checksum", id="bad-checksum"
        ),
    ],
)
def test_corrupt_input(wire: bytes, message: str) -> None:
    decoder = SnappyDecoder()
    decoder.receive_data(wire)
    with pytest.raises(SnappyError, match=message):
        decoder.read()
