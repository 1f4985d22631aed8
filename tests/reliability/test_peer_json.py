"""Every decoder of a peer's JSON, fed random and adversarial documents: only its error comes out.

The documents mix valid JSON shaped like the real ones (right keys, wrong types,
nulls, huge numbers), nesting far past Python's recursion limit and past Go's,
invalid UTF-8, and arbitrary bytes. Each decoder either returns a value or raises
the one error its protocol answers with; a RecursionError, UnicodeDecodeError,
TypeError or anything else escaping is a way for a peer to crash a server.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nsqbox.admin import stats
from nsqbox.client.config import Config
from nsqbox.client.discovery import parse_lookup_response
from nsqbox.client.errors import HandshakeError
from nsqbox.client.handshake import parse_auth_response, parse_identify_response
from nsqbox.nsqd import lookup, lookup_peer
from nsqbox.nsqd.routes import nsqd as http_api
from nsqbox.nsqd.tcp import auth
from nsqbox.wire.errors import NSQError
from nsqbox.wire.frames import FrameType
from nsqbox.wire.identify import decode_identify
from nsqbox.wire.lookupd import decode_identify_body
from nsqbox.wire.peer_json import MAX_DEPTH, PeerJSONError, decode_peer_json, prune_deep_json
from tests.reliability.figures import record, reliability_settings

EXAMPLES: Final = 200

#: Keys the real documents use, so that generated objects hit the typed fields.
KEYS: Final = [
    "heartbeat_interval", "output_buffer_size", "msg_timeout", "sample_rate", "tls_v1",
    "deflate", "deflate_level", "snappy", "feature_negotiation", "client_id", "user_agent",
    "broadcast_address", "hostname", "tcp_port", "http_port", "version", "ttl",
    "authorizations", "topic", "channels", "permissions", "identity", "identity_url",
    "https_port", "producers", "topics", "channel_name", "topic_name", "depth", "clients",
    "data", "max_rdy_count", "permission_count", "auth_required", "Heartbeat_Interval",
]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), inner, max_size=6),
    ),
    max_leaves=30,
)


def _encode(value: Any) -> bytes:
    return json.dumps(value).encode()


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    """One peer document: shaped JSON, damaged JSON, deep JSON or bytes."""
    kind = draw(st.sampled_from(["shaped", "deep", "invalid-utf8", "mutated", "bytes", "number"]))
    if kind == "shaped":
        return _encode(draw(st.dictionaries(st.sampled_from(KEYS), values, max_size=8)))
    if kind == "deep":
        levels = draw(st.sampled_from([900, 1000, 5000, MAX_DEPTH, MAX_DEPTH + 1, 20_000]))
        opener, closer = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
        key = draw(st.sampled_from(KEYS))
        inner = opener * levels + draw(st.sampled_from([b"1", b"", b"1,"])) + closer * levels
        return b'{"' + key.encode() + b'":' + inner + b"}"
    if kind == "invalid-utf8":
        text = _encode(draw(st.dictionaries(st.sampled_from(KEYS), st.text(max_size=5))))
        bad = draw(st.sampled_from([b"\xff", b"\xe2\x82", b"\xc0\xaf", b"\xed\xa0\x80"]))
        cut = draw(st.integers(0, len(text)))
        return text[:cut] + bad + text[cut:]
    if kind == "mutated":
        text = _encode(draw(st.dictionaries(st.sampled_from(KEYS), values, max_size=4)))
        cut = draw(st.integers(0, len(text)))
        return text[:cut] + draw(st.binary(max_size=4)) + text[cut + draw(st.integers(0, 3)) :]
    if kind == "number":
        number = draw(st.sampled_from([b"1e999", b"-0", b"1" * 5000, b"0.1e-400", b"01"]))
        return b'{"' + draw(st.sampled_from(KEYS)).encode() + b'":' + number + b"}"
    return draw(st.binary(max_size=200))


def _lookup_info(body: bytes) -> object:
    return decode_peer_json(body, lookup_peer.info_decoder)


def _lookup_channels(body: bytes) -> object:
    return decode_peer_json(body, lookup._channels_decoder)


def _config_addresses(body: bytes) -> object:
    return decode_peer_json(body, http_api._addresses_decoder)


def _identify_reply(body: bytes) -> object:
    return parse_identify_response(FrameType.RESPONSE, b"{" + body, Config())


#: Every decoder of a peer's JSON, and the errors its protocol answers with.
DECODERS: Final[dict[str, tuple[Callable[[bytes], object], tuple[type[Exception], ...]]]] = {
    "nsqd: client IDENTIFY": (decode_identify, (PeerJSONError,)),
    "nsqlookupd: nsqd IDENTIFY": (decode_identify_body, (NSQError,)),
    "nsqd: auth server reply": (lambda b: auth.parse_reply(b, 0.0), (auth.AuthError,)),
    "nsqd: lookupd IDENTIFY reply": (_lookup_info, (PeerJSONError,)),
    "nsqd: lookupd /channels": (_lookup_channels, (PeerJSONError,)),
    "nsqd: PUT /config body": (_config_addresses, (PeerJSONError,)),
    "admin: nsqd /stats": (lambda b: stats.decode_nsqd_stats(b, node="n"), (PeerJSONError,)),
    "admin: lookupd /nodes": (stats.decode_nodes, (PeerJSONError,)),
    "admin: lookupd /topics": (stats.decode_lookupd_topics, (PeerJSONError,)),
    "admin: lookupd /channels": (stats.decode_lookupd_channels, (PeerJSONError,)),
    "admin: nsqd /info": (stats.decode_node_info, (PeerJSONError,)),
    "client: lookupd /lookup": (parse_lookup_response, (PeerJSONError,)),
    "client: IDENTIFY reply": (_identify_reply, (HandshakeError,)),
    "client: AUTH reply": (lambda b: parse_auth_response(FrameType.RESPONSE, b), (HandshakeError,)),
}


@pytest.mark.parametrize("name", list(DECODERS))
def test_a_peer_document_gives_a_value_or_the_protocols_error(name: str) -> None:
    decode, allowed = DECODERS[name]

    @reliability_settings(EXAMPLES)
    @given(documents())
    def check(body: bytes) -> None:
        try:
            decode(body)
        except allowed:
            pass

    check()
    record("peer JSON decoders fuzzed", f"{len(DECODERS)}, {EXAMPLES} documents each")


def test_admin_request_bodies_give_a_value_or_400() -> None:
    from nsqbox.admin.routes import nsqadmin as api
    from nsqbox.http import HTTPError

    statuses: set[int] = set()

    @reliability_settings(EXAMPLES)
    @given(documents())
    def check(body: bytes) -> None:
        for decoder in (api._topic_channel_decoder, api._action_decoder):
            try:
                api._decode(body, decoder)
            except HTTPError as exc:
                statuses.add(exc.status)

    check()
    assert statuses == {400}


# -- the decoder's own promises -----------------------------------------------------------------


class _Fields(msgspec.Struct):
    n: int = 0
    s: str = ""


_fields = msgspec.json.Decoder(_Fields)


@reliability_settings(EXAMPLES)
@given(values)
def test_pruning_a_shallow_document_changes_nothing(value: Any) -> None:
    body = _encode(value)
    assert json.loads(prune_deep_json(body, 64)) == json.loads(body)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"s":"a\xffb"}', _Fields(s="a\ufffdb")),
        # Go replaces each byte of a cut-short sequence on its own
        (b'{"s":"\xe2\x82"}', _Fields(s="\ufffd\ufffd")),
        # the object is one level: Go's limit counts it
        (b'{"n":3,"x":' + b"[" * (MAX_DEPTH - 1) + b"]" * (MAX_DEPTH - 1) + b"}", _Fields(n=3)),
    ],
)
def test_decodes_as_go_does(body: bytes, expected: _Fields) -> None:
    assert decode_peer_json(body, _fields) == expected


@pytest.mark.parametrize(
    "body",
    [
        b'{"x":' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}",
        b'{"x":' + b"[" * 2000 + b"1,]" + b"]" * 1999 + b"}",
        b'{"x":' + b"[" * 2000 + b"]" * 1999 + b"}",
        b'{"x":' + b"[" * 2000 + b"]" * 2000 + b"} trailing",
        b'{"n":' + b"[" * 2000 + b"]" * 2000 + b"}",
        b"",
    ],
    ids=["deeper-than-go", "trailing-comma", "unclosed", "trailing-bytes", "wrong-type", "empty"],
)
def test_refuses_what_go_refuses(body: bytes) -> None:
    with pytest.raises(PeerJSONError):
        decode_peer_json(body, _fields)


def test_refuses_a_document_over_its_size_bound() -> None:
    with pytest.raises(PeerJSONError, match="larger than 10"):
        decode_peer_json(b'{"s":"0123456789"}', _fields, max_size=10)
