"""One protocol V2 connection over a plain socket, for the blocking client (no trio).

The same handshake as the trio connection (:mod:`.handshake`), with TLS from
the :mod:`ssl` module and the sans-IO snappy and deflate codecs of
:mod:`nsqbox.wire` layered by hand: bytes from the socket go through the
decoder (when one is negotiated) into a :class:`~nsqbox.wire.frames.FrameReader`,
and everything written is buffered and goes out, encoded, in one ``sendall``
per :meth:`SyncConnection.flush`.
"""

from __future__ import annotations

import logging
import socket
import ssl
import time

from ..wire import commands
from ..wire.codec import Decoder, Encoder
from ..wire.deflate import DeflateDecoder, DeflateEncoder
from ..wire.errors import NSQError
from ..wire.frames import HEARTBEAT, FrameReader, FrameTooLarge, FrameType
from ..wire.snappy import SnappyDecoder, SnappyEncoder
from .config import Config, format_address, parse_address
from .errors import ConnectionClosed, HandshakeError
from .handshake import (
    DEFLATE,
    SNAPPY,
    TLS,
    AuthResult,
    Negotiated,
    auth_command,
    check_ok,
    check_subscribed,
    opening_bytes,
    parse_auth_response,
    parse_identify_response,
)

__all__ = ["SyncConnection"]

log = logging.getLogger("nsqbox.client")

RECEIVE_SIZE = 256 * 1024
_NOP = commands.nop()


