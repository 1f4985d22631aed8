"""Limits and names: --max-msg-size and --max-body-size hold on TCP and HTTP, names are
checked wherever they enter, servers bind 127.0.0.1 unless told otherwise, and no
single command can take a server down."""

from __future__ import annotations

import random
import struct
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import trio
import trio.testing

from nsqbox.http import Request, Router, serve_http
from nsqbox.lookupd.options import LookupdOptions
from nsqbox.nsqd.diskqueue.queue import DiskQueue
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.nsqd.lookup import lookup_service
from nsqbox.nsqd.server import NSQDAddresses
from nsqbox.wire import commands
from nsqbox.wire import lookupd as v1
from nsqbox.wire.names import is_valid_topic_name
from tests.conftest import StartNSQD
from tests.helpers import RawConn, publish, wait_until
from tests.lookupd.lookupd_helpers import RunningLookupd, open_lookupd, open_v1
from tests.reliability.blocking import exchange
from tests.reliability.process import NSQDProcess
from tests.reliability.strategies import INT_MAX_STR_DIGITS, INVALID_NAMES

MAX_MSG = 1024
MAX_BODY = 4096
_INT32 = struct.Struct(">i")
TIMEOUT = 10.0


@pytest.fixture
async def limited(start_nsqd: StartNSQD) -> NSQDAddresses:
    return await start_nsqd(max_msg_size=MAX_MSG, max_body_size=MAX_BODY)


@pytest.fixture
async def http(limited: NSQDAddresses) -> AsyncIterator[httpx.AsyncClient]:
    assert limited.http is not None
    host, port = limited.http
    async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=TIMEOUT) as client:
        yield client


async def refused(address: tuple[str, int], data: bytes) -> bytes:
    """Send ``data``; the error frame nsqd answers with, once it has hung up."""
    conn = await RawConn.open(address)
    try:
        await conn.send(data)
        error = await conn.error()
        await conn.expect_closed()
    finally:
        await conn.aclose()
    return error


# -- --max-msg-size and --max-body-size on TCP ------------------------------------------


async def test_tcp_sizes_at_and_over_the_limits(limited: NSQDAddresses) -> None:
    at_limit = b"m" * MAX_MSG
    conn = await RawConn.open(limited.tcp)
    await conn.pub("t", at_limit)
    await conn.send(commands.dpub("t", 10, at_limit))
    assert await conn.response() == b"OK"
    batch = [b"m" * 1000] * 4  # 4 + 4 * 1004 = 4020 bytes <= 4096
    await conn.mpub("t", batch)
    await conn.aclose()

    over = b"m" * (MAX_MSG + 1)
    cases = [
        (commands.pub("t", over), b"E_BAD_MESSAGE PUB message too big 1025 > 1024"),
        (commands.dpub("t", 1, over), b"E_BAD_MESSAGE DPUB message too big 1025 > 1024"),
        (commands.mpub("t", [b"a", over]), b"E_BAD_MESSAGE MPUB message too big 1025 > 1024"),
        (commands.mpub("t", [b"m" * 1000] * 5), b"E_BAD_BODY MPUB body too big 5024 > 4096"),
        (
            b"IDENTIFY\n" + _INT32.pack(MAX_BODY + 1),
            b"E_BAD_BODY IDENTIFY body too big 4097 > 4096",
        ),
        (b"AUTH\n" + _INT32.pack(MAX_BODY + 1), b"E_BAD_BODY AUTH body too big 4097 > 4096"),
    ]
    for data, error in cases:
        assert await refused(limited.tcp, data) == error
    assert limited.nsqd.topics["t"].message_count == 6


async def test_mpub_cannot_exceed_max_body_size_by_understating_its_size(
    limited: NSQDAddresses,
) -> None:
    """nsqd only range-checks the declared size; nsqbox also counts what it reads."""
    messages = b"".join(_INT32.pack(1000) + b"m" * 1000 for _ in range(5))
    data = b"MPUB t\n" + _INT32.pack(100) + _INT32.pack(5) + messages
    assert await refused(limited.tcp, data) == b"E_BAD_BODY MPUB body too big 5024 > 4096"
    assert limited.nsqd.topics["t"].message_count == 0


# -- --max-msg-size and --max-body-size on HTTP ----------------------------------------------


