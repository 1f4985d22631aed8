"""One protocol V2 connection to an nsqd, on trio.

:func:`open_connection` dials, performs the handshake (magic, IDENTIFY, the
agreed upgrades, AUTH) and returns a :class:`Connection`. A consumer then
subscribes with :meth:`Connection.subscribe`; both consumer and producer call
:meth:`Connection.serve`, which runs the connection's two loops until it ends:

- the reader parses every frame a receive brought in one pass and hands them to
  a :class:`FrameSink`, answering heartbeats with NOP itself (guide, Data Flow
  and Heartbeats);
- the writer sends everything written since its last send in one
  ``send_all``, so the FINs for a batch of messages leave together.
"""

from __future__ import annotations

import logging
from typing import Protocol

import trio

from ..wire import commands
from ..wire.errors import NSQError
from ..wire.frames import HEARTBEAT, FrameReader, FrameTooLarge, FrameType
from .config import Config, format_address, parse_address
from .errors import ClientError, ConnectionClosed
from .handshake import (
    AuthResult,
    Negotiated,
    auth_command,
    check_ok,
    check_subscribed,
    opening_bytes,
    parse_auth_response,
    parse_identify_response,
)
from .transport import upgrade_stream

__all__ = ["CONNECT_ERRORS", "Connection", "FrameSink", "open_connection"]

log = logging.getLogger("nsqbox.client")

RECEIVE_SIZE = 256 * 1024
_NOP = commands.nop()

#: What dialling and the handshake can raise when the peer or the network fails.
CONNECT_ERRORS = (
    OSError,
    trio.TooSlowError,
    trio.BrokenResourceError,
    NSQError,
    ClientError,
    FrameTooLarge,
)


class FrameSink(Protocol):
    """Where a serving connection delivers frames (heartbeats are answered before this)."""

    def on_message(self, data: bytes) -> None:
        """A message frame's payload (the message encoding)."""

    def on_response(self, data: bytes) -> None:
        """A response frame other than ``_heartbeat_`` (``OK``, ``CLOSE_WAIT``...)."""

    def on_error(self, error: NSQError) -> None:
        """An error frame. Fatal errors are followed by nsqd closing the connection."""


