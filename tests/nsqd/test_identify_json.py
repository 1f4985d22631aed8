"""IDENTIFY bodies read as Go's encoding/json reads them, at nsqd and at nsqlookupd.

Real nsqd unmarshals IDENTIFY into a Go struct: keys match case-insensitively,
``null`` leaves a field alone, invalid UTF-8 in a string becomes U+FFFD, and a
number too big for the field's Go type is a decode error. nsqbox answers the same.
"""

from __future__ import annotations

import json
import struct

import httpx
import pytest

from tests.conftest import StartNSQD
from tests.helpers import RawConn
from tests.lookupd.lookupd_helpers import open_lookupd, open_v1

BAD_BODY = b"E_BAD_BODY IDENTIFY failed to decode JSON body"


def identify(body: bytes) -> bytes:
    return b"IDENTIFY\n" + struct.pack(">i", len(body)) + body


@pytest.mark.parametrize(
    ("body", "msg_timeout"),
    [
        pytest.param(b'{"Feature_Negotiation":true,"MSG_TIMEOUT":5000}', 5000, id="any-case"),
        pytest.param(b'{"feature_negotiation":true,"msg_timeout":null}', 60000, id="null-field"),
        pytest.param(
            b'{"feature_negotiation":true,"msg_timeout":1000,"Msg_Timeout":9000}',
            9000,
            id="the-later-key-wins",
        ),
    ],
)
async def test_identify_keys_and_nulls_as_go(
    start_nsqd: StartNSQD, body: bytes, msg_timeout: int
) -> None:
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp)
    await conn.send(identify(body))
    assert json.loads(await conn.response())["msg_timeout"] == msg_timeout
    await conn.aclose()


async def test_a_null_body_is_an_empty_identify(start_nsqd: StartNSQD) -> None:
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp)
    await conn.send(identify(b"null"))
    assert await conn.response() == b"OK"  # no feature negotiation asked
    await conn.aclose()


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"sample_rate":2147483648}', id="sample-rate-over-int32"),
        pytest.param(b'{"heartbeat_interval":9223372036854775808}', id="over-int64"),
        pytest.param(b'{"msg_timeout":1.5}', id="fraction-into-int"),
        pytest.param(b'{"tls_v1":"yes"}', id="string-into-bool"),
    ],
)
async def test_numbers_that_do_not_fit_fail_to_decode(start_nsqd: StartNSQD, body: bytes) -> None:
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp)
    await conn.send(identify(body))
    assert await conn.error() == BAD_BODY
    await conn.expect_closed()
    await conn.aclose()


async def test_invalid_utf8_in_a_string_becomes_replacement_characters(
    start_nsqd: StartNSQD,
) -> None:
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp)
    await conn.send(identify(b'{"client_id":"a\xffb","user_agent":"\xe2\x82"}'))
    assert await conn.response() == b"OK"
    await conn.sub("utf8", "ch")
    assert nsqd.http is not None
    async with httpx.AsyncClient() as http:
        stats = await http.get(
            "http://{}:{}/stats".format(*nsqd.http), params={"format": "json", "topic": "utf8"}
        )
    [client] = stats.json()["topics"][0]["channels"][0]["clients"]
    assert (client["client_id"], client["user_agent"]) == ("a\ufffdb", "\ufffd\ufffd")
    await conn.aclose()


async def test_lookupd_reads_identify_keys_in_any_case_and_nulls_as_absent() -> None:
    body = (
        b'{"BROADCAST_ADDRESS":"127.0.0.1","Hostname":null,"tcp_port":4150,'
        b'"HTTP_Port":4151,"version":"1.3.0"}'
    )
    async with open_lookupd() as lookupd, open_v1(lookupd) as peer:
        await peer.send(identify(body))
        assert (await peer.response()).startswith(b"{")
        [node] = (await lookupd.get("/nodes"))["producers"]
        assert (node["broadcast_address"], node["http_port"], node["hostname"]) == (
            "127.0.0.1",
            4151,
            "",
        )
