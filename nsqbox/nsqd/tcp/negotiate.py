"""IDENTIFY: a client's settings, feature negotiation and the transport upgrades that follow.

nsqd's ``IDENTIFY`` (nsqd/protocol_v2.go, ``clientV2.Identify`` in
client_v2.go) in two halves:

* :func:`identify` is a pure function: from the body, the server's options
  and the client's current settings to its new settings, the reply and the
  upgrades to make. It changes nothing; the caller applies the settings.
* :func:`upgrade_transport` is the asynchronous rest: after the reply went out
  in the clear, stack TLS, then snappy or deflate on the connection, and
  confirm each layer with an ``OK`` frame sent *through* it, as nsqd does.
"""

from __future__ import annotations

import logging
import ssl
from typing import TYPE_CHECKING, Final

import msgspec
import trio

from ... import NSQ_VERSION
from ...net.streams import DeflateStream, SnappyStream, upgrade_tls
from ...wire.errors import NSQError
from ...wire.frames import OK, FrameType, encode_frame
from ...wire.identify import (
    IdentifyRequest,
    IdentifyResponse,
    decode_identify,
    encode_identify_response,
)
from ...wire.peer_json import PeerJSONError
from .client_state import ClientSettings
from .transport import Transport

if TYPE_CHECKING:
    from ..domain.options import NSQDOptions

logger = logging.getLogger("nsqbox.nsqd")

#: The deflate level nsqd uses when the client does not name one.
DEFAULT_DEFLATE_LEVEL: Final = 6

_OK_FRAME: Final = encode_frame(FrameType.RESPONSE, OK)


class Upgrades(msgspec.Struct, frozen=True):
    """The layers IDENTIFY agreed to stack on the connection, in nsqd's order."""

    tls: bool = False
    snappy: bool = False
    deflate: bool = False
    deflate_level: int = DEFAULT_DEFLATE_LEVEL
    #: The server's TLS context, when ``tls``.
    tls_context: ssl.SSLContext | None = None
    #: Seconds the TLS handshake may take (``NSQDOptions.tls_handshake_timeout``).
    tls_handshake_timeout: float = 5.0

    def __bool__(self) -> bool:
        return self.tls or self.snappy or self.deflate


def identify(
    body: bytes,
    options: NSQDOptions,
    current: ClientSettings,
    tls_context: ssl.SSLContext | None,
) -> tuple[ClientSettings, bytes, Upgrades]:
    """An IDENTIFY body: the client's new settings, the reply and the upgrades it promises.

    ``current`` is what the client has now; ``tls_context`` is offered to a client
    that asks for ``tls_v1`` (None: TLS not configured). Raises nsqd's fatal
    ``E_BAD_BODY`` / ``E_IDENTIFY_FAILED`` errors.
    """
    try:
        data = decode_identify(body)
    except PeerJSONError:
        raise NSQError("E_BAD_BODY", "IDENTIFY failed to decode JSON body") from None
    try:
        settings = _settings(current, data, options)
    except ValueError as err:
        raise NSQError("E_BAD_BODY", f"IDENTIFY {err}") from None
    if not data.feature_negotiation:
        return settings, OK, Upgrades()

    opts = options
    tls = tls_context is not None and data.tls_v1
    deflate = opts.deflate and data.deflate
    level = data.deflate_level if deflate and data.deflate_level > 0 else DEFAULT_DEFLATE_LEVEL
    level = min(level, opts.max_deflate_level)
    snappy = opts.snappy and data.snappy
    if deflate and snappy:
        raise NSQError("E_IDENTIFY_FAILED", "cannot enable both deflate and snappy compression")
    response = IdentifyResponse(
        max_rdy_count=opts.max_rdy_count,
        version=NSQ_VERSION,
        max_msg_timeout=round(opts.max_msg_timeout * 1000),
        msg_timeout=round(settings.msg_timeout * 1000),
        tls_v1=tls,
        deflate=deflate,
        deflate_level=level,
        max_deflate_level=opts.max_deflate_level,
        snappy=snappy,
        sample_rate=settings.sample_rate,
        auth_required=bool(opts.auth_http_addresses),
        output_buffer_size=settings.output_buffer_size,
        output_buffer_timeout=round(settings.output_buffer_timeout * 1000),
    )
    upgrades = Upgrades(
        tls,
        snappy,
        deflate,
        level,
        tls_context if tls else None,
        tls_handshake_timeout=options.tls_handshake_timeout,
    )
    return settings, encode_identify_response(response), upgrades


