"""nsqd's HTTP API over real sockets with httpx: every route, every error (nsqd/http.go)."""

from __future__ import annotations

import logging
import struct
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import trio

from nsqbox.http import serve_http
from nsqbox.nsqd.domain.options import TLS_REQUIRED
from nsqbox.nsqd.routes.nsqd import make_app
from tests.helpers import RawConn
from tests.http.nsqd_app import TIMEOUT, NSQDWithHTTP, start_nsqd_http

NSQ_HEADER = ("x-nsq-content-type", "nsq; version=1.0")


@pytest.fixture
async def server(nursery: trio.Nursery, tmp_path: Path) -> NSQDWithHTTP:
    return await start_nsqd_http(nursery, tmp_path, max_msg_size=100, max_body_size=1000)


@pytest.fixture
async def client(server: NSQDWithHTTP) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url) as http:
        with trio.fail_after(TIMEOUT):
            yield http


def assert_error(response: httpx.Response, status: int, message: str) -> None:
    assert (response.status_code, response.json()) == (status, {"message": message})
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    assert response.headers[NSQ_HEADER[0]] == NSQ_HEADER[1]


def assert_ok_empty(response: httpx.Response) -> None:
    assert (response.status_code, response.content) == (200, b"")
    assert response.headers[NSQ_HEADER[0]] == NSQ_HEADER[1]


def binary_mpub(bodies: list[bytes], count: int | None = None) -> bytes:
    out = struct.pack(">i", len(bodies) if count is None else count)
    return out + b"".join(struct.pack(">i", len(b)) + b for b in bodies)


# -- /ping, /info, errors ------------------------------------------------------


async def test_ping(server: NSQDWithHTTP, client: httpx.AsyncClient) -> None:
    ok = await client.get("/ping")
    assert (ok.status_code, ok.text) == (200, "OK")
    assert NSQ_HEADER[0] not in ok.headers  # nsqd's PlainText decorator
    server.nsqd.set_health("disk full")
    sick = await client.get("/ping")
    assert (sick.status_code, sick.text) == (500, "NOK - disk full")


async def test_info(server: NSQDWithHTTP, client: httpx.AsyncClient) -> None:
    response = await client.get("/info")
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    info = response.json()
    assert info == {
        "version": "1.3.0",
        "broadcast_address": "127.0.0.1",
        "hostname": server.nsqd.hostname,
        "http_port": server.nsqd.http_port,
        "tcp_port": server.tcp[1],
        "start_time": int(server.nsqd.start_time),
        "max_heartbeat_interval": 60_000_000_000,
        "max_output_buffer_size": 65536,
        "max_output_buffer_timeout": 30_000_000_000,
        "max_deflate_level": 6,
    }


async def test_unknown_route_and_wrong_method(client: httpx.AsyncClient) -> None:
    # TestHTTPerrors, byte for byte.
    wrong = await client.post("/stats")
    assert (wrong.status_code, wrong.content) == (405, b'{"message":"METHOD_NOT_ALLOWED"}')
    missing = await client.get("/not_found")
    assert (missing.status_code, missing.content) == (404, b'{"message":"NOT_FOUND"}')
    assert_error(await client.get("/pub"), 405, "METHOD_NOT_ALLOWED")


async def test_malformed_query_is_invalid_request(client: httpx.AsyncClient) -> None:
    for path in ("/pub", "/mpub", "/topic/create", "/channel/create", "/topic/pause"):
        assert_error(await client.post(path + "?topic=%zz", content=b"x"), 400, "INVALID_REQUEST")
    assert_error(await client.get("/stats?topic=a;b"), 400, "INVALID_REQUEST")


async def test_tls_required_refuses_plain_http(nursery: trio.Nursery, tmp_path: Path) -> None:
    server = await start_nsqd_http(nursery, tmp_path, tls_required=TLS_REQUIRED)
    server.nsqd.https_port = 4152
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(serve_http, make_app(server.nsqd), listeners)
    port = listeners[0].socket.getsockname()[1]
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            for response in (
                await http.get("/ping"),
                await http.post("/pub?topic=t", content=b"x"),
            ):
                assert response.status_code == 403
                assert response.content == b'{"message": "TLS_REQUIRED", "https_port": 4152}'
    assert "t" not in server.nsqd.topics