class SyncConnection:
    """A handshaken, blocking connection to one nsqd."""

    def __init__(self, address: str | tuple[str, int], config: Config) -> None:
        self.address = format_address(address)
        self.config = config
        self.negotiated = Negotiated()
        self.auth: AuthResult | None = None
        host, port = parse_address(address)
        self._host = host
        self._sock: socket.socket | ssl.SSLSocket = socket.create_connection(
            (host, port), timeout=config.dial_timeout
        )
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        #: This end's ``host:port``: what nsqd's ``/stats`` lists as the client's
        #: ``remote_address`` (unless a NAT or proxy stands between).
        self.local_address = format_address(self._sock.getsockname()[:2])
        self._encoder: Encoder | None = None
        self._decoder: Decoder | None = None
        self._reader = FrameReader()
        self._out = bytearray()
        self._closed = False
        try:
            self._handshake()
        except BaseException:
            self.close()
            raise

    @property
    def closed(self) -> bool:
        """True once the connection is closed (by either side)."""
        return self._closed

    # -- handshake ------------------------------------------------------------------
    def _handshake(self) -> None:
        config = self.config
        self._sock.settimeout(config.read_timeout)
        self._sock.sendall(opening_bytes(config))
        self.negotiated = parse_identify_response(*self._next_frame(config.read_timeout), config)
        for feature in self.negotiated.upgrades:
            self._upgrade(feature, self._reader.take_buffered())
            check_ok(*self._next_frame(config.read_timeout), feature)
        auth = auth_command(config, self.negotiated)
        if auth is not None:
            self.write(auth)
            self.auth = parse_auth_response(*self._next_frame(config.read_timeout))

    def _upgrade(self, feature: str, buffered: bytes) -> None:
        if feature == TLS:
            if buffered:
                raise HandshakeError("nsqd sent data before the TLS handshake")
            server_hostname = self.config.tls_server_hostname or self._host
            try:
                self._sock = self.config.ssl_context().wrap_socket(
                    self._sock, server_hostname=server_hostname
                )
            except ssl.SSLError as exc:
                raise HandshakeError(f"TLS handshake failed: {exc}") from exc
            return
        decoder: Decoder
        if feature == SNAPPY:
            self._encoder, decoder = SnappyEncoder(), SnappyDecoder()
        elif feature == DEFLATE:
            level = self.negotiated.deflate_level or self.config.deflate_level
            self._encoder, decoder = DeflateEncoder(level), DeflateDecoder()
        else:
            raise HandshakeError(f"unknown upgrade {feature!r}")
        self._decoder = decoder
        if buffered:  # already read behind the IDENTIFY reply: the first compressed bytes
            self._feed(buffered)

    def subscribe(self, topic: str, channel: str) -> None:
        """SUB and wait for its OK."""
        self.write(commands.sub(topic, channel))
        check_subscribed(*self._next_frame(self.config.read_timeout))

    # -- I/O ------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Buffer a command; :meth:`flush` (or any read) sends it."""
        if self._closed:
            raise ConnectionClosed(f"connection to {self.address} is closed")
        self._out += data

    def flush(self) -> None:
        """Send everything written so far in one ``sendall``."""
        if not self._out or self._closed:
            return
        data = bytes(self._out)
        self._out.clear()
        if self._encoder is not None:
            data = self._encoder.encode(data)
        try:
            self._sock.settimeout(self.config.write_timeout)
            self._sock.sendall(data)
        except OSError as exc:
            self.close()
            raise ConnectionClosed(f"write to {self.address} failed: {exc}") from exc

    def _feed(self, raw: bytes) -> None:
        decoder = self._decoder
        if decoder is None:
            self._reader.receive_data(raw)
            return
        try:
            decoder.receive_data(raw)
            while chunk := decoder.read(RECEIVE_SIZE):
                self._reader.receive_data(chunk)
        except ValueError as exc:
            self.close()
            raise ConnectionClosed(f"corrupt compressed stream from {self.address}") from exc

    def _receive(self, timeout: float | None) -> bool:
        """Read once from the socket; False on timeout."""
        try:
            self._sock.settimeout(timeout)
            raw = self._sock.recv(RECEIVE_SIZE)
        except (TimeoutError, BlockingIOError, ssl.SSLWantReadError):
            return False  # nothing within the timeout (0 means "only what is there")
        except OSError as exc:
            self.close()
            raise ConnectionClosed(f"read from {self.address} failed: {exc}") from exc
        if not raw:
            self.close()
            raise ConnectionClosed(f"{self.address} closed the connection")
        self._feed(raw)
        return True

    def frames(self, timeout: float | None) -> list[tuple[int, bytes]]:
        """Flush, then the frames that arrive within ``timeout`` seconds (maybe none).

        Heartbeats are answered with NOP and left out. Blocks at most once on
        the socket: a batch is whatever one receive brought.
        """
        self.flush()
        out = self._pending_frames()
        if out:
            return out
        deadline = None if timeout is None else time.monotonic() + timeout
        while not out:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self._receive(wait):
                return []
            out = self._pending_frames()
            if self._out:
                self.flush()  # the NOPs for heartbeats
            if deadline is not None and time.monotonic() >= deadline:
                break
        return out

    def _pending_frames(self) -> list[tuple[int, bytes]]:
        try:
            frames = self._reader.frames()
        except FrameTooLarge as exc:
            self.close()
            raise ConnectionClosed(f"bad frame from {self.address}: {exc}") from exc
        out = []
        for frame in frames:
            if frame == (FrameType.RESPONSE, HEARTBEAT):
                self._out += _NOP
            else:
                out.append(frame)
        return out

    def _next_frame(self, timeout: float) -> tuple[int, bytes]:
        """The next frame (heartbeats answered), for request/reply exchanges."""
        deadline = time.monotonic() + timeout
        while True:
            self.flush()
            frame = self._reader.next_frame()
            if frame == (FrameType.RESPONSE, HEARTBEAT):
                self._out += _NOP
                continue
            if frame is not None:
                return frame
            if not self._receive(max(0.0, deadline - time.monotonic())):
                self.close()
                raise ConnectionClosed(f"no reply from {self.address} within {timeout}s")

    def request(self, data: bytes) -> bytes:
        """Send a command and return its response; error frames raise :class:`NSQError`."""
        self.write(data)
        frame_type, payload = self._next_frame(self.config.read_timeout)
        if frame_type == FrameType.ERROR:
            error = NSQError.from_frame_body(payload)
            if error.fatal:
                self.close()
            raise error
        if frame_type != FrameType.RESPONSE:
            self.close()
            raise ConnectionClosed(f"unexpected frame type {frame_type} from {self.address}")
        return payload

    def close(self) -> None:
        """Close the socket (unsent commands are dropped)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._sock.close()
        except OSError as exc:  # pragma: no cover - close() rarely fails
            log.debug("[%s] close: %s", self.address, exc)
