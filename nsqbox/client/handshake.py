"""The connection handshake, sans-IO: what to send and how to read nsqd's replies.

The guide's order (Connection Handling): the magic, IDENTIFY (read and check the
reply), then the upgrades the reply agrees to, each confirmed by an ``OK`` read
through the new layer (TLS, then snappy or deflate, as nsqd performs them), then
AUTH when the reply says ``auth_required``, then SUB. The trio connection and the
blocking client drive these functions over their own I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from ..wire import commands
from ..wire.errors import NSQError
from ..wire.frames import MAGIC_V2, OK, FrameType
from ..wire.peer_json import PeerJSONError, decode_peer_json
from .config import Config
from .errors import HandshakeError

__all__ = [
    "DEFAULT_MAX_RDY_COUNT",
    "AuthResult",
    "Negotiated",
    "auth_command",
    "check_ok",
    "check_subscribed",
    "opening_bytes",
    "parse_auth_response",
    "parse_identify_response",
]

#: The guide (RDY State): assume nsqd's hard-coded 2500 when it does not negotiate.
DEFAULT_MAX_RDY_COUNT = 2500


class _IdentifyReply(msgspec.Struct):
    """The fields of nsqd's IDENTIFY reply a client uses; absent or null ones are zero."""

    tls_v1: bool | None = None
    snappy: bool | None = None
    deflate: bool | None = None
    max_rdy_count: int | None = None
    version: str | None = None
    msg_timeout: int | None = None
    max_msg_timeout: int | None = None
    deflate_level: int | None = None
    sample_rate: int | None = None
    auth_required: bool | None = None


class _AuthReply(msgspec.Struct):
    identity: str | None = None
    identity_url: str | None = None
    permission_count: int | None = None


_identify_reply_decoder = msgspec.json.Decoder(_IdentifyReply)
_auth_reply_decoder = msgspec.json.Decoder(_AuthReply)

TLS = "tls"
SNAPPY = "snappy"
DEFLATE = "deflate"


@dataclass(frozen=True)
class Negotiated:
    """What nsqd agreed to in its IDENTIFY reply."""

    feature_negotiation: bool = False
    max_rdy_count: int = DEFAULT_MAX_RDY_COUNT
    version: str = ""
    msg_timeout: float | None = None
    max_msg_timeout: float | None = None
    tls: bool = False
    snappy: bool = False
    deflate: bool = False
    deflate_level: int = 0
    sample_rate: int = 0
    auth_required: bool = False

    @property
    def upgrades(self) -> list[str]:
        """The stream upgrades to perform, in nsqd's order."""
        out = []
        if self.tls:
            out.append(TLS)
        if self.snappy:
            out.append(SNAPPY)
        if self.deflate:
            out.append(DEFLATE)
        return out


@dataclass(frozen=True)
class AuthResult:
    """nsqd's reply to AUTH."""

    identity: str
    identity_url: str
    permission_count: int


def opening_bytes(config: Config) -> bytes:
    """The magic and the IDENTIFY command, sent together in one write."""
    return MAGIC_V2 + commands.identify(config.identify_request())


def _raise_for_error(frame_type: int, data: bytes, what: str) -> None:
    if frame_type == FrameType.ERROR:
        raise NSQError.from_frame_body(data)
    if frame_type != FrameType.RESPONSE:
        raise HandshakeError(f"unexpected frame type {frame_type} in reply to {what}")


def parse_identify_response(frame_type: int, data: bytes, config: Config) -> Negotiated:
    """Read nsqd's IDENTIFY reply; errors raise :class:`NSQError` or :class:`HandshakeError`.

    ``OK`` means an nsqd without feature negotiation: no upgrades, and the
    guide's default max RDY count.
    """
    _raise_for_error(frame_type, data, "IDENTIFY")
    if not data.startswith(b"{"):
        if data != OK:
            raise HandshakeError(f"unexpected IDENTIFY reply {data[:64]!r}")
        return Negotiated()
    try:
        reply = decode_peer_json(data, _identify_reply_decoder)
    except PeerJSONError as exc:
        raise HandshakeError(f"IDENTIFY reply is not usable: {data[:64]!r} - {exc}") from exc
    tls = bool(reply.tls_v1)
    snappy = bool(reply.snappy)
    deflate = bool(reply.deflate)
    if config.wants_tls and not tls:
        # go-nsq and pynsq would carry on in clear text; a client that asked for TLS
        # should not send its secrets unencrypted, so refuse instead.
        raise HandshakeError("TLS requested but nsqd did not agree to it")
    for name, agreed, asked in (
        ("tls_v1", tls, config.wants_tls),
        ("snappy", snappy, config.snappy),
        ("deflate", deflate, config.deflate),
    ):
        if agreed and not asked:
            raise HandshakeError(f"nsqd enabled {name}, which was not requested")
    if snappy and deflate:
        raise HandshakeError("nsqd enabled both snappy and deflate")
    msg_timeout = reply.msg_timeout
    max_msg_timeout = reply.max_msg_timeout
    return Negotiated(
        feature_negotiation=True,
        # a reply without the key comes from an nsqd older than max_rdy_count (0.2.20)
        max_rdy_count=reply.max_rdy_count or DEFAULT_MAX_RDY_COUNT,
        version=reply.version or "",
        msg_timeout=msg_timeout / 1000 if msg_timeout else None,
        max_msg_timeout=max_msg_timeout / 1000 if max_msg_timeout else None,
        tls=tls,
        snappy=snappy,
        deflate=deflate,
        deflate_level=reply.deflate_level or 0,
        sample_rate=reply.sample_rate or 0,
        auth_required=bool(reply.auth_required),
    )


def check_ok(frame_type: int, data: bytes, what: str) -> None:
    """The ``OK`` that confirms an upgrade or a SUB; anything else raises."""
    _raise_for_error(frame_type, data, what)
    if data != OK:
        raise HandshakeError(f"expected OK after {what}, got {data[:64]!r}")


def check_subscribed(frame_type: int, data: bytes) -> None:
    """The reply to SUB."""
    check_ok(frame_type, data, "SUB")


def auth_command(config: Config, negotiated: Negotiated) -> bytes | None:
    """AUTH when nsqd requires it (and only then: the protocol forbids it otherwise)."""
    if not negotiated.auth_required:
        return None
    if config.auth_secret is None:
        raise HandshakeError("nsqd requires AUTH but no auth_secret is configured")
    return commands.auth(config.auth_secret)


def parse_auth_response(frame_type: int, data: bytes) -> AuthResult:
    """nsqd's JSON reply to AUTH: ``{identity, identity_url, permission_count}``."""
    _raise_for_error(frame_type, data, "AUTH")
    try:
        reply = decode_peer_json(data, _auth_reply_decoder)
    except PeerJSONError as exc:
        raise HandshakeError(f"AUTH reply is not usable: {data[:64]!r} - {exc}") from exc
    return AuthResult(
        identity=reply.identity or "",
        identity_url=reply.identity_url or "",
        permission_count=reply.permission_count or 0,
    )