# -- /pub ---------------------------------------------------------------------


async def test_pub(server: NSQDWithHTTP, client: httpx.AsyncClient) -> None:
    response = await client.post("/pub?topic=t", content=b"hello")
    assert (response.status_code, response.text) == (200, "OK")
    topic = server.nsqd.topics["t"]
    assert (topic.message_count, topic.message_bytes, topic.depth()) == (1, 5, 1)
    alias = await client.post("/put?topic=t", content=b"again")
    assert alias.text == "OK"
    assert topic.message_count == 2


async def test_pub_defer(server: NSQDWithHTTP, client: httpx.AsyncClient) -> None:
    server.nsqd.get_topic("t").get_channel("c")
    response = await client.post("/pub?topic=t&defer=10000", content=b"later")
    assert response.text == "OK"
    channel = server.nsqd.topics["t"].channels["c"]
    assert (channel.deferred_count(), channel.depth()) == (1, 0)


@pytest.mark.parametrize(
    ("query", "body", "status", "message"),
    [
        pytest.param("topic=t", b"", 400, "MSG_EMPTY", id="empty"),
        pytest.param("topic=t", b"x" * 101, 413, "MSG_TOO_BIG", id="too-big"),
        pytest.param("", b"x", 400, "MISSING_ARG_TOPIC", id="no-topic"),
        pytest.param("topic=", b"x", 400, "INVALID_TOPIC", id="empty-topic"),
        pytest.param("topic=a%20b", b"x", 400, "INVALID_TOPIC", id="bad-topic"),
        pytest.param("topic=t&defer=soon", b"x", 400, "INVALID_DEFER", id="defer-text"),
        pytest.param("topic=t&defer=-1", b"x", 400, "INVALID_DEFER", id="defer-negative"),
        pytest.param("topic=t&defer=3600001", b"x", 400, "INVALID_DEFER", id="defer-too-long"),
    ],
)
async def test_pub_errors(
    client: httpx.AsyncClient, query: str, body: bytes, status: int, message: str
) -> None:
    assert_error(await client.post("/pub?" + query, content=body), status, message)


async def test_pub_exactly_max_msg_size_and_chunked_too_big(
    server: NSQDWithHTTP, client: httpx.AsyncClient
) -> None:
    assert (await client.post("/pub?topic=t", content=b"x" * 100)).text == "OK"

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(3):
            yield b"y" * 40

    assert_error(await client.post("/pub?topic=t", content=chunks()), 413, "MSG_TOO_BIG")
    assert server.nsqd.topics["t"].message_count == 1


async def test_pub_while_exiting(server: NSQDWithHTTP, client: httpx.AsyncClient) -> None:
    server.nsqd.exiting = True
    assert_error(await client.post("/pub?topic=t", content=b"x"), 503, "EXITING")
    assert_error(await client.post("/mpub?topic=t", content=b"x\ny"), 503, "EXITING")


# -- /mpub --------------------------------------------------------------------


async def test_mpub_text_drops_empty_lines(server: NSQDWithHTTP, client: httpx.AsyncClient) -> None:
    response = await client.post("/mpub?topic=t", content=b"one\n\ntwo\nthree\n\n")
    assert response.text == "OK"
    topic = server.nsqd.topics["t"]
    assert (topic.message_count, topic.message_bytes) == (3, 11)
    # Only empty lines: nothing to publish, still OK (TestHTTPmpubEmpty).
    assert (await client.post("/mpub?topic=t", content=b"\n\n")).text == "OK"
    assert topic.message_count == 3