def chunked(body: bytes) -> AsyncIterator[bytes]:
    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(body), 512):
            yield body[i : i + 512]

    return chunks()


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_http_sizes_at_and_over_the_limits(
    limited: NSQDAddresses, http: httpx.AsyncClient, framing: str
) -> None:
    def content(body: bytes) -> bytes | AsyncIterator[bytes]:
        return chunked(body) if framing == "chunked" else body

    async def answer(method: str, path: str, body: bytes) -> tuple[int, object]:
        response = await http.request(method, path, content=content(body))
        return response.status_code, response.json() if response.content else None

    ok = (200, None)
    assert (await http.post("/pub?topic=t", content=content(b"m" * MAX_MSG))).text == "OK"
    assert await answer("POST", "/pub?topic=t", b"m" * (MAX_MSG + 1)) == (
        413,
        {"message": "MSG_TOO_BIG"},
    )
    lines = b"\n".join([b"m" * 1000] * 4)
    assert (await http.post("/mpub?topic=t", content=content(lines))).text == "OK"
    assert await answer("POST", "/mpub?topic=t", b"m" * (MAX_BODY + 1)) == (
        413,
        {"message": "BODY_TOO_BIG"},
    )
    assert await answer("POST", "/mpub?topic=t", b"a\n" + b"m" * (MAX_MSG + 1)) == (
        413,
        {"message": "MSG_TOO_BIG"},
    )
    binary = _INT32.pack(2) + _INT32.pack(1) + b"a" + _INT32.pack(MAX_MSG + 1) + b"m" * 1025
    assert await answer("POST", "/mpub?topic=t&binary=true", binary) == (
        413,
        {"message": "BAD_MESSAGE"},
    )
    assert await answer("PUT", "/config/log_level", b"x" * (MAX_MSG + 1)) == (
        413,
        {"message": "INVALID_VALUE"},
    )
    assert await answer("POST", "/topic/create?topic=t", b"x" * (MAX_BODY + 1)) == (
        413,
        {"message": "BODY_TOO_BIG"},
    )
    assert await answer("POST", "/topic/create?topic=t", b"") == ok
    assert limited.nsqd.topics["t"].message_count == 5