def _settings(current: ClientSettings, data: IdentifyRequest, opts: NSQDOptions) -> ClientSettings:
    """clientV2.Identify: check each setting in nsqd's order; ValueError names the bad one."""
    heartbeat_interval = current.heartbeat_interval
    heartbeat = data.heartbeat_interval
    if heartbeat == -1:
        heartbeat_interval = 0.0
    elif heartbeat == 0:
        pass
    elif 1000 <= heartbeat <= round(opts.max_heartbeat_interval * 1000):
        heartbeat_interval = heartbeat / 1000
    else:
        raise ValueError(f"heartbeat interval ({heartbeat}) is invalid")

    output_buffer_timeout = current.output_buffer_timeout
    buf_timeout = data.output_buffer_timeout
    if buf_timeout == -1:
        output_buffer_timeout = 0.0
    elif buf_timeout == 0:
        pass
    elif (
        round(opts.min_output_buffer_timeout * 1000)
        <= buf_timeout
        <= round(opts.max_output_buffer_timeout * 1000)
    ):
        output_buffer_timeout = buf_timeout / 1000
    else:
        raise ValueError(f"output buffer timeout ({buf_timeout}) is invalid")
    output_buffer_size = current.output_buffer_size
    buf_size = data.output_buffer_size
    if buf_size == -1:
        output_buffer_size = 1
        output_buffer_timeout = 0.0
    elif buf_size == 0:
        pass
    elif 64 <= buf_size <= opts.max_output_buffer_size:
        output_buffer_size = buf_size
    else:
        raise ValueError(f"output buffer size ({buf_size}) is invalid")

    if not 0 <= data.sample_rate <= 99:
        raise ValueError(f"sample rate ({data.sample_rate}) is invalid")

    msg_timeout = current.msg_timeout
    if data.msg_timeout == 0:
        pass
    elif 1000 <= data.msg_timeout <= round(opts.max_msg_timeout * 1000):
        msg_timeout = data.msg_timeout / 1000
    else:
        raise ValueError(f"msg timeout ({data.msg_timeout}) is invalid")
    return msgspec.structs.replace(
        current,
        client_id=data.client_id,
        hostname=data.hostname,
        user_agent=data.user_agent,
        heartbeat_interval=heartbeat_interval,
        output_buffer_size=output_buffer_size,
        output_buffer_timeout=output_buffer_timeout,
        sample_rate=data.sample_rate,
        msg_timeout=msg_timeout,
    )


def log_upgrades(peer: object, upgrades: Upgrades) -> None:
    """nsqd's log lines for the layers about to be stacked on ``peer``'s connection."""
    if upgrades.tls:
        logger.info("PROTOCOL(V2): [%s] upgrading connection to TLS", peer)
    if upgrades.snappy:
        logger.info("PROTOCOL(V2): [%s] upgrading connection to snappy", peer)
    if upgrades.deflate:
        level = upgrades.deflate_level
        logger.info("PROTOCOL(V2): [%s] upgrading connection to deflate (level %d)", peer, level)


async def upgrade_transport(transport: Transport, upgrades: Upgrades, initial: bytes) -> Transport:
    """Stack the agreed layers on ``transport``: the new transport.

    The TLS handshake happens here; the compression layers only wrap the stream.
    ``initial`` is what the command parser had read beyond the IDENTIFY body: it
    belongs to the first new layer. The caller holds the connection's writer, uses
    what this returns, then confirms each layer (:func:`confirm_upgrades`). A
    failure raises nsqd's fatal ``E_IDENTIFY_FAILED`` (the connection then still
    has the layers it had, which is where nsqd sends that error).
    """
    try:
        if upgrades.tls:
            assert upgrades.tls_context is not None
            with trio.move_on_after(upgrades.tls_handshake_timeout) as scope:
                tls = await upgrade_tls(
                    transport.stream, upgrades.tls_context, server_side=True, initial=initial
                )
            if scope.cancelled_caught:
                raise NSQError("E_IDENTIFY_FAILED", "IDENTIFY failed TLS handshake timeout")
            initial = b""
            transport = msgspec.structs.replace(transport, stream=tls, tls=tls)
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        raise _upgrade_failed(exc) from exc
    if upgrades.snappy:
        stream: trio.abc.Stream = SnappyStream(transport.stream, initial=initial)
        transport = msgspec.structs.replace(transport, stream=stream, snappy=True)
    elif upgrades.deflate:
        stream = DeflateStream(transport.stream, upgrades.deflate_level, initial=initial)
        transport = msgspec.structs.replace(transport, stream=stream, deflate=True)
    return transport


async def confirm_upgrades(transport: Transport) -> None:
    """An ``OK`` through each new layer of ``transport``, innermost first, as nsqd
    sends them (the client waits for each before it stacks the next)."""
    try:
        if transport.tls is not None:
            await transport.tls.send_all(_OK_FRAME)
        if transport.snappy or transport.deflate:
            await transport.stream.send_all(_OK_FRAME)
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        raise _upgrade_failed(exc) from exc


def _upgrade_failed(exc: Exception) -> NSQError:
    return NSQError("E_IDENTIFY_FAILED", f"IDENTIFY failed {exc.__cause__ or exc}")