async def test_mpub_binary(server: NSQDWithHTTP, client: httpx.AsyncClient) -> None:
    bodies = [b"a\nb", b"\x00\x01", b"c" * 100]
    for flag in ("true", "1", "yes-please"):  # an unknown value means binary, as in nsqd
        response = await client.post(f"/mpub?topic=t&binary={flag}", content=binary_mpub(bodies))
        assert response.text == "OK"
    topic = server.nsqd.topics["t"]
    assert (topic.message_count, topic.message_bytes) == (9, 3 * 105)
    text = await client.post("/mpub?topic=t&binary=false", content=b"x\ny")
    assert text.text == "OK"
    assert topic.message_count == 11


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(b"\x00\x00", "BAD_BODY", id="short"),
        pytest.param(struct.pack(">i", 0), "BAD_BODY", id="zero-count"),
        pytest.param(struct.pack(">i", 200), "BAD_BODY", id="count-too-high"),
        pytest.param(binary_mpub([b"a"], count=2), "BAD_MESSAGE", id="missing-message"),
        pytest.param(binary_mpub([b""]), "BAD_MESSAGE", id="empty-message"),
        pytest.param(binary_mpub([b"x" * 101]), "BAD_MESSAGE", id="message-too-big"),
        pytest.param(binary_mpub([b"abc"])[:-1], "BAD_MESSAGE", id="truncated"),
    ],
)
async def test_mpub_binary_errors(client: httpx.AsyncClient, body: bytes, message: str) -> None:
    assert_error(await client.post("/mpub?topic=t&binary=true", content=body), 413, message)


async def test_mpub_errors(client: httpx.AsyncClient) -> None:
    assert_error(await client.post("/mpub?topic=t", content=b"x" * 1001), 413, "BODY_TOO_BIG")
    line = b"ok\n" + b"x" * 101 + b"\n"
    assert_error(await client.post("/mpub?topic=t", content=line), 413, "MSG_TOO_BIG")
    assert_error(await client.post("/mpub", content=b"x"), 400, "MISSING_ARG_TOPIC")
    assert_error(await client.post("/mpub?topic=!", content=b"x"), 400, "INVALID_TOPIC")


# -- topics -------------------------------------------------------------------


async def test_topic_create_delete(server: NSQDWithHTTP, client: httpx.AsyncClient) -> None:
    assert_ok_empty(await client.post("/topic/create?topic=t"))
    assert "t" in server.nsqd.topics
    assert_error(await client.post("/topic/create"), 400, "MISSING_ARG_TOPIC")
    assert_error(await client.post("/topic/create?topic=a/b"), 400, "INVALID_TOPIC")
    assert_ok_empty(await client.post("/topic/delete?topic=t"))
    assert "t" not in server.nsqd.topics
    assert_error(await client.post("/topic/delete?topic=t"), 404, "TOPIC_NOT_FOUND")
    assert_error(await client.post("/topic/delete"), 400, "MISSING_ARG_TOPIC")


async def test_topic_empty(server: NSQDWithHTTP, client: httpx.AsyncClient) -> None:
    await client.post("/mpub?topic=t", content=b"a\nb")
    assert server.nsqd.topics["t"].depth() == 2
    assert_ok_empty(await client.post("/topic/empty?topic=t"))
    assert server.nsqd.topics["t"].depth() == 0
    assert_error(await client.post("/topic/empty"), 400, "MISSING_ARG_TOPIC")
    assert_error(await client.post("/topic/empty?topic=a%24"), 400, "INVALID_TOPIC")
    assert_error(await client.post("/topic/empty?topic=nope"), 404, "TOPIC_NOT_FOUND")


async def test_topic_pause_unpause(server: NSQDWithHTTP, client: httpx.AsyncClient) -> None:
    await client.post("/topic/create?topic=t")
    assert_ok_empty(await client.post("/topic/pause?topic=t"))
    assert server.nsqd.topics["t"].paused
    assert_ok_empty(await client.post("/topic/unpause?topic=t"))
    assert not server.nsqd.topics["t"].paused
    for action in ("pause", "unpause"):
        assert_error(await client.post(f"/topic/{action}"), 400, "MISSING_ARG_TOPIC")
        assert_error(await client.post(f"/topic/{action}?topic=x"), 404, "TOPIC_NOT_FOUND")


# -- channels -----------------------------------------------------------------