async def test_http_refuses_an_endless_body_without_reading_it(limited: NSQDAddresses) -> None:
    """A chunked /pub that never ends is answered 413 as soon as it passes the limit."""
    assert limited.http is not None
    stream = await trio.open_tcp_stream(*limited.http)
    head = b"POST /pub?topic=t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunk = b"%x\r\n" % 512 + b"m" * 512 + b"\r\n"
    await stream.send_all(head + chunk * (MAX_MSG // 512 + 1))
    with trio.fail_after(TIMEOUT):
        reply = await stream.receive_some()
    assert reply.startswith(b"HTTP/1.1 413 ")
    assert reply.endswith(b'{"message":"MSG_TOO_BIG"}')
    await stream.aclose()


async def test_lookupd_http_body_limit() -> None:
    async with open_lookupd() as lookupd:
        response = await lookupd.http.post("/topic/create?topic=t", content=b"x" * (65 * 1024))
        assert (response.status_code, response.json()) == (413, {"message": "BODY_TOO_BIG"})


# -- a number too long for int() ------------------------------------------------------------


async def test_http_defer_with_a_huge_number_is_invalid(
    limited: NSQDAddresses, http: httpx.AsyncClient
) -> None:
    for digits in (20, 309, INT_MAX_STR_DIGITS, INT_MAX_STR_DIGITS + 1):
        response = await http.post(
            "/pub", params={"topic": "t", "defer": "9" * digits}, content=b"m"
        )
        assert (response.status_code, response.json()) == (400, {"message": "INVALID_DEFER"})
    response = await http.post("/pub", params={"topic": "t", "defer": "0" * 30 + "5"}, content=b"m")
    assert response.status_code == 200  # Go's ParseInt takes leading zeros


@pytest.mark.parametrize(
    ("command", "error"),
    [
        (b"SUB t c\nRDY " + b"9" * (INT_MAX_STR_DIGITS + 1) + b"\n", b"E_INVALID RDY count"),
        # the timeout wraps like a uint64 and is clamped; the message is not in flight
        (
            b"SUB t c\nREQ 0000000000000000 " + b"9" * (INT_MAX_STR_DIGITS + 1) + b"\n",
            b"E_REQ_FAILED REQ 0000000000000000 failed ID not in flight",
        ),
        (b"DPUB t " + b"9" * (INT_MAX_STR_DIGITS + 1) + b"\n", b"E_INVALID DPUB timeout"),
    ],
    ids=["RDY", "REQ", "DPUB"],
)
def test_a_long_number_does_not_kill_nsqd(tmp_path: Path, command: bytes, error: bytes) -> None:
    with NSQDProcess(tmp_path / "nsqd") as nsqd:
        received = exchange(nsqd.tcp, commands.MAGIC_V2 + command)
        nsqd.check_alive(command)
        assert error in received
        assert exchange(nsqd.tcp, commands.MAGIC_V2 + commands.pub("t", b"m")).endswith(b"OK")


async def test_body_cut_short_by_end_of_stream_gets_nsqds_error(limited: NSQDAddresses) -> None:
    conn = await RawConn.open(limited.tcp)
    try:
        await conn.send(b"PUB t\n" + _INT32.pack(5) + b"ab")
        await conn.stream.send_eof()
        assert await conn.error() == b"E_BAD_MESSAGE PUB failed to read message body"
    finally:
        await conn.aclose()


# -- names ----------------------------------------------------------------------------------

NSQD_NAME_ROUTES = [
    ("/pub", {"topic"}, b"m"),
    ("/mpub", {"topic"}, b"m"),
    ("/topic/create", {"topic"}, b""),
    ("/topic/delete", {"topic"}, b""),
    ("/topic/empty", {"topic"}, b""),
    ("/topic/pause", {"topic"}, b""),
    ("/topic/unpause", {"topic"}, b""),
    ("/channel/create", {"topic", "channel"}, b""),
    ("/channel/delete", {"topic", "channel"}, b""),
    ("/channel/empty", {"topic", "channel"}, b""),
    ("/channel/pause", {"topic", "channel"}, b""),
    ("/channel/unpause", {"topic", "channel"}, b""),
]


async def test_invalid_names_are_refused_everywhere_in_nsqd(
    limited: NSQDAddresses, http: httpx.AsyncClient
) -> None:
    await publish(limited.tcp, "t", b"m")
    limited.nsqd.get_topic("t").get_channel("c")
    for name in INVALID_NAMES:
        raw = name.encode()
        if b" " in raw or b"\n" in raw:
            continue
        for data in (
            commands.pub(name, b"m"),
            commands.dpub(name, 1, b"m"),
            commands.mpub(name, [b"m"]),
            b"SUB " + raw + b" c\n",
            b"SUB t " + raw + b"\n",
        ):
            error = await refused(limited.tcp, data)
            assert error.split(b" ")[0] in (b"E_BAD_TOPIC", b"E_BAD_CHANNEL", b"E_INVALID")
        for path, params, body in NSQD_NAME_ROUTES:
            for param in params:
                query = {"topic": "t", "channel": "c", param: name}
                response = await http.post(path, params=query, content=body)
                assert response.status_code in (400, 404), (path, query, response.text)
    assert limited.nsqd.topics["t"].message_count == 1
    assert sorted(limited.nsqd.topics) == ["t"]
    assert sorted(limited.nsqd.topics["t"].channels) == ["c"]


async def test_lookupd_refuses_invalid_names_and_the_wildcard() -> None:
    async with open_lookupd() as lookupd, open_v1(lookupd) as peer:
        assert (await peer.identify()).startswith(b"{")
        assert await peer.command(v1.encode_register("t", "c")) == b"OK"
        for path, params in (
            ("/topic/create", {"topic": "*"}),
            ("/channel/create", {"topic": "t", "channel": "*"}),
            ("/channel/create", {"topic": "../x", "channel": "c"}),
        ):
            response = await lookupd.http.post(path, params=params)
            assert response.status_code == 400, (path, params)
        # "*" is the registration DB's wildcard: it must match nothing, not everything
        assert (await lookupd.http.get("/lookup", params={"topic": "*"})).status_code == 404
        assert await lookupd.get("/channels", topic="*") == {"channels": []}
        await lookupd.http.post("/topic/tombstone", params={"topic": "*", "node": "10.0.0.1:4151"})
        await lookupd.http.post("/topic/delete", params={"topic": "*"})
        found = await lookupd.get("/lookup", topic="t")
        assert found["channels"] == ["c"]
        assert [p["broadcast_address"] for p in found["producers"]] == ["10.0.0.1"]
        nodes = await lookupd.get("/nodes")
        assert nodes["producers"][0]["tombstones"] == [False]
    async with open_lookupd() as lookupd, open_v1(lookupd) as peer:
        await peer.identify()
        assert (await peer.command(v1.encode_register("../x"))).startswith(b"E_BAD_TOPIC")


async def fake_lookupd_channels(
    nursery: trio.Nursery, lookupd: RunningLookupd, channels: list[str]
) -> None:
    """Make ``lookupd`` tell nsqds to ask a server of ours for a topic's channels."""
    router = Router()

    async def answer(request: Request) -> object:
        return {"channels": channels}

    router.add("GET", "/channels", answer)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(serve_http, router, listeners)
    lookupd.addresses.lookupd.http_port = listeners[0].socket.getsockname()[1]


async def test_nsqd_creates_no_invalid_channel_a_lookupd_names(
    nursery: trio.Nursery, start_nsqd: StartNSQD
) -> None:
    async with open_lookupd() as lookupd:
        # names that are invalid for NSQ but harmless as file names
        await fake_lookupd_channels(nursery, lookupd, ["ok", "*", "x" * 65, "bad!"])
        host, port = lookupd.addresses.tcp
        addrs = await start_nsqd(lookupd_tcp_addresses=[f"{host}:{port}"])
        service = lookup_service(addrs.nsqd)
        assert service is not None
        with trio.fail_after(TIMEOUT):
            await service.wait_synced()
        await publish(addrs.tcp, "t", b"m")
        await wait_until(lambda: addrs.nsqd.topics["t"].started)
        assert sorted(addrs.nsqd.topics["t"].channels) == ["ok"]


# -- where servers listen by default -----------------------------------------------------------


def test_servers_bind_loopback_by_default() -> None:
    nsqd = NSQDOptions()
    assert [nsqd.tcp_address, nsqd.http_address, nsqd.https_address] == [
        "127.0.0.1:4150",
        "127.0.0.1:4151",
        "127.0.0.1:4152",
    ]
    lookupd = LookupdOptions()
    assert [lookupd.tcp_address, lookupd.http_address] == ["127.0.0.1:4160", "127.0.0.1:4161"]


@pytest.mark.parametrize("command", ["nsqd", "lookupd", "up"])
def test_help_shows_loopback_defaults(command: str) -> None:
    usage = subprocess.run(
        [sys.executable, "-m", "nsqbox", command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    text = usage.stdout + usage.stderr
    assert '(default "127.0.0.1:41' in text
    assert "0.0.0.0" not in text
    assert "[::]" not in text


# -- the host's global random state ------------------------------------------------------------


async def test_nsqd_leaves_the_global_random_state_alone(start_nsqd: StartNSQD) -> None:
    """nsqbox runs inside test suites (hypothesis checks this) and applications."""
    addrs = await start_nsqd(queue_scan_interval=0.01)
    state = random.getstate()
    conn = await RawConn.open(addrs.tcp)
    await conn.identify(sample_rate=50, feature_negotiation=False)
    await conn.sub("t#ephemeral", "c#ephemeral", rdy=100)
    await publish(addrs.tcp, "t#ephemeral", *[b"m"] * 100)
    await trio.sleep(0.05)  # a few queue scans
    await wait_until(lambda: addrs.nsqd.topics["t#ephemeral"].message_count == 100)
    await conn.aclose()
    assert random.getstate() == state


def test_disk_queue_metadata_leaves_the_global_random_state_alone(tmp_path: Path) -> None:
    state = random.getstate()
    queue = DiskQueue("t", str(tmp_path), 1024 * 1024, 1, 1024, 1, 1.0)
    queue.put(b"m" * 30)
    queue.sync()  # writes the meta file through a temp file with a random name
    queue.close()
    assert random.getstate() == state
    assert (tmp_path / "t.diskqueue.meta.dat").exists()


async def test_persisting_metadata_leaves_the_global_random_state_alone(
    start_nsqd: StartNSQD,
) -> None:
    addrs = await start_nsqd()
    state = random.getstate()
    await publish(addrs.tcp, "durable", b"m")
    assert random.getstate() == state


def test_the_invalid_names_are_invalid() -> None:
    assert [n for n in INVALID_NAMES if is_valid_topic_name(n)] == []
