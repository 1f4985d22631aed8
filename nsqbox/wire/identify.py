"""IDENTIFY: the client's JSON body and nsqd's feature-negotiation reply."""

from __future__ import annotations

from typing import Annotated

import msgspec

from .peer_json import decode_go_struct, decode_peer_json

#: Go's int (64-bit) and int32: a number outside fails to decode, as in encoding/json.
GoInt = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
GoInt32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]


class IdentifyRequest(msgspec.Struct, omit_defaults=True):
    """The IDENTIFY body (nsqd's identifyDataV2), read as Go's encoding/json reads it.

    Unknown keys are ignored, keys match case-insensitively and ``null`` means
    "not given" (:func:`~nsqbox.wire.peer_json.decode_go_struct`). Zero values
    mean "use the server's default"; ``-1`` disables heartbeats or output
    buffering where nsqd allows it.
    """

    client_id: str = ""
    hostname: str = ""
    heartbeat_interval: GoInt = 0
    output_buffer_size: GoInt = 0
    output_buffer_timeout: GoInt = 0
    feature_negotiation: bool = False
    tls_v1: bool = False
    deflate: bool = False
    deflate_level: GoInt = 0
    snappy: bool = False
    sample_rate: GoInt32 = 0
    user_agent: str = ""
    msg_timeout: GoInt = 0


class IdentifyResponse(msgspec.Struct):
    """nsqd's reply to IDENTIFY with feature_negotiation, keys in nsqd's order."""

    max_rdy_count: int
    version: str
    max_msg_timeout: int
    msg_timeout: int
    tls_v1: bool
    deflate: bool
    deflate_level: int
    max_deflate_level: int
    snappy: bool
    sample_rate: int
    auth_required: bool
    output_buffer_size: int
    output_buffer_timeout: int


_request_decoder = msgspec.json.Decoder(IdentifyRequest)
_response_decoder = msgspec.json.Decoder(IdentifyResponse)


def decode_identify(body: bytes) -> IdentifyRequest:
    """Parse an IDENTIFY body; :class:`~nsqbox.wire.peer_json.PeerJSONError` on bad JSON."""
    return decode_go_struct(body, _request_decoder)


def encode_identify_response(resp: IdentifyResponse) -> bytes:
    """The JSON nsqd sends back."""
    return msgspec.json.encode(resp)


def decode_identify_response(body: bytes) -> IdentifyResponse:
    """Client side: parse nsqd's feature-negotiation reply (PeerJSONError if unusable)."""
    return decode_peer_json(body, _response_decoder)
