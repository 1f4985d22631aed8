"""Every protocol V2 error: the exact frame bytes nsqd sends, and whether it hangs up.

Texts are nsqd v1.3.0's (nsqd/protocol_v2.go, nsqd/client_v2.go); clients'
own test suites compare them.
"""

from __future__ import annotations

import json
import struct

import pytest
import trio

from nsqbox.wire.frames import FrameType, encode_frame
from tests.conftest import StartNSQD
from tests.helpers import TIMEOUT, RawConn

SIZE = struct.Struct(">i")
ID = b"0000000000000000"


def body(data: bytes) -> bytes:
    return SIZE.pack(len(data)) + data


def identify(fields: dict[str, object]) -> bytes:
    return b"IDENTIFY\n" + body(json.dumps(fields).encode())


SUB = b"SUB t c\n"
# setup -> bytes sent (and an OK expected for each) before the offending command
SETUPS: dict[str, list[bytes]] = {
    "": [],
    "sub": [SUB],
    "hb_off": [identify({"heartbeat_interval": -1})],
}

CASES = [
    # (id, setup, command bytes, expected error text, connection closes)
    ("unknown", "", b"FOO\n", b"E_INVALID invalid command FOO", True),
    ("empty-line", "", b"\n", b"E_INVALID invalid command ", True),
    # nsqd echoes the name's raw bytes, whatever they are
    ("not-utf8", "", b"F\xffO\n", b"E_INVALID invalid command F\xffO", True),
    ("rdy-not-utf8", "sub", b"RDY \xff\n", b"E_INVALID RDY could not parse count \xff", True),
    (
        "identify-json",
        "",
        b"IDENTIFY\n" + body(b"{"),
        b"E_BAD_BODY IDENTIFY failed to decode JSON body",
        True,
    ),
    (
        "identify-type",
        "",
        identify({"heartbeat_interval": "x"}),
        b"E_BAD_BODY IDENTIFY failed to decode JSON body",
        True,
    ),
    (
        "identify-too-big",
        "",
        b"IDENTIFY\n" + SIZE.pack(4097),
        b"E_BAD_BODY IDENTIFY body too big 4097 > 4096",
        True,
    ),
    (
        "identify-size-0",
        "",
        b"IDENTIFY\n" + SIZE.pack(0),
        b"E_BAD_BODY IDENTIFY invalid body size 0",
        True,
    ),
    (
        "identify-heartbeat",
        "",
        identify({"heartbeat_interval": 100}),
        b"E_BAD_BODY IDENTIFY heartbeat interval (100) is invalid",
        True,
    ),
    (
        "identify-heartbeat-max",
        "",
        identify({"heartbeat_interval": 60001}),
        b"E_BAD_BODY IDENTIFY heartbeat interval (60001) is invalid",
        True,
    ),
    (
        "identify-buffer-size",
        "",
        identify({"output_buffer_size": 10}),
        b"E_BAD_BODY IDENTIFY output buffer size (10) is invalid",
        True,
    ),
    (
        "identify-buffer-timeout",
        "",
        identify({"output_buffer_timeout": 1}),
        b"E_BAD_BODY IDENTIFY output buffer timeout (1) is invalid",
        True,
    ),
    (
        "identify-sample-rate",
        "",
        identify({"sample_rate": 100}),
        b"E_BAD_BODY IDENTIFY sample rate (100) is invalid",
        True,
    ),
    (
        "identify-msg-timeout",
        "",
        identify({"msg_timeout": 500}),
        b"E_BAD_BODY IDENTIFY msg timeout (500) is invalid",
        True,
    ),
    (
        "identify-after-sub",
        "sub",
        identify({}),
        b"E_INVALID cannot IDENTIFY in current state",
        True,
    ),
    ("sub-heartbeats-off", "hb_off", SUB, b"E_INVALID cannot SUB with heartbeats disabled", True),
    ("sub-params", "", b"SUB t\n", b"E_INVALID SUB insufficient number of parameters", True),
    ("sub-topic", "", b"SUB a*b c\n", b'E_BAD_TOPIC SUB topic name "a*b" is not valid', True),
    (
        "sub-topic-long",
        "",
        b"SUB " + b"t" * 65 + b" c\n",
        b'E_BAD_TOPIC SUB topic name "' + b"t" * 65 + b'" is not valid',
        True,
    ),
    ("sub-channel", "", b"SUB t c!\n", b'E_BAD_CHANNEL SUB channel name "c!" is not valid', True),
    ("sub-twice", "sub", SUB, b"E_INVALID cannot SUB in current state", True),
    ("rdy-before-sub", "", b"RDY 1\n", b"E_INVALID cannot RDY in current state", True),
    ("rdy-parse", "sub", b"RDY x\n", b"E_INVALID RDY could not parse count x", True),
    ("rdy-negative", "sub", b"RDY -1\n", b"E_INVALID RDY could not parse count -1", True),
    ("rdy-range", "sub", b"RDY 2501\n", b"E_INVALID RDY count 2501 out of range 0-2500", True),
    ("fin-before-sub", "", b"FIN " + ID + b"\n", b"E_INVALID cannot FIN in current state", True),
    ("fin-params", "sub", b"FIN\n", b"E_INVALID FIN insufficient number of params", True),
    ("fin-bad-id", "sub", b"FIN abc\n", b"E_INVALID invalid message ID", True),
    (
        "fin-not-in-flight",
        "sub",
        b"FIN " + ID + b"\n",
        b"E_FIN_FAILED FIN " + ID + b" failed ID not in flight",
        False,
    ),
    ("req-before-sub", "", b"REQ " + ID + b" 0\n", b"E_INVALID cannot REQ in current state", True),
    (
        "req-params",
        "sub",
        b"REQ " + ID + b"\n",
        b"E_INVALID REQ insufficient number of params",
        True,
    ),
    ("req-bad-id", "sub", b"REQ 12 0\n", b"E_INVALID invalid message ID", True),
    (
        "req-timeout",
        "sub",
        b"REQ " + ID + b" x\n",
        b"E_INVALID REQ could not parse timeout x",
        True,
    ),
    (
        "req-not-in-flight",
        "sub",
        b"REQ " + ID + b" 0\n",
        b"E_REQ_FAILED REQ " + ID + b" failed ID not in flight",
        False,
    ),
    (
        "touch-before-sub",
        "",
        b"TOUCH " + ID + b"\n",
        b"E_INVALID cannot TOUCH in current state",
        True,
    ),
    ("touch-params", "sub", b"TOUCH\n", b"E_INVALID TOUCH insufficient number of params", True),
    (
        "touch-not-in-flight",
        "sub",
        b"TOUCH " + ID + b"\n",
        b"E_TOUCH_FAILED TOUCH " + ID + b" failed ID not in flight",
        False,
    ),
    ("cls-before-sub", "", b"CLS\n", b"E_INVALID cannot CLS in current state", True),
    ("pub-params", "", b"PUB\n", b"E_INVALID PUB insufficient number of parameters", True),
    ("pub-topic", "", b"PUB a*b\n", b'E_BAD_TOPIC PUB topic name "a*b" is not valid', True),
    (  # the body already there: one Pub event, the same check first
        "pub-topic-whole",
        "",
        b"PUB a*b\n" + SIZE.pack(1) + b"x",
        b'E_BAD_TOPIC PUB topic name "a*b" is not valid',
        True,
    ),
    (  # a body already there but too big: not a Pub, the generic way
        "pub-too-big-whole",
        "",
        b"PUB t\n" + SIZE.pack(1025) + b"x" * 1025,
        b"E_BAD_MESSAGE PUB message too big 1025 > 1024",
        True,
    ),
    (
        "pub-topic-quote",
        "",
        b'PUB a"\x01\n',
        b'E_BAD_TOPIC PUB topic name "a\\"\\x01" is not valid',
        True,
    ),
    (
        "pub-size-0",
        "",
        b"PUB t\n" + SIZE.pack(0),
        b"E_BAD_MESSAGE PUB invalid message body size 0",
        True,
    ),
    (
        "pub-size-negative",
        "",
        b"PUB t\n" + SIZE.pack(-5),
        b"E_BAD_MESSAGE PUB invalid message body size -5",
        True,
    ),
    (
        "pub-too-big",
        "",
        b"PUB t\n" + SIZE.pack(1025),
        b"E_BAD_MESSAGE PUB message too big 1025 > 1024",
        True,
    ),
    ("mpub-params", "", b"MPUB\n", b"E_INVALID MPUB insufficient number of parameters", True),
    (
        "mpub-topic",
        "",
        b"MPUB a*b\n",
        b'E_BAD_TOPIC E_BAD_TOPIC MPUB topic name "a*b" is not valid',
        True,
    ),
    ("mpub-size-0", "", b"MPUB t\n" + SIZE.pack(0), b"E_BAD_BODY MPUB invalid body size 0", True),
    (
        "mpub-too-big",
        "",
        b"MPUB t\n" + SIZE.pack(4097),
        b"E_BAD_BODY MPUB body too big 4097 > 4096",
        True,
    ),
    (
        "mpub-count-0",
        "",
        b"MPUB t\n" + SIZE.pack(8) + SIZE.pack(0),
        b"E_BAD_BODY MPUB invalid message count 0",
        True,
    ),
    (
        "mpub-count-max",
        "",
        b"MPUB t\n" + SIZE.pack(8) + SIZE.pack(819),
        b"E_BAD_BODY MPUB invalid message count 819",
        True,
    ),
    (
        "mpub-msg-size-0",
        "",
        b"MPUB t\n" + SIZE.pack(8) + SIZE.pack(1) + SIZE.pack(0),
        b"E_BAD_MESSAGE MPUB invalid message(0) body size 0",
        True,
    ),
    (
        "mpub-msg-2-size",
        "",
        b"MPUB t\n" + SIZE.pack(20) + SIZE.pack(2) + body(b"a") + SIZE.pack(-1),
        b"E_BAD_MESSAGE MPUB invalid message(1) body size -1",
        True,
    ),
    (
        "mpub-msg-too-big",
        "",
        b"MPUB t\n" + SIZE.pack(2000) + SIZE.pack(1) + SIZE.pack(1025),
        b"E_BAD_MESSAGE MPUB message too big 1025 > 1024",
        True,
    ),
    ("dpub-params", "", b"DPUB t\n", b"E_INVALID DPUB insufficient number of parameters", True),
    ("dpub-topic", "", b"DPUB a*b 10\n", b'E_BAD_TOPIC DPUB topic name "a*b" is not valid', True),
    ("dpub-timeout-parse", "", b"DPUB t x\n", b"E_INVALID DPUB could not parse timeout x", True),
    (
        "dpub-timeout-range",
        "",
        b"DPUB t 3600001\n",
        b"E_INVALID DPUB timeout 3600001 out of range 0-3600000",
        True,
    ),
    (
        "dpub-size-0",
        "",
        b"DPUB t 10\n" + SIZE.pack(0),
        b"E_BAD_MESSAGE DPUB invalid message body size 0",
        True,
    ),
    (
        "dpub-too-big",
        "",
        b"DPUB t 10\n" + SIZE.pack(1025),
        b"E_BAD_MESSAGE DPUB message too big 1025 > 1024",
        True,
    ),
    ("auth-params", "", b"AUTH x\n", b"E_INVALID AUTH invalid number of parameters", True),
    ("auth-after-sub", "sub", b"AUTH\n", b"E_INVALID cannot AUTH in current state", True),
    ("auth-disabled", "", b"AUTH\n" + body(b"secret"), b"E_AUTH_DISABLED AUTH disabled", True),
]


