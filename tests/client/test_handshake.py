"""Config validation, the IDENTIFY body, and reading nsqd's handshake replies."""

from __future__ import annotations

import ssl

import msgspec
import pytest

from nsqbox.client.config import Config, format_address, parse_address
from nsqbox.client.errors import HandshakeError
from nsqbox.client.handshake import (
    DEFAULT_MAX_RDY_COUNT,
    auth_command,
    check_ok,
    opening_bytes,
    parse_auth_response,
    parse_identify_response,
)
from nsqbox.wire.errors import NSQError
from nsqbox.wire.frames import FrameType

RESPONSE, ERROR = FrameType.RESPONSE, FrameType.ERROR


def reply(**fields: object) -> bytes:
    base: dict[str, object] = {"max_rdy_count": 500, "version": "1.3.0", "msg_timeout": 60000}
    base.update(fields)
    return msgspec.json.encode(base)


def test_identify_body_carries_the_configuration() -> None:
    config = Config(
        client_id="c",
        hostname="h.example",
        user_agent="ua/1",
        heartbeat_interval=5.0,
        output_buffer_timeout=0,
        sample_rate=10,
        msg_timeout=30.0,
        deflate=True,
        deflate_level=3,
    )
    data = opening_bytes(config)
    assert data.startswith(b"  V2IDENTIFY\n")
    body = msgspec.json.decode(data[4 + 9 + 4 :])
    assert body == {
        "client_id": "c",
        "hostname": "h.example",
        "heartbeat_interval": 5000,
        "output_buffer_timeout": -1,
        "feature_negotiation": True,
        "deflate": True,
        "deflate_level": 3,
        "sample_rate": 10,
        "user_agent": "ua/1",
        "msg_timeout": 30000,
    }


def test_disabled_heartbeats_are_minus_one() -> None:
    assert Config(heartbeat_interval=0).identify_request().heartbeat_interval == -1
    assert Config(heartbeat_interval=None).identify_request().heartbeat_interval == 0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"snappy": True, "deflate": True}, "both"),
        ({"deflate_level": 10}, "deflate_level"),
        ({"sample_rate": 100}, "sample_rate"),
        ({"max_in_flight": -1}, "max_in_flight"),
        ({"lookupd_poll_jitter": 1.5}, "jitter"),
        ({"max_attempts": 70000}, "max_attempts"),
    ],
)
def test_config_validation(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Config(**fields)  # type: ignore[arg-type]


def test_tls_context() -> None:
    assert not Config().wants_tls
    assert isinstance(Config(tls=True).ssl_context(), ssl.SSLContext)
    ctx = ssl.create_default_context()
    assert Config(tls=ctx).ssl_context() is ctx


def test_requeue_delay_grows_with_attempts_up_to_the_cap() -> None:
    config = Config(requeue_delay=90.0, max_requeue_delay=200.0)
    assert [config.requeue_delay_for(n) for n in (1, 2, 3)] == [90.0, 180.0, 200.0]


@pytest.mark.parametrize(
    ("address", "parsed", "formatted"),
    [
        ("127.0.0.1:4150", ("127.0.0.1", 4150), "127.0.0.1:4150"),
        ("[::1]:4150", ("::1", 4150), "[::1]:4150"),
        (("host", 1), ("host", 1), "host:1"),
    ],
)
def test_addresses(address: str, parsed: tuple[str, int], formatted: str) -> None:
    assert parse_address(address) == parsed
    assert format_address(address) == formatted


@pytest.mark.parametrize("bad", ["host", ":4150", "host:port"])
def test_bad_addresses(bad: str) -> None:
    with pytest.raises(ValueError, match="host:port"):
        parse_address(bad)


def test_ok_reply_means_no_feature_negotiation() -> None:
    negotiated = parse_identify_response(RESPONSE, b"OK", Config())
    assert not negotiated.feature_negotiation
    assert negotiated.max_rdy_count == DEFAULT_MAX_RDY_COUNT == 2500
    assert negotiated.upgrades == []


def test_json_reply() -> None:
    negotiated = parse_identify_response(RESPONSE, reply(auth_required=True), Config())
    assert negotiated.max_rdy_count == 500
    assert negotiated.msg_timeout == 60.0
    assert negotiated.auth_required


def test_json_reply_without_max_rdy_count_assumes_2500() -> None:
    body = msgspec.json.encode({"version": "0.2.19"})
    assert parse_identify_response(RESPONSE, body, Config()).max_rdy_count == 2500


def test_upgrades_in_nsqds_order() -> None:
    config = Config(tls=True, snappy=True)
    negotiated = parse_identify_response(RESPONSE, reply(tls_v1=True, snappy=True), config)
    assert negotiated.upgrades == ["tls", "snappy"]


def test_refused_tls_is_an_error() -> None:
    with pytest.raises(HandshakeError, match="TLS"):
        parse_identify_response(RESPONSE, reply(tls_v1=False), Config(tls=True))


def test_unrequested_feature_is_an_error() -> None:
    with pytest.raises(HandshakeError, match="snappy"):
        parse_identify_response(RESPONSE, reply(snappy=True), Config())


def test_refused_compression_is_fine() -> None:
    assert parse_identify_response(RESPONSE, reply(), Config(snappy=True)).upgrades == []


def test_error_frame_raises_nsq_error() -> None:
    with pytest.raises(NSQError) as info:
        parse_identify_response(ERROR, b"E_BAD_BODY IDENTIFY heartbeat", Config())
    assert info.value.code == "E_BAD_BODY"
    assert info.value.fatal


@pytest.mark.parametrize("data", [b"nope", b"{bad json"])
def test_garbage_reply(data: bytes) -> None:
    with pytest.raises(HandshakeError):
        parse_identify_response(RESPONSE, data, Config())


def test_check_ok() -> None:
    check_ok(RESPONSE, b"OK", "snappy")
    with pytest.raises(HandshakeError, match="snappy"):
        check_ok(RESPONSE, b"KO", "snappy")
    with pytest.raises(HandshakeError, match="frame type"):
        check_ok(FrameType.MESSAGE, b"", "SUB")


def test_auth_only_when_required() -> None:
    required = parse_identify_response(RESPONSE, reply(auth_required=True), Config())
    assert auth_command(Config(auth_secret="s3"), required) == b"AUTH\n\x00\x00\x00\x02s3"
    not_required = parse_identify_response(RESPONSE, reply(), Config())
    assert auth_command(Config(auth_secret="s3"), not_required) is None
    with pytest.raises(HandshakeError, match="auth_secret"):
        auth_command(Config(), required)


def test_auth_reply() -> None:
    body = msgspec.json.encode({"identity": "me", "identity_url": "u", "permission_count": 2})
    result = parse_auth_response(RESPONSE, body)
    assert (result.identity, result.identity_url, result.permission_count) == ("me", "u", 2)
    with pytest.raises(NSQError, match="E_UNAUTHORIZED"):
        parse_auth_response(ERROR, b"E_UNAUTHORIZED AUTH no permissions")
    with pytest.raises(HandshakeError):
        parse_auth_response(RESPONSE, b"OK")