@pytest.mark.parametrize("action", ["create", "delete", "empty", "pause", "unpause"])
async def test_channel_argument_errors(
    server: NSQDWithHTTP, client: httpx.AsyncClient, action: str
) -> None:
    server.nsqd.get_topic("t")
    url = f"/channel/{action}"
    assert_error(await client.post(url), 400, "MISSING_ARG_TOPIC")
    assert_error(await client.post(url + "?topic=a%2Cb"), 400, "INVALID_ARG_TOPIC")
    assert_error(await client.post(url + "?topic=t"), 400, "MISSING_ARG_CHANNEL")
    assert_error(await client.post(url + "?topic=t&channel=c%2A"), 400, "INVALID_ARG_CHANNEL")
    assert_error(await client.post(url + "?topic=none&channel=c"), 404, "TOPIC_NOT_FOUND")
    if action != "create":
        assert_error(await client.post(url + "?topic=t&channel=c"), 404, "CHANNEL_NOT_FOUND")


async def test_channel_lifecycle(server: NSQDWithHTTP, client: httpx.AsyncClient) -> None:
    await client.post("/topic/create?topic=t")
    topic = server.nsqd.topics["t"]
    assert_ok_empty(await client.post("/channel/create?topic=t&channel=c"))
    channel = topic.channels["c"]
    await client.post("/mpub?topic=t", content=b"a\nb\nc")
    assert channel.depth() == 3
    assert_ok_empty(await client.post("/channel/pause?topic=t&channel=c"))
    assert channel.paused
    assert_ok_empty(await client.post("/channel/unpause?topic=t&channel=c"))
    assert not channel.paused
    assert_ok_empty(await client.post("/channel/empty?topic=t&channel=c"))
    assert channel.depth() == 0
    assert_ok_empty(await client.post("/channel/delete?topic=t&channel=c"))
    assert "c" not in topic.channels


# -- /config ------------------------------------------------------------------


@pytest.fixture
def restore_log_level() -> Iterator[None]:
    """PUT /config/log_level changes the process-wide nsqbox level; put it back."""
    logger = logging.getLogger("nsqbox")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.mark.usefixtures("restore_log_level")
async def test_config(server: NSQDWithHTTP, client: httpx.AsyncClient) -> None:
    # TestHTTPconfig.
    addresses = await client.get("/config/nsqlookupd_tcp_addresses")
    assert (addresses.status_code, addresses.content) == (200, b"[]")
    new = b'["127.0.0.1:4160","127.0.0.1:4162"]'
    put = await client.put("/config/nsqlookupd_tcp_addresses", content=new)
    assert (put.status_code, put.content) == (200, new)
    assert server.nsqd.options.lookupd_tcp_addresses == ["127.0.0.1:4160", "127.0.0.1:4162"]
    assert (await client.get("/config/log_level")).json() == 2
    fatal = await client.put("/config/log_level", content=b"fatal")
    assert (fatal.status_code, fatal.json()) == (200, 5)
    assert server.nsqd.options.log_level == "fatal"
    assert logging.getLogger("nsqbox.nsqd").getEffectiveLevel() == logging.CRITICAL
    assert_error(await client.put("/config/log_level", content=b"bad"), 400, "INVALID_VALUE")
    assert_error(await client.put("/config/log_level", content=b""), 413, "INVALID_VALUE")
    assert_error(await client.put("/config/log_level", content=b"x" * 101), 413, "INVALID_VALUE")
    bad_json = await client.put("/config/nsqlookupd_tcp_addresses", content=b"[1]")
    assert_error(bad_json, 400, "INVALID_VALUE")
    assert_error(await client.put("/config/msg_timeout", content=b"1"), 400, "INVALID_OPTION")
    assert_error(await client.get("/config/nope"), 400, "INVALID_OPTION")
    assert_error(await client.get("/config/validate"), 400, "INVALID_OPTION")
    assert_error(await client.get("/config/queue_scan_interval"), 400, "INVALID_OPTION")


