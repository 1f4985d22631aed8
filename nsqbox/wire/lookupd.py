"""nsqlookupd's TCP protocol V1, sans-IO: the server-side parser and the client-side encoders.

An nsqd connects, sends the magic ``"  V1"``, then text commands, one a line::

    PING\\n
    IDENTIFY\\n[4-byte size][JSON]
    REGISTER <topic> [<channel>]\\n
    UNREGISTER <topic> [<channel>]\\n

Every reply is ``[4-byte big-endian size][data]``: ``OK``, the IDENTIFY JSON, or
``CODE description`` for an error. Unlike protocol V2 there is no frame type,
and every V1 error is fatal (nsqlookupd/lookup_protocol_v1.go), so the parser
raises :class:`~nsqbox.wire.errors.NSQError` and the server answers it and hangs up.

The parser tracks whether the peer has identified, because nsqlookupd checks
that before it looks at a command's parameters; keeping the check here keeps the
error order (and so the texts a peer sees) exactly nsqlookupd's.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

import msgspec

from .buffer import ReceiveBuffer
from .errors import NSQError, ProtocolViolation
from .names import is_valid_channel_name, is_valid_topic_name
from .parser import NEED_DATA, NeedData
from .peer_json import PeerJSONError, decode_go_struct

MAGIC_V1: Final = b"  V1"

#: nsqlookupd reads lines with an unbounded bufio.Reader; real commands are a
#: few dozen bytes (names are at most 64 characters), so a line this long is abuse.
MAX_LINE_LENGTH: Final = 64 * 1024

#: nsqlookupd accepts any int32 IDENTIFY size; nsqbox bounds it like nsqd's --max-body-size.
MAX_IDENTIFY_SIZE: Final = 5 * 1024 * 1024

_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")

__all__ = [
    "MAGIC_V1",
    "NEED_DATA",
    "ConnectionClosed",
    "Identify",
    "LookupdV1Parser",
    "PeerIdentity",
    "Ping",
    "Register",
    "ResponseReader",
    "Unregister",
    "encode_error",
    "encode_identify",
    "encode_ping",
    "encode_register",
    "encode_response",
    "encode_unregister",
]


class PeerIdentity(msgspec.Struct, frozen=True):
    """What an nsqd says about itself in IDENTIFY (nsqlookupd's PeerInfo, minus its bookkeeping).

    ``None`` is accepted where Go's encoding/json would leave a zero value for ``null``.
    """

    broadcast_address: str | None = None
    hostname: str | None = None
    tcp_port: int | None = None
    http_port: int | None = None
    version: str | None = None


_identity_decoder = msgspec.json.Decoder(PeerIdentity)


class Ping(NamedTuple):
    """``PING``: the peer is alive (refreshes its last-update time once identified)."""


class Identify(NamedTuple):
    """``IDENTIFY`` with a decoded, complete body."""

    broadcast_address: str
    hostname: str
    tcp_port: int
    http_port: int
    version: str


class Register(NamedTuple):
    """``REGISTER topic [channel]``; ``channel`` is ``""`` when absent."""

    topic: str
    channel: str


class Unregister(NamedTuple):
    """``UNREGISTER topic [channel]``; ``channel`` is ``""`` when absent."""

    topic: str
    channel: str


class ConnectionClosed(NamedTuple):
    """The peer closed its side; a partial line, as in nsqlookupd, is dropped."""


Event = Ping | Identify | Register | Unregister | ConnectionClosed

# Parser states.
_MAGIC, _LINE, _IDENTIFY_SIZE, _IDENTIFY_BODY, _CLOSED = range(5)


def _invalid(description: str) -> NSQError:
    return NSQError("E_INVALID", description)


def _decode(raw: bytes) -> str:
    # Go strings are bytes; surrogateescape keeps any byte sequence round-trippable
    # so an error text quotes exactly what the peer sent.
    return raw.decode("utf-8", "surrogateescape")


class LookupdV1Parser(ReceiveBuffer):
    """Incremental parser for what an nsqd sends to nsqlookupd.

    Feed bytes with :meth:`receive_data` (``b""`` for end of stream), then call
    :meth:`next_event` until it returns :data:`NEED_DATA`. Protocol errors raise
    :class:`NSQError` (always fatal); a wrong magic raises ``E_BAD_PROTOCOL``
    (answer it with :func:`encode_error`, which sends the bare code as nsqlookupd does).
    """

    def __init__(
        self,
        *,
        max_line_length: int = MAX_LINE_LENGTH,
        max_identify_size: int = MAX_IDENTIFY_SIZE,
    ) -> None:
        super().__init__()
        self._eof = False
        self._state = _MAGIC
        self._size = 0
        self._max_line = max_line_length
        self._max_identify = max_identify_size
        #: True once IDENTIFY has been parsed successfully.
        self.identified = False

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes read from the connection; ``b""`` means the peer closed."""
        if not data:
            self._eof = True
            return
        super().receive_data(data)

    def next_event(self) -> Event | NeedData:
        """The next event, :data:`NEED_DATA`, or :class:`ConnectionClosed` at the end."""
        if self._state == _MAGIC:
            if len(self._buf) - self._pos < 4:
                return self._closed_or_need_data()
            magic = bytes(self._buf[self._pos : self._pos + 4])
            self._pos += 4
            if magic != MAGIC_V1:
                self._state = _CLOSED
                raise NSQError("E_BAD_PROTOCOL")
            self._state = _LINE
        if self._state == _LINE:
            return self._next_line()
        if self._state in (_IDENTIFY_SIZE, _IDENTIFY_BODY):
            return self._next_identify()
        return ConnectionClosed()

    def _closed_or_need_data(self) -> ConnectionClosed | NeedData:
        if self._eof:
            self._state = _CLOSED
            return ConnectionClosed()
        return NEED_DATA

    def _next_line(self) -> Event | NeedData:
        buf = self._buf
        idx = buf.find(b"\n", self._pos)
        if idx < 0:
            if len(buf) - self._pos >= self._max_line:
                raise ProtocolViolation("command line too long")
            return self._closed_or_need_data()
        if idx - self._pos >= self._max_line:
            raise ProtocolViolation("command line too long")
        line = _decode(bytes(buf[self._pos : idx])).strip()  # Go: strings.TrimSpace
        self._pos = idx + 1
        params = line.split(" ")
        name = params[0]
        if name == "PING":
            return Ping()
        if name == "IDENTIFY":
            if self.identified:
                raise _invalid("cannot IDENTIFY again")
            self._state = _IDENTIFY_SIZE
            return self._next_identify()
        if name in ("REGISTER", "UNREGISTER"):
            if not self.identified:
                raise _invalid("client must IDENTIFY")
            topic, channel = _topic_channel(name, params[1:])
            return Register(topic, channel) if name == "REGISTER" else Unregister(topic, channel)
        raise _invalid(f"invalid command {name}")

    def _next_identify(self) -> Identify | NeedData:
        if self._state == _IDENTIFY_SIZE:
            if len(self._buf) - self._pos < 4:
                if self._eof:
                    raise NSQError("E_BAD_BODY", "IDENTIFY failed to read body size")
                return NEED_DATA
            (size,) = _INT32.unpack_from(self._buf, self._pos)
            self._pos += 4
            if size < 0 or size > self._max_identify:
                # nsqlookupd would try to allocate this much; refuse instead.
                raise NSQError("E_BAD_BODY", f"IDENTIFY invalid body size {size}")
            self._size = size
            self._state = _IDENTIFY_BODY
        end = self._pos + self._size
        if len(self._buf) < end:
            if self._eof:
                raise NSQError("E_BAD_BODY", "IDENTIFY failed to read body")
            return NEED_DATA
        body = bytes(self._buf[self._pos : end])
        self._pos = end
        self._state = _LINE
        event = decode_identify_body(body)
        self.identified = True
        return event


def decode_identify_body(body: bytes) -> Identify:
    """Decode and check an IDENTIFY body as nsqlookupd does (E_BAD_BODY on failure)."""
    try:
        peer = decode_go_struct(body, _identity_decoder)
    except PeerJSONError:
        raise NSQError("E_BAD_BODY", "IDENTIFY failed to decode JSON body") from None
    if not (peer.broadcast_address and peer.tcp_port and peer.http_port and peer.version):
        raise NSQError("E_BAD_BODY", "IDENTIFY missing fields")
    return Identify(
        broadcast_address=peer.broadcast_address,
        hostname=peer.hostname or "",
        tcp_port=peer.tcp_port,
        http_port=peer.http_port,
        version=peer.version,
    )


def _topic_channel(command: str, params: list[str]) -> tuple[str, str]:
    # nsqlookupd's getTopicChannel: a third parameter and beyond are ignored.
    if not params:
        raise _invalid(f"{command} insufficient number of params")
    topic = params[0]
    channel = params[1] if len(params) >= 2 else ""
    if not is_valid_topic_name(topic):
        raise NSQError("E_BAD_TOPIC", f"{command} topic name '{topic}' is not valid")
    if channel and not is_valid_channel_name(channel):
        raise NSQError("E_BAD_CHANNEL", f"{command} channel name '{channel}' is not valid")
    return topic, channel


# --- replies (server side) ---------------------------------------------------------


def encode_response(data: bytes) -> bytes:
    """A V1 reply: ``[4-byte size][data]``."""
    return _UINT32.pack(len(data)) + data


def encode_error(err: NSQError) -> bytes:
    """An error reply: ``CODE description``, or the bare code when there is no description."""
    text = f"{err.code} {err.description}" if err.description else err.code
    return encode_response(text.encode("utf-8", "surrogateescape"))


# --- commands (client side, as nsqd sends them) -----------------------------------------


def encode_ping() -> bytes:
    """``PING\\n``."""
    return b"PING\n"


def encode_identify(
    *, broadcast_address: str, hostname: str, tcp_port: int, http_port: int, version: str
) -> bytes:
    """``IDENTIFY\\n[size][JSON]`` with the keys in the order nsqd's encoding/json writes them."""
    body = msgspec.json.encode(
        {
            "broadcast_address": broadcast_address,
            "hostname": hostname,
            "http_port": http_port,
            "tcp_port": tcp_port,
            "version": version,
        }
    )
    return b"IDENTIFY\n" + _UINT32.pack(len(body)) + body


def _registration(command: bytes, topic: str, channel: str) -> bytes:
    parts = [command, topic.encode()]
    if channel:
        parts.append(channel.encode())
    return b" ".join(parts) + b"\n"


def encode_register(topic: str, channel: str = "") -> bytes:
    """``REGISTER topic [channel]\\n``."""
    return _registration(b"REGISTER", topic, channel)


def encode_unregister(topic: str, channel: str = "") -> bytes:
    """``UNREGISTER topic [channel]\\n``."""
    return _registration(b"UNREGISTER", topic, channel)


class ResponseReader:
    """Client side: splits ``[4-byte size][data]`` replies out of the byte stream.

    nsqd bounds a reply by its --max-body-size (readResponseBounded); a larger
    size raises :class:`ProtocolViolation`.
    """

    def __init__(self, max_size: int = MAX_IDENTIFY_SIZE) -> None:
        self._buf = bytearray()
        self._max = max_size

    def receive_data(self, data: bytes) -> None:
        """Append bytes read from the connection."""
        self._buf += data

    def next_response(self) -> bytes | NeedData:
        """The next reply's data, or :data:`NEED_DATA`."""
        if len(self._buf) < 4:
            return NEED_DATA
        (size,) = _INT32.unpack_from(self._buf, 0)
        if size < 0 or size > self._max:
            raise ProtocolViolation(
                f"response body size ({size}) is greater than limit ({self._max})"
            )
        if len(self._buf) < 4 + size:
            return NEED_DATA
        data = bytes(self._buf[4 : 4 + size])
        del self._buf[: 4 + size]
        return data
