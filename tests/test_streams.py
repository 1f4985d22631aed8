"""nsqbox.net.streams: the compression streams pass trio's stream conformance checks and stack.

Memory streams only: no sockets, so no timeouts are needed beyond the guard
each test has.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable

import pytest
import trio
import trio.testing
import trustme

from nsqbox.net.streams import (
    CompressedStream,
    DeflateStream,
    PrefixedStream,
    SnappyStream,
    upgrade_tls,
)
from nsqbox.wire.deflate import DeflateEncoder
from nsqbox.wire.snappy import STREAM_IDENTIFIER, SnappyEncoder

TIMEOUT = 30

Wrap = Callable[[trio.abc.Stream], CompressedStream]

WRAPPERS: list[object] = [
    pytest.param(lambda s: SnappyStream(s), id="snappy"),
    pytest.param(lambda s: DeflateStream(s, 6), id="deflate"),
    pytest.param(lambda s: DeflateStream(s, 1), id="deflate-1"),
]


@pytest.mark.parametrize("wrap", WRAPPERS)
async def test_two_way_stream_conformance(wrap: Wrap) -> None:
    async def maker() -> tuple[CompressedStream, CompressedStream]:
        left, right = trio.testing.memory_stream_pair()
        return wrap(left), wrap(right)

    async def clogged() -> tuple[CompressedStream, CompressedStream]:
        left, right = trio.testing.lockstep_stream_pair()
        return wrap(left), wrap(right)

    with trio.fail_after(TIMEOUT):
        await trio.testing.check_two_way_stream(maker, clogged)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def tls_contexts(ca: trustme.CA) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("nsqd.test").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return server, client


@pytest.mark.parametrize("wrap", WRAPPERS)
async def test_compression_over_tls_conformance(ca: trustme.CA, wrap: Wrap) -> None:
    """The layers stack as nsqd stacks them: TLS first, compression on top."""
    server_ctx, client_ctx = tls_contexts(ca)

    async def maker() -> tuple[CompressedStream, CompressedStream]:
        left, right = trio.testing.memory_stream_pair()
        tls: dict[str, trio.SSLStream[trio.abc.Stream]] = {}

        async def server() -> None:
            tls["server"] = await upgrade_tls(left, server_ctx, server_side=True)

        async def client() -> None:
            tls["client"] = await upgrade_tls(
                right, client_ctx, server_side=False, server_hostname="nsqd.test"
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(server)
            nursery.start_soon(client)
        return wrap(tls["server"]), wrap(tls["client"])

    with trio.fail_after(TIMEOUT):
        await trio.testing.check_two_way_stream(maker, None)


async def test_what_goes_over_the_wire_is_compressed() -> None:
    left, right = trio.testing.memory_stream_pair()
    sender = SnappyStream(left)
    with trio.fail_after(TIMEOUT):
        await sender.send_all(b"x" * 10_000)
        raw = await right.receive_some()
    assert raw.startswith(STREAM_IDENTIFIER)
    assert len(raw) < 1000


@pytest.mark.parametrize(
    ("make", "encoder"),
    [
        pytest.param(lambda s, b: SnappyStream(s, initial=b), SnappyEncoder(), id="snappy"),
        pytest.param(lambda s, b: DeflateStream(s, initial=b), DeflateEncoder(), id="deflate"),
    ],
)
async def test_initial_bytes_are_decoded_first(
    make: Callable[[trio.abc.Stream, bytes], CompressedStream],
    encoder: SnappyEncoder | DeflateEncoder,
) -> None:
    """Read to empty: encoded bytes a frame reader took in early are handed to the layer."""
    left, right = trio.testing.memory_stream_pair()
    early = encoder.encode(b"already read ")
    later = encoder.encode(b"then received")
    stream = make(right, early)
    with trio.fail_after(TIMEOUT):
        await left.send_all(later)
        got = b""
        while len(got) < len(b"already read then received"):
            got += await stream.receive_some()
    assert got == b"already read then received"


async def test_corrupt_input_breaks_the_stream() -> None:
    left, right = trio.testing.memory_stream_pair()
    stream = SnappyStream(right)
    with trio.fail_after(TIMEOUT):
        await left.send_all(b"not snappy at all")
        with pytest.raises(trio.BrokenResourceError, match="corrupt compressed stream"):
            await stream.receive_some()


async def test_deflate_peer_finishing_its_stream_is_end_of_input() -> None:
    left, right = trio.testing.memory_stream_pair()
    encoder = DeflateEncoder()
    stream = DeflateStream(right)
    with trio.fail_after(TIMEOUT):
        await left.send_all(encoder.encode(b"bye") + encoder.finish())
        assert await stream.receive_some() == b"bye"
        assert await stream.receive_some() == b""


async def test_tls_upgrade_with_a_client_hello_read_ahead(ca: trustme.CA) -> None:
    """The server read the ClientHello together with the command before it."""
    server_ctx, client_ctx = tls_contexts(ca)
    left, right = trio.testing.memory_stream_pair()

    async def server() -> None:
        hello = await left.receive_some()  # everything the client sent so far
        tls = await upgrade_tls(left, server_ctx, server_side=True, initial=hello)
        await tls.send_all(b"secret")

    async def client() -> None:
        tls = await upgrade_tls(right, client_ctx, server_side=False, server_hostname="nsqd.test")
        assert await tls.receive_some() == b"secret"

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server)
            nursery.start_soon(client)


async def test_prefixed_stream_hands_out_the_prefix_first() -> None:
    left, right = trio.testing.memory_stream_pair()
    stream = PrefixedStream(right, b"abcdef")
    with trio.fail_after(TIMEOUT):
        await left.send_all(b"ghi")
        assert await stream.receive_some(4) == b"abcd"
        assert await stream.receive_some() == b"ef"
        assert await stream.receive_some() == b"ghi"
        await stream.send_all(b"back")
        assert await left.receive_some() == b"back"
        await stream.aclose()
        with pytest.raises(trio.ClosedResourceError):
            await right.receive_some()
