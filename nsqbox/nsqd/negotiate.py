"""IDENTIFY: a client's settings, feature negotiation and the transport upgrades that follow.

nsqd's ``IDENTIFY`` (nsqd/protocol_v2.go, ``clientV2.Identify`` in
client_v2.go) in two halves:

* :func:`identify` is synchronous: decode the body, check and apply the
  client's settings, decide which features to enable and build the reply.
* :func:`upgrade_transport` is the asynchronous rest: after the reply went out
  in the clear, stack TLS, then snappy or deflate on the connection, and
  confirm each layer with an ``OK`` frame sent *through* it, as nsqd does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import trio

from .. import NSQ_VERSION
from ..streams import DeflateStream, SnappyStream, upgrade_tls
from ..wire.errors import NSQError
from ..wire.frames import OK, FrameType, encode_frame
from ..wire.identify import (
    IdentifyRequest,
    IdentifyResponse,
    decode_identify,
    encode_identify_response,
)
from ..wire.peer_json import PeerJSONError

if TYPE_CHECKING:
    from .protocol_v2 import ClientV2

logger = logging.getLogger("nsqbox.nsqd")

#: nsqd gives the TLS handshake this long (``tlsConn.SetDeadline`` in UpgradeTLS).
TLS_HANDSHAKE_TIMEOUT: Final = 5.0
#: The deflate level nsqd uses when the client does not name one.
DEFAULT_DEFLATE_LEVEL: Final = 6

_OK_FRAME: Final = encode_frame(FrameType.RESPONSE, OK)


@dataclass(frozen=True, slots=True)
class Upgrades:
    """The layers IDENTIFY agreed to stack on the connection, in nsqd's order."""

    tls: bool = False
    snappy: bool = False
    deflate: bool = False
    deflate_level: int = DEFAULT_DEFLATE_LEVEL

    def __bool__(self) -> bool:
        return self.tls or self.snappy or self.deflate


def identify(client: ClientV2, body: bytes) -> tuple[bytes, Upgrades]:
    """Apply an IDENTIFY body to ``client``; the reply and the upgrades it promises.

    Raises nsqd's fatal ``E_BAD_BODY`` / ``E_IDENTIFY_FAILED`` errors.
    """
    try:
        data = decode_identify(body)
    except PeerJSONError:
        raise NSQError("E_BAD_BODY", "IDENTIFY failed to decode JSON body") from None
    client.client_id = data.client_id
    client.hostname = data.hostname
    client.user_agent = data.user_agent
    try:
        _apply_settings(client, data)
    except ValueError as err:
        raise NSQError("E_BAD_BODY", f"IDENTIFY {err}") from None
    if not data.feature_negotiation:
        return OK, Upgrades()

    opts = client.nsqd.options
    tls = client.tls_context is not None and data.tls_v1
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
        msg_timeout=round(client.msg_timeout * 1000),
        tls_v1=tls,
        deflate=deflate,
        deflate_level=level,
        max_deflate_level=opts.max_deflate_level,
        snappy=snappy,
        sample_rate=client.sample_rate,
        auth_required=bool(opts.auth_http_addresses),
        output_buffer_size=client.output_buffer_size,
        output_buffer_timeout=round(client.output_buffer_timeout * 1000),
    )
    return encode_identify_response(response), Upgrades(tls, snappy, deflate, level)


def _apply_settings(client: ClientV2, data: IdentifyRequest) -> None:
    """clientV2.Identify: check each setting in nsqd's order; ValueError names the bad one."""
    opts = client.nsqd.options
    heartbeat = data.heartbeat_interval
    if heartbeat == -1:
        client.heartbeat_interval = 0.0
    elif heartbeat == 0:
        pass
    elif 1000 <= heartbeat <= round(opts.max_heartbeat_interval * 1000):
        client.heartbeat_interval = heartbeat / 1000
    else:
        raise ValueError(f"heartbeat interval ({heartbeat}) is invalid")
    client.restart_heartbeat()

    buf_timeout = data.output_buffer_timeout
    if buf_timeout == -1:
        client.output_buffer_timeout = 0.0
    elif buf_timeout == 0:
        pass
    elif (
        round(opts.min_output_buffer_timeout * 1000)
        <= buf_timeout
        <= round(opts.max_output_buffer_timeout * 1000)
    ):
        client.output_buffer_timeout = buf_timeout / 1000
    else:
        raise ValueError(f"output buffer timeout ({buf_timeout}) is invalid")
    buf_size = data.output_buffer_size
    if buf_size == -1:
        client.output_buffer_size = 1
        client.output_buffer_timeout = 0.0
    elif buf_size == 0:
        pass
    elif 64 <= buf_size <= opts.max_output_buffer_size:
        client.output_buffer_size = buf_size
    else:
        raise ValueError(f"output buffer size ({buf_size}) is invalid")

    if not 0 <= data.sample_rate <= 99:
        raise ValueError(f"sample rate ({data.sample_rate}) is invalid")
    client.sample_rate = data.sample_rate

    msg_timeout = data.msg_timeout
    if msg_timeout == 0:
        pass
    elif 1000 <= msg_timeout <= round(opts.max_msg_timeout * 1000):
        client.msg_timeout = msg_timeout / 1000
    else:
        raise ValueError(f"msg timeout ({msg_timeout}) is invalid")


async def upgrade_transport(client: ClientV2, upgrades: Upgrades, initial: bytes) -> None:
    """Stack the agreed layers on ``client.stream``, each confirmed by an ``OK`` through it.

    The caller holds the connection's writer, so nothing else writes while the
    stream changes under it. ``initial`` is what the command parser had read
    beyond the IDENTIFY body: it belongs to the first new layer. Failures raise
    nsqd's fatal ``E_IDENTIFY_FAILED``; ``client.stream`` is then the last
    layer that worked, which is where nsqd sends that error.
    """
    try:
        if upgrades.tls:
            assert client.tls_context is not None
            logger.info("PROTOCOL(V2): [%s] upgrading connection to TLS", client)
            with trio.move_on_after(TLS_HANDSHAKE_TIMEOUT) as scope:
                tls = await upgrade_tls(
                    client.stream, client.tls_context, server_side=True, initial=initial
                )
            if scope.cancelled_caught:
                raise NSQError("E_IDENTIFY_FAILED", "IDENTIFY failed TLS handshake timeout")
            initial = b""
            client.stream = tls
            client.tls_info = tls
            client.tls = True
            await tls.send_all(_OK_FRAME)
        if upgrades.snappy:
            logger.info("PROTOCOL(V2): [%s] upgrading connection to snappy", client)
            client.stream = SnappyStream(client.stream, initial=initial)
            initial = b""
            client.snappy = True
            await client.stream.send_all(_OK_FRAME)
        if upgrades.deflate:
            level = upgrades.deflate_level
            logger.info(
                "PROTOCOL(V2): [%s] upgrading connection to deflate (level %d)", client, level
            )
            client.stream = DeflateStream(client.stream, level, initial=initial)
            client.deflate = True
            await client.stream.send_all(_OK_FRAME)
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        reason = exc.__cause__ or exc
        raise NSQError("E_IDENTIFY_FAILED", f"IDENTIFY failed {reason}") from exc
