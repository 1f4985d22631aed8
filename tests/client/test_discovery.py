"""Lookupd URLs and /lookup replies (sans-IO parts of discovery)."""

from __future__ import annotations

import random

import msgspec
import pytest

from nsqbox.client.discovery import initial_poll_delay, lookup_url, parse_lookup_response
from nsqbox.wire.peer_json import PeerJSONError


@pytest.mark.parametrize(
    ("address", "url"),
    [
        ("127.0.0.1:4161", "http://127.0.0.1:4161/lookup?topic=t"),
        ("http://host:4161", "http://host:4161/lookup?topic=t"),
        ("http://host:4161/", "http://host:4161/lookup?topic=t"),
        ("https://host:4161/custom?x=1", "https://host:4161/custom?x=1&topic=t"),
        ("http://host:4161/?topic=other", "http://host:4161/lookup?topic=t"),
    ],
)
def test_lookup_url(address: str, url: str) -> None:
    assert lookup_url(address, "t") == url


def test_lookup_url_needs_a_port() -> None:
    with pytest.raises(ValueError, match="port"):
        lookup_url("host", "t")


def producer(host: str, port: int, **extra: object) -> dict[str, object]:
    return {"broadcast_address": host, "hostname": "h", "tcp_port": port, "http_port": 1, **extra}


def test_bare_reply_gives_broadcast_address_and_tcp_port() -> None:
    body = msgspec.json.encode(
        {"channels": ["c"], "producers": [producer("10.0.0.1", 4150), producer("::1", 4152)]}
    )
    assert parse_lookup_response(body) == ["10.0.0.1:4150", "[::1]:4152"]


def test_wrapped_reply_of_old_lookupds() -> None:
    body = msgspec.json.encode(
        {"status_code": 200, "status_txt": "OK", "data": {"producers": [producer("a", 1)]}}
    )
    assert parse_lookup_response(body) == ["a:1"]


def test_pre_1_0_address_key() -> None:
    body = msgspec.json.encode({"producers": [{"address": "old", "tcp_port": 4150}]})
    assert parse_lookup_response(body) == ["old:4150"]


def test_bad_reply_raises() -> None:
    with pytest.raises(PeerJSONError):
        parse_lookup_response(b"not json")


def test_initial_delay_is_within_the_jitter() -> None:
    rng = random.Random(3)
    delays = [initial_poll_delay(60.0, 0.3, rng) for _ in range(100)]
    assert all(0 <= d < 18.0 for d in delays)
    assert initial_poll_delay(60.0, 0.0, rng) == 0.0
