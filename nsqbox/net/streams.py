"""Transport layers for NSQ connections: compression streams and the TLS upgrade.

After IDENTIFY, nsqd and its client may stack up to three layers on the TCP
stream, in this order: TLS, then snappy *or* deflate. Each layer here is a
:class:`trio.abc.Stream` that wraps the one below it, the way
:class:`trio.SSLStream` does, so server and client code stack them the same
way::

    stream = await upgrade_tls(tcp_stream, context, server_side=False)
    stream = SnappyStream(stream, initial=reader.take_buffered())

The codecs themselves are sans-IO (:mod:`nsqbox.wire.snappy`,
:mod:`nsqbox.wire.deflate`); the blocking client uses them directly over
plain sockets.

``initial``: a peer that reads ahead may already hold bytes that belong to the
new layer (the guide's "read to empty": nsqd sends its first compressed ``OK``
right after the IDENTIFY reply, often in the same TCP segment). Whatever the
frame parser buffered beyond the last plain frame must be handed to the new
layer, or it is lost.
"""

from __future__ import annotations

import operator
import ssl
from typing import Final

import trio

from ..wire.codec import Decoder, Encoder

__all__ = [
    "CompressedStream",
    "Decoder",
    "DeflateStream",
    "Encoder",
    "PrefixedStream",
    "SnappyStream",
    "upgrade_tls",
]

#: What ``receive_some()`` asks for when the caller does not say.
DEFAULT_RECEIVE_SIZE: Final = 64 * 1024


def _check_max_bytes(max_bytes: int | None) -> int:
    if max_bytes is None:
        return DEFAULT_RECEIVE_SIZE
    max_bytes = operator.index(max_bytes)  # TypeError for floats, as trio's streams do
    if max_bytes < 1:
        raise ValueError("max_bytes must be >= 1")
    return max_bytes


class CompressedStream(trio.abc.Stream):
    """A stream that encodes what it sends and decodes what it receives.

    ``initial`` holds encoded bytes already read from ``transport_stream``.
    Errors follow trio's conventions: corrupt input from the peer is a
    :class:`trio.BrokenResourceError`; using the stream after :meth:`aclose`
    is a :class:`trio.ClosedResourceError`; two tasks sending (or two
    receiving) at once is a :class:`trio.BusyResourceError`. A ``send_all``
    cancelled part-way leaves the peer's decoder out of step (as with
    :class:`trio.SSLStream`): close the stream after that.
    """

    def __init__(
        self,
        transport_stream: trio.abc.Stream,
        encoder: Encoder,
        decoder: Decoder,
        *,
        initial: bytes | bytearray = b"",
    ) -> None:
        #: The stream below this one (a socket or TLS stream).
        self.transport_stream = transport_stream
        self._encoder = encoder
        self._decoder = decoder
        if initial:
            decoder.receive_data(initial)
        self._closed = False
        self._sending = False
        self._receiving = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Encode ``data`` and send it; the peer can decode it without later bytes."""
        if self._sending:
            raise trio.BusyResourceError("another task is sending on this stream")
        if self._closed:
            await trio.lowlevel.checkpoint()
            raise trio.ClosedResourceError("this stream was closed")
        self._sending = True
        try:
            encoded = self._encoder.encode(data)
            if encoded:
                await self.transport_stream.send_all(encoded)
            else:
                await trio.lowlevel.checkpoint()
        finally:
            self._sending = False

    async def wait_send_all_might_not_block(self) -> None:
        """Wait until the transport could take more data."""
        if self._sending:
            raise trio.BusyResourceError("another task is sending on this stream")
        if self._closed:
            await trio.lowlevel.checkpoint()
            raise trio.ClosedResourceError("this stream was closed")
        await self.transport_stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        """Up to ``max_bytes`` decoded bytes; ``b""`` at the end of the stream."""
        size = _check_max_bytes(max_bytes)
        if self._receiving:
            raise trio.BusyResourceError("another task is receiving on this stream")
        if self._closed:
            await trio.lowlevel.checkpoint()
            raise trio.ClosedResourceError("this stream was closed")
        self._receiving = True
        try:
            decoder = self._decoder
            checkpointed = False
            while True:
                try:
                    data = decoder.read(size)
                except ValueError as exc:
                    raise trio.BrokenResourceError(f"corrupt compressed stream: {exc}") from exc
                if data or decoder.eof:
                    break
                encoded = await self.transport_stream.receive_some(DEFAULT_RECEIVE_SIZE)
                checkpointed = True
                if not encoded:
                    # End of the connection. A partial chunk left behind is lost either way;
                    # nsqd would close the connection just the same.
                    break
                decoder.receive_data(encoded)
            if not checkpointed:
                await trio.lowlevel.checkpoint()
            return data
        finally:
            self._receiving = False

    async def aclose(self) -> None:
        """Close this stream and the transport below it."""
        self._closed = True
        await self.transport_stream.aclose()


class SnappyStream(CompressedStream):
    """A snappy framed stream over ``transport_stream`` (nsqd's ``snappy`` upgrade)."""

    def __init__(self, transport_stream: trio.abc.Stream, *, initial: bytes = b"") -> None:
        # imported on first use: most connections never negotiate it (the library is ~2 MB)
        from ..wire.snappy import SnappyDecoder, SnappyEncoder

        super().__init__(transport_stream, SnappyEncoder(), SnappyDecoder(), initial=initial)


class DeflateStream(CompressedStream):
    """A raw deflate stream over ``transport_stream`` (nsqd's ``deflate`` upgrade)."""

    def __init__(
        self, transport_stream: trio.abc.Stream, level: int = 6, *, initial: bytes = b""
    ) -> None:
        from ..wire.deflate import DeflateDecoder, DeflateEncoder

        super().__init__(transport_stream, DeflateEncoder(level), DeflateDecoder(), initial=initial)
        #: The compression level this side sends with.
        self.level = level


class PrefixedStream(trio.abc.Stream):
    """``transport_stream`` with ``prefix`` put back in front of what it receives.

    For bytes a protocol parser read ahead of a layer change (a TLS
    ClientHello sent right behind IDENTIFY, say): the new layer reads them
    first, then the transport.
    """

    def __init__(self, transport_stream: trio.abc.Stream, prefix: bytes) -> None:
        self.transport_stream = transport_stream
        self._prefix = prefix

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Send on the transport."""
        await self.transport_stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        """Wait on the transport."""
        await self.transport_stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        """The prefix first (up to ``max_bytes`` at a time), then the transport's bytes."""
        if self._prefix:
            size = _check_max_bytes(max_bytes)
            await trio.lowlevel.checkpoint()
            data, self._prefix = self._prefix[:size], self._prefix[size:]
            return data
        return await self.transport_stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        """Close the transport."""
        self._prefix = b""
        await self.transport_stream.aclose()


async def upgrade_tls(
    transport_stream: trio.abc.Stream,
    context: ssl.SSLContext,
    *,
    server_side: bool,
    server_hostname: str | None = None,
    initial: bytes = b"",
) -> trio.SSLStream[trio.abc.Stream]:
    """Wrap ``transport_stream`` in TLS and complete the handshake.

    ``initial`` is what the caller already read from the transport that
    belongs to the handshake. Handshake failures raise
    :class:`trio.BrokenResourceError` (from the :class:`ssl.SSLError`); bound
    the call with a timeout, as nsqd gives the handshake five seconds.
    """
    stream: trio.abc.Stream = transport_stream
    if initial:
        stream = PrefixedStream(transport_stream, initial)
    tls = trio.SSLStream(stream, context, server_side=server_side, server_hostname=server_hostname)
    await tls.do_handshake()
    return tls