async def test_config_statsd_prefix_has_the_host_filled_in(
    server: NSQDWithHTTP, client: httpx.AsyncClient
) -> None:
    # as nsqd.New() rewrites it; RespondV1 sends a string as it is, not as JSON
    response = await client.get("/config/statsd_prefix")
    port = server.nsqd.http_port
    assert (response.status_code, response.text) == (200, f"nsq.127_0_0_1_{port}.")


async def test_config_lookupd_addresses_null_reads_back_null(client: httpx.AsyncClient) -> None:
    # nsqd stores Go's nil slice; invalid UTF-8 is replaced as Go's decoder does
    put = await client.put("/config/nsqlookupd_tcp_addresses", content=b"null")
    assert (put.status_code, put.content) == (200, b"null")
    assert (await client.get("/config/nsqlookupd_tcp_addresses")).content == b"null"
    put = await client.put("/config/nsqlookupd_tcp_addresses", content=b'["a\xffb:1"]')
    assert (put.status_code, put.json()) == (200, ["a\ufffdb:1"])
    put = await client.put("/config/nsqlookupd_tcp_addresses", content=b"[]")
    assert (put.status_code, put.content) == (200, b"[]")


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("msg_timeout", b"60000000000"),
        ("max_msg_size", b"100"),
        ("id", b"1"),
        ("snappy", b"true"),
        ("e2e_processing_latency_percentiles", b"[]"),
        ("tls_min_version", b"769"),
        ("auth_http_addresses", b"[]"),
    ],
)
async def test_config_reads_options_with_go_types(
    client: httpx.AsyncClient, name: str, body: bytes
) -> None:
    response = await client.get(f"/config/{name}")
    assert (response.status_code, response.content) == (200, body)


async def test_config_change_notifies(nursery: trio.Nursery, tmp_path: Path) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    changes: list[list[str]] = []
    app = make_app(
        server.nsqd,
        on_options_changed=lambda: changes.append(server.nsqd.options.lookupd_tcp_addresses),
    )
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(serve_http, app, listeners)
    url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(base_url=url) as http:
            await http.put("/config/nsqlookupd_tcp_addresses", content=b'["h:1"]')
    assert changes == [["h:1"]]


# -- /debug -------------------------------------------------------------------


async def test_debug_snapshot(server: NSQDWithHTTP, client: httpx.AsyncClient) -> None:
    await client.post("/topic/create?topic=t")
    await client.post("/channel/create?topic=t&channel=c")
    await client.post("/mpub?topic=t", content=b"a\nb")
    debug = (await client.get("/debug")).json()
    assert debug["version"] == "1.3.0"
    assert debug["trio_tasks"] > 3
    assert debug["rss_bytes"] > 0
    assert debug["client_count"] == 0
    assert debug["topics"][0]["name"] == "t"
    assert debug["topics"][0]["channels"] == [
        {
            "name": "c",
            "paused": False,
            "ephemeral": False,
            "memory_depth": 2,
            "backend_depth": 0,
            "in_flight": 0,
            "deferred": 0,
            "clients": 0,
        }
    ]


# -- HTTP in, TCP out ---------------------------------------------------------


async def test_http_publish_tcp_consume_agree(
    server: NSQDWithHTTP, client: httpx.AsyncClient
) -> None:
    sub = await RawConn.open(server.tcp)
    await sub.sub("t", "c", rdy=100)
    sent = [b"single"]
    await client.post("/pub?topic=t", content=sent[0])
    text = [b"line-1", b"line-two"]
    await client.post("/mpub?topic=t", content=b"\n".join(text))
    binary = [b"bin\n1", b"\x00" * 7]
    await client.post("/mpub?topic=t&binary=true", content=binary_mpub(binary))
    sent += text + binary
    received = [(await sub.message()).body for _ in sent]
    await sub.aclose()
    assert received == sent
    stats = (await client.get("/stats?format=json&topic=t")).json()
    topic = stats["topics"][0]
    assert topic["message_count"] == len(received)
    assert topic["message_bytes"] == sum(map(len, received))
    assert topic["channels"][0]["message_count"] == len(received)
