"""Snappy and deflate after IDENTIFY: negotiation, the confirming OK, traffic both ways.

Mirrors nsqd's TestSnappy and TestDeflate (nsqd/protocol_v2_test.go), with real
sockets on 127.0.0.1 and nsqbox's own stream layers on the client side.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from nsqbox.net.streams import CompressedStream, Decoder, DeflateStream, Encoder
from nsqbox.nsqd.tcp import negotiate
from nsqbox.wire import commands
from nsqbox.wire.deflate import DeflateDecoder, DeflateEncoder
from nsqbox.wire.frames import MAGIC_V2
from nsqbox.wire.snappy import SnappyDecoder, SnappyEncoder
from tests.conftest import StartNSQD
from tests.helpers import RawConn, wait_until
from tests.nsqd.transport import connect, consume_one


@pytest.mark.parametrize("compression", ["snappy", "deflate"])
async def test_upgrade_and_consume(start_nsqd: StartNSQD, compression: str) -> None:
    nsqd = await start_nsqd()
    conn, reply = await connect(nsqd.tcp, **{compression: True})
    assert reply[compression] is True
    assert reply["tls_v1"] is False
    # nsqd's test: a 128,000-byte message comes back whole through the layer
    await consume_one(conn, f"{compression}_topic", bytes(range(256)) * 500)
    [client] = nsqd.nsqd.clients.values()
    assert (client.snappy, client.deflate) == (compression == "snappy", compression == "deflate")
    await conn.aclose()


@pytest.mark.parametrize(
    ("asked", "max_level", "agreed"),
    [
        pytest.param(0, 6, 6, id="default"),
        pytest.param(-1, 6, 6, id="negative-is-default"),
        pytest.param(3, 6, 3, id="lower"),
        pytest.param(9, 6, 6, id="capped"),
        pytest.param(9, 9, 9, id="max-9"),
        pytest.param(0, 2, 2, id="default-capped"),
    ],
)
async def test_deflate_level(
    start_nsqd: StartNSQD, asked: int, max_level: int, agreed: int
) -> None:
    nsqd = await start_nsqd(max_deflate_level=max_level)
    conn, reply = await connect(nsqd.tcp, deflate=True, deflate_level=asked)
    assert (reply["deflate_level"], reply["max_deflate_level"]) == (agreed, max_level)
    [client] = nsqd.nsqd.clients.values()
    assert isinstance(client.conn.stream, DeflateStream)
    assert client.conn.stream.level == agreed
    await consume_one(conn, "levels", b"level " * 100)
    await conn.aclose()


@pytest.mark.parametrize("compression", ["snappy", "deflate"])
async def test_disabled_by_option(start_nsqd: StartNSQD, compression: str) -> None:
    nsqd = await start_nsqd(**{compression: False})
    conn = await RawConn.open(nsqd.tcp)
    reply = await conn.identify(**{compression: True})
    assert reply[compression] is False
    await consume_one(conn, "plain", b"not compressed")  # the connection stayed plain
    await conn.aclose()


@pytest.mark.parametrize(
    ("compression", "codec"),
    [
        pytest.param("snappy", (SnappyEncoder, SnappyDecoder), id="snappy"),
        pytest.param("deflate", (DeflateEncoder, DeflateDecoder), id="deflate"),
    ],
)
async def test_commands_sent_with_identify(
    start_nsqd: StartNSQD,
    monkeypatch: pytest.MonkeyPatch,
    compression: str,
    codec: tuple[type[Encoder], type[Decoder]],
) -> None:
    """Compressed commands sent right behind IDENTIFY, before the reply: read to empty.

    The server's parser has them buffered when the upgrade starts and hands them
    to the new layer; the client hands what it read behind the reply to its own.
    """
    handed_over: list[bytes] = []
    original = negotiate.upgrade_transport

    async def spy(transport: Any, upgrades: negotiate.Upgrades, initial: bytes) -> Any:
        handed_over.append(initial)
        return await original(transport, upgrades, initial)

    monkeypatch.setattr(negotiate, "upgrade_transport", spy)
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp, magic=b"")
    identify = commands.identify({"feature_negotiation": True, compression: True})
    encoder, decoder = codec[0](), codec[1]()
    pipelined = encoder.encode(commands.pub("piped", b"first") + commands.sub("piped", "ch"))
    await conn.send(MAGIC_V2 + identify + pipelined)
    reply = json.loads(await conn.response())
    assert reply[compression] is True
    # the client goes on with the compressor it started with
    conn.stream = CompressedStream(
        conn.stream, encoder, decoder, initial=conn.reader.take_buffered()
    )
    assert await conn.response() == b"OK"  # the upgrade
    assert await conn.response() == b"OK"  # PUB
    assert await conn.response() == b"OK"  # SUB
    assert handed_over == [pipelined]
    await conn.send(commands.rdy(1))
    msg = await conn.message()
    assert msg.body == b"first"
    await conn.aclose()


@pytest.mark.parametrize("compression", ["snappy", "deflate"])
async def test_many_messages_both_ways(start_nsqd: StartNSQD, compression: str) -> None:
    nsqd = await start_nsqd()
    publisher, _ = await connect(nsqd.tcp, **{compression: True})
    consumer, _ = await connect(nsqd.tcp, **{compression: True})
    await consumer.sub("bulk", "ch", rdy=200)
    bodies = [b"message %05d " % i + b"." * (i % 300) for i in range(1200)]
    for i in range(0, len(bodies), 300):
        await publisher.mpub("bulk", bodies[i : i + 300])
    received = []
    while len(received) < len(bodies):
        msg = await consumer.message()
        received.append(msg.body)
        await consumer.send(commands.fin(msg.id))
    assert received == bodies
    channel = nsqd.nsqd.topics["bulk"].channels["ch"]
    await wait_until(lambda: channel.in_flight_count() == 0)
    await publisher.aclose()
    await consumer.aclose()


@pytest.mark.parametrize("compression", ["snappy", "deflate"])
async def test_corrupt_input_closes_without_an_error_frame(
    start_nsqd: StartNSQD, compression: str
) -> None:
    """nsqd's read fails inside the decompressor: the connection just ends."""
    nsqd = await start_nsqd()
    conn, _ = await connect(nsqd.tcp, **{compression: True})
    raw = conn.stream.transport_stream
    await raw.send_all(b"\xff" * 64)
    with trio.fail_after(conn.timeout):
        while data := await raw.receive_some():
            pytest.fail(f"unexpected data {data!r}")
    await conn.aclose()
