"""The error frames of TLS, compression and AUTH: exact bytes, and the connection closes.

A companion to test_errors.py's table (same shape): nsqd v1.3.0's texts from
enforceTLSPolicy, IDENTIFY and CheckAuth (nsqd/protocol_v2.go). The errors
that need an auth server's answer are in test_auth.py.
"""

# ruff: noqa: E501  (a table of nsqd's exact error frames reads best one case per line)
from __future__ import annotations

from pathlib import Path

import pytest

from nsqbox.nsqd.domain.options import TLS_REQUIRED, TLS_REQUIRED_EXCEPT_HTTP
from nsqbox.wire import commands
from nsqbox.wire.frames import FrameType, encode_frame
from tests.conftest import StartNSQD
from tests.helpers import RawConn
from tests.nsqd.transport import make_certs, tls_options

IDENTIFY = commands.identify({"feature_negotiation": True})
# an auth server that is never asked: every case fails before a query
AUTH = {"auth_http_addresses": ["127.0.0.1:1"]}
TLS_ONLY = {"tls_required": TLS_REQUIRED_EXCEPT_HTTP}

# fmt: off
CASES = [
    # (id, server options, setup commands answered by a response, command, error frame text)
    (
        "identify-snappy-and-deflate",
        {},
        [],
        commands.identify({"feature_negotiation": True, "snappy": True, "deflate": True}),
        b"E_IDENTIFY_FAILED cannot enable both deflate and snappy compression",
    ),
    ("tls-sub", TLS_ONLY, [], b"SUB t c\n", b"E_INVALID cannot SUB in current state (TLS required)"),
    ("tls-pub", TLS_ONLY, [], commands.pub("t", b"x"), b"E_INVALID cannot PUB in current state (TLS required)"),
    ("tls-mpub", TLS_ONLY, [], commands.mpub("t", [b"x"]), b"E_INVALID cannot MPUB in current state (TLS required)"),
    ("tls-rdy", TLS_ONLY, [], b"RDY 1\n", b"E_INVALID cannot RDY in current state (TLS required)"),
    ("tls-nop", TLS_ONLY, [], b"NOP\n", b"E_INVALID cannot NOP in current state (TLS required)"),
    ("tls-auth", TLS_ONLY, [], b"AUTH\n", b"E_INVALID cannot AUTH in current state (TLS required)"),
    ("tls-unknown", TLS_ONLY, [], b"FOO\n", b"E_INVALID cannot FOO in current state (TLS required)"),
    ("tls-after-identify", {"tls_required": TLS_REQUIRED}, [IDENTIFY], b"CLS\n", b"E_INVALID cannot CLS in current state (TLS required)"),
    ("auth-first-sub", AUTH, [IDENTIFY], b"SUB t c\n", b"E_AUTH_FIRST AUTH required before SUB"),
    ("auth-first-pub", AUTH, [], commands.pub("t", b"x"), b"E_AUTH_FIRST AUTH required before PUB"),
    ("auth-first-mpub", AUTH, [], b"MPUB t\n", b"E_AUTH_FIRST AUTH required before MPUB"),
    ("auth-first-dpub", AUTH, [], commands.dpub("t", 1, b"x"), b"E_AUTH_FIRST AUTH required before DPUB"),
    ("auth-bad-topic-first", AUTH, [], b"SUB t! c\n", b'E_BAD_TOPIC SUB topic name "t!" is not valid'),
    ("auth-too-big", AUTH, [], b"AUTH\n" + (5 * 1024 * 1024 + 1).to_bytes(4, "big"), b"E_BAD_BODY AUTH body too big 5242881 > 5242880"),
]
# fmt: on


@pytest.mark.parametrize(
    ("options", "setup", "command", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
async def test_error_frame(
    start_nsqd: StartNSQD,
    tmp_path: Path,
    options: dict[str, object],
    setup: list[bytes],
    command: bytes,
    expected: bytes,
) -> None:
    if "tls_required" in options:
        options = {**tls_options(make_certs(tmp_path)), **options}
    nsqd = await start_nsqd(**options)
    conn = await RawConn.open(nsqd.tcp)
    for step in setup:
        await conn.send(step)
        await conn.response()
    await conn.send(command)
    await conn.expect_closed()
    assert conn.reader.take_buffered() == encode_frame(FrameType.ERROR, expected)
    await conn.aclose()