@pytest.mark.parametrize(
    ("setup", "command", "expected", "closes"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
async def test_error_frame(
    start_nsqd: StartNSQD, setup: str, command: bytes, expected: bytes, closes: bool
) -> None:
    nsqd = await start_nsqd(max_msg_size=1024, max_body_size=4096)
    conn = await RawConn.open(nsqd.tcp)
    for step in SETUPS[setup]:
        await conn.send(step)
        assert await conn.response() == b"OK"
    await conn.send(command)
    frame = encode_frame(FrameType.ERROR, expected)
    if closes:
        await conn.expect_closed()
        got_all = conn.reader.take_buffered()
        assert got_all == frame, (got_all, frame)
    else:
        with trio.fail_after(TIMEOUT):
            got = b""
            while len(got) < len(frame):
                got += await conn.stream.receive_some(len(frame) - len(got))
        assert got == frame
        # the connection is still usable
        await conn.send(b"NOP\nRDY 1\n")
        await conn.send(b"CLS\n")
        assert await conn.response() == b"CLOSE_WAIT"
    await conn.aclose()


async def test_bad_magic(start_nsqd: StartNSQD, caplog: pytest.LogCaptureFixture) -> None:
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp, magic=b"  V1")
    await conn.expect_closed()
    assert conn.reader.take_buffered() == encode_frame(FrameType.ERROR, b"E_BAD_PROTOCOL")
    host, port = conn.stream.socket.getsockname()[:2]
    await conn.aclose()
    # logged as nsqd does: the client's host:port (not a Python tuple), the magic escaped
    logged = [r.getMessage() for r in caplog.records if "bad protocol magic" in r.getMessage()]
    assert logged == [f"client({host}:{port}) bad protocol magic b'  V1'"]


async def test_fin_not_owned(start_nsqd: StartNSQD) -> None:
    nsqd = await start_nsqd()
    a = await RawConn.open(nsqd.tcp)
    await a.sub("t", "c", rdy=1)
    b = await RawConn.open(nsqd.tcp)
    await b.sub("t", "c")
    await b.pub("t", b"x")
    msg = await a.message()
    await b.send(b"FIN " + msg.id + b"\n")
    assert await b.error() == b"E_FIN_FAILED FIN " + msg.id + b" failed client does not own message"
    await a.send(b"FIN " + msg.id + b"\n")
    await a.send(b"CLS\n")
    assert await a.response() == b"CLOSE_WAIT"
    await a.aclose()
    await b.aclose()


async def test_line_too_long_closes_without_frame(start_nsqd: StartNSQD) -> None:
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp)
    await conn.send(b"X" * (16 * 1024 + 1))
    await conn.expect_closed()
    assert conn.reader.take_buffered() == b""
    await conn.aclose()
