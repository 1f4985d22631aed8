"""The raw deflate codec: sync-flushed output, incremental and bounded decoding."""

from __future__ import annotations

import random
import zlib

import pytest

from nsqbox.wire.deflate import DeflateDecoder, DeflateEncoder, DeflateError

SYNC_MARKER = b"\x00\x00\xff\xff"  # the empty stored block a sync flush ends with


def decode_all(wire: bytes, *, step: int = 1, max_bytes: int = 1 << 20) -> bytes:
    decoder = DeflateDecoder()
    out = bytearray()
    for i in range(0, len(wire), step):
        decoder.receive_data(wire[i : i + step])
        while data := decoder.read(max_bytes):
            assert len(data) <= max_bytes
            out += data
    return bytes(out)


def test_each_encode_is_sync_flushed_raw_deflate() -> None:
    encoder = DeflateEncoder(6)
    first = encoder.encode(b"OK")
    assert first.endswith(SYNC_MARKER)
    # raw deflate: no zlib header, decodable by itself with negative window bits
    assert zlib.decompressobj(-zlib.MAX_WBITS).decompress(first) == b"OK"


def test_empty_input_encodes_to_nothing() -> None:
    assert DeflateEncoder().encode(b"") == b""


@pytest.mark.parametrize("level", [0, 1, 6, 9])
def test_round_trip_one_byte_at_a_time(level: int) -> None:
    rng = random.Random(level)
    parts = [rng.randbytes(rng.randrange(200)) + b"ab" * rng.randrange(5000) for _ in range(8)]
    encoder = DeflateEncoder(level)
    wire = b"".join(encoder.encode(p) for p in parts)
    assert decode_all(wire, max_bytes=rng.randrange(1, 3000)) == b"".join(parts)


def test_decoder_reads_what_zlib_peers_send() -> None:
    # pynsq and gnsq compress with zlib's raw deflate and Z_SYNC_FLUSH
    compressor = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    wire = compressor.compress(b"SUB t c\n") + compressor.flush(zlib.Z_SYNC_FLUSH)
    assert decode_all(wire) == b"SUB t c\n"


def test_output_is_bounded_per_read() -> None:
    # a kilobyte that inflates to eight megabytes must not be inflated at once
    wire = DeflateEncoder(9).encode(bytes(8 << 20))
    assert len(wire) < 16_384
    decoder = DeflateDecoder()
    decoder.receive_data(wire)
    total = 0
    while data := decoder.read(65_536):
        assert len(data) <= 65_536
        total += len(data)
    assert total == 8 << 20


def test_finished_stream_is_eof_and_ignores_the_rest() -> None:
    encoder = DeflateEncoder()
    wire = encoder.encode(b"bye") + encoder.finish()
    decoder = DeflateDecoder()
    decoder.receive_data(wire + b"trailing junk")
    assert decoder.read() == b"bye"
    assert decoder.eof
    decoder.receive_data(b"more")
    assert decoder.read() == b""


def test_corrupt_input() -> None:
    decoder = DeflateDecoder()
    decoder.receive_data(b"\xff\xff\xff\xff")
    with pytest.raises(DeflateError):
        decoder.read()


@pytest.mark.parametrize("level", [-2, 10])
def test_level_bounds(level: int) -> None:
    with pytest.raises(ValueError, match="deflate level"):
        DeflateEncoder(level)