class Connection:
    """A handshaken connection: its address, what nsqd agreed to, and its I/O loops."""

    def __init__(self, address: str, host: str, stream: trio.abc.Stream, config: Config) -> None:
        self.address = address
        self.host = host
        self.config = config
        self.stream = stream
        self.negotiated = Negotiated()
        self.auth: AuthResult | None = None
        #: Why the connection ended (empty while it is open).
        self.close_reason = ""
        self._reader = FrameReader()
        self._out = bytearray()
        self._wake = trio.Event()
        self._closing = False
        self._closed = False
        self._scope: trio.CancelScope | None = None

    def __repr__(self) -> str:
        return f"Connection({self.address})"

    @property
    def closed(self) -> bool:
        """True once the connection ended or started closing; writes are refused then."""
        return self._closed or self._closing

    # -- handshake (before serve) -------------------------------------------------
    async def _roundtrip(self, data: bytes | None) -> tuple[int, bytes]:
        """Send ``data`` (if any) and read the next frame, answering heartbeats meanwhile."""
        if data:
            await self.stream.send_all(data)
        while True:
            frame = self._reader.next_frame()
            if frame is None:
                chunk = await self.stream.receive_some(RECEIVE_SIZE)
                if not chunk:
                    raise ConnectionClosed(f"{self.address} closed the connection")
                self._reader.receive_data(chunk)
                continue
            if frame == (FrameType.RESPONSE, HEARTBEAT):
                await self.stream.send_all(_NOP)
                continue
            return frame

    async def _handshake(self) -> None:
        config = self.config
        self.negotiated = parse_identify_response(
            *await self._roundtrip(opening_bytes(config)), config
        )
        for feature in self.negotiated.upgrades:
            buffered = self._reader.take_buffered()
            self.stream = await upgrade_stream(
                self.stream, feature, buffered, config, self.negotiated, self.host
            )
            check_ok(*await self._roundtrip(None), feature)
        auth = auth_command(config, self.negotiated)
        if auth is not None:
            self.auth = parse_auth_response(*await self._roundtrip(auth))
            log.info("[%s] AUTH accepted: identity %r", self.address, self.auth.identity)

    async def subscribe(self, topic: str, channel: str) -> None:
        """SUB and wait for its OK (raises NSQError on an error frame)."""
        with trio.fail_after(self.config.read_timeout):
            check_subscribed(*await self._roundtrip(commands.sub(topic, channel)))

    async def request(self, data: bytes) -> tuple[int, bytes]:
        """Send one command and read its reply frame (before :meth:`serve` only)."""
        with trio.fail_after(self.config.read_timeout):
            return await self._roundtrip(data)

    # -- serving --------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Queue bytes for the writer; :class:`ConnectionClosed` once the connection ended."""
        if self._closed or self._closing:
            raise ConnectionClosed(f"connection to {self.address} is closed")
        if not self._out:
            self._wake.set()
        self._out += data

    def close(self) -> None:
        """Stop after flushing what was written so far (graceful)."""
        self._closing = True
        self._wake.set()

    def abort(self) -> None:
        """Stop now, dropping unsent bytes."""
        self._closing = True
        if self._scope is not None:
            self._scope.cancel()

    async def serve(self, sink: FrameSink) -> None:
        """Run the reader and the writer until the connection ends, for whatever reason."""
        try:
            async with trio.open_nursery() as nursery:
                self._scope = nursery.cancel_scope
                nursery.start_soon(self._writer)
                await self._read_loop(sink)
                nursery.cancel_scope.cancel()
        finally:
            self._closed = True

    async def aclose(self) -> None:
        """Close the stream (after :meth:`serve` returned, or instead of it)."""
        self._closed = True
        await trio.aclose_forcefully(self.stream)

    def _ended(self, reason: str) -> None:
        if not self.close_reason:
            self.close_reason = reason
            log.info("[%s] connection closed: %s", self.address, reason)

    async def _read_loop(self, sink: FrameSink) -> None:
        stream = self.stream
        reader = self._reader
        timeout = self.config.read_timeout
        if not self._dispatch(sink):  # frames that came in with the handshake's replies
            return
        while True:
            with trio.move_on_after(timeout) as scope:
                try:
                    data = await stream.receive_some(RECEIVE_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    self._ended(f"read error: {exc}")
                    return
            if scope.cancelled_caught:
                self._ended(f"nothing received for {timeout}s")
                return
            if not data:
                self._ended("closed by nsqd")
                return
            reader.receive_data(data)
            if not self._dispatch(sink):
                return

    def _dispatch(self, sink: FrameSink) -> bool:
        """Hand every complete frame to ``sink``; False when the stream is unusable."""
        try:
            frames = self._reader.frames()
        except FrameTooLarge as exc:
            self._ended(f"bad frame: {exc}")
            return False
        message = FrameType.MESSAGE
        response = FrameType.RESPONSE
        for frame_type, data in frames:
            if frame_type == message:
                sink.on_message(data)
            elif frame_type == response:
                if data == HEARTBEAT:
                    if not self.closed:
                        self.write(_NOP)
                else:
                    sink.on_response(data)
            elif frame_type == FrameType.ERROR:
                sink.on_error(NSQError.from_frame_body(data))
            else:
                self._ended(f"unknown frame type {frame_type}")
                return False
        return True

    async def _writer(self) -> None:
        stream = self.stream
        timeout = self.config.write_timeout
        while True:
            if not self._out:
                if self._closing:
                    break
                await self._wake.wait()
                self._wake = trio.Event()
                continue
            data = self._out
            self._out = bytearray()
            with trio.move_on_after(timeout) as scope:
                try:
                    await stream.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    self._ended(f"write error: {exc}")
                    break
            if scope.cancelled_caught:
                self._ended(f"write blocked for {timeout}s")
                break
        self._ended("closed")
        if self._scope is not None:
            self._scope.cancel()


async def open_connection(address: str | tuple[str, int], config: Config) -> Connection:
    """Dial ``address`` and complete the handshake; raises one of :data:`CONNECT_ERRORS`."""
    host, port = parse_address(address)
    with trio.fail_after(config.dial_timeout):
        stream = await trio.open_tcp_stream(host, port)
    conn = Connection(format_address(address), host, stream, config)
    try:
        with trio.fail_after(config.read_timeout):
            await conn._handshake()
    except BaseException:
        await trio.aclose_forcefully(conn.stream)
        raise
    return conn
