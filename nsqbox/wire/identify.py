"""IDENTIFY: the client's JSON body and nsqd's feature-negotiation reply."""

from __future__ import annotations

import msgspec

from .peer_json import decode_peer_json


class IdentifyRequest(msgspec.Struct, omit_defaults=True):
    """The IDENTIFY body (nsqd's identifyDataV2). Unknown keys are ignored, as in Go.

    Zero values mean "use the server's default"; ``-1`` disables heartbeats or
    output buffering where nsqd allows it.
    """

    client_id: str = ""
    hostname: str = ""
    heartbeat_interval: int = 0
    output_buffer_size: int = 0
    output_buffer_timeout: int = 0
    feature_negotiation: bool = False
    tls_v1: bool = False
    deflate: bool = False
    deflate_level: int = 0
    snappy: bool = False
    sample_rate: int = 0
    user_agent: str = ""
    msg_timeout: int = 0


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
    return decode_peer_json(body, _request_decoder)


def encode_identify_response(resp: IdentifyResponse) -> bytes:
    """The JSON nsqd sends back."""
    return msgspec.json.encode(resp)


def decode_identify_response(body: bytes) -> IdentifyResponse:
    """Client side: parse nsqd's feature-negotiation reply (PeerJSONError if unusable)."""
    return decode_peer_json(body, _response_decoder)
