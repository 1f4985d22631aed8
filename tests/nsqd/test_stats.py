"""/stats: exact keys and JSON types of nsqd/stats.go and client_v2.go, counters, text, latency."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.nsqd.domain.quantile import Percentile, Quantile, QuantileResult, nanoseconds_to_human
from nsqbox.nsqd.domain.stats import memory_stats
from nsqbox.wire import commands
from nsqbox.wire.frames import FrameType
from tests.helpers import RawConn
from tests.http.nsqd_app import TIMEOUT, NSQDWithHTTP, start_nsqd_http

# JSON types of each struct's fields, from the Go declarations: int64/uint64/int32
# are JSON integers, float64 JSON numbers, a Go slice an array or null.
ARRAY_OR_NULL = (list, type(None))
TOP_LEVEL = {
    "version": str,
    "health": str,
    "start_time": int,
    "topics": ARRAY_OR_NULL,
    "producers": ARRAY_OR_NULL,
}
TOP_LEVEL_OMITEMPTY = {"memory": dict}  # a pointer, nil without include_mem
TOPIC = {
    "topic_name": str,
    "channels": list,
    "depth": int,
    "backend_depth": int,
    "message_count": int,
    "message_bytes": int,
    "paused": bool,
    "e2e_processing_latency": dict,
}
CHANNEL = {
    "channel_name": str,
    "depth": int,
    "backend_depth": int,
    "in_flight_count": int,
    "deferred_count": int,
    "message_count": int,
    "requeue_count": int,
    "timeout_count": int,
    "client_count": int,
    "clients": ARRAY_OR_NULL,
    "paused": bool,
    "e2e_processing_latency": dict,
}
CLIENT = {
    "client_id": str,
    "hostname": str,
    "version": str,
    "remote_address": str,
    "state": int,
    "ready_count": int,
    "in_flight_count": int,
    "message_count": int,
    "finish_count": int,
    "requeue_count": int,
    "connect_ts": int,
    "sample_rate": int,
    "deflate": bool,
    "snappy": bool,
    "user_agent": str,
    "tls": bool,
    "tls_cipher_suite": str,
    "tls_version": str,
    "tls_negotiated_protocol": str,
    "tls_negotiated_protocol_is_mutual": bool,
}
CLIENT_OMITEMPTY = {
    "authed": bool,
    "auth_identity": str,
    "auth_identity_url": str,
    "pub_counts": list,
}
PUB_COUNT = {"topic": str, "count": int}
MEMORY = dict.fromkeys(
    [
        "heap_objects",
        "heap_idle_bytes",
        "heap_in_use_bytes",
        "heap_released_bytes",
        "gc_pause_usec_100",
        "gc_pause_usec_99",
        "gc_pause_usec_95",
        "next_gc_bytes",
        "gc_total_runs",
    ],
    int,
)
LATENCY = {"count": int, "percentiles": ARRAY_OR_NULL}
PERCENTILE = {"quantile": float, "value": (float, int)}


def check(
    obj: dict[str, Any], schema: dict[str, Any], optional: dict[str, Any] | None = None
) -> None:
    """``obj`` has exactly ``schema``'s keys (plus any of ``optional``) with its JSON types."""
    optional = optional or {}
    assert set(schema) <= set(obj), set(schema) - set(obj)
    assert set(obj) <= set(schema) | set(optional), set(obj) - set(schema) - set(optional)
    for key, value in obj.items():
        expected = schema.get(key, optional.get(key))
        types = expected if isinstance(expected, tuple) else (expected,)
        # bool is an int in Python, never in JSON: compare exact types.
        assert type(value) in types, (key, value, expected)


def check_document(doc: dict[str, Any]) -> None:
    check(doc, TOP_LEVEL, TOP_LEVEL_OMITEMPTY)
    if "memory" in doc:
        check(doc["memory"], MEMORY)
    for topic in doc["topics"] or []:
        check(topic, TOPIC)
        check_latency(topic["e2e_processing_latency"])
        for channel in topic["channels"]:
            check(channel, CHANNEL)
            check_latency(channel["e2e_processing_latency"])
            for client in channel["clients"] or []:
                check_client(client)
    for producer in doc["producers"] or []:
        check_client(producer)


def check_client(client: dict[str, Any]) -> None:
    check(client, CLIENT, CLIENT_OMITEMPTY)
    for count in client.get("pub_counts", []):
        check(count, PUB_COUNT)


def check_latency(latency: dict[str, Any]) -> None:
    check(latency, LATENCY)
    for item in latency["percentiles"] or []:
        check(item, PERCENTILE)


@pytest.fixture
async def server(nursery: trio.Nursery, tmp_path: Path) -> NSQDWithHTTP:
    return await start_nsqd_http(nursery, tmp_path, e2e_processing_latency_percentiles=[0.5, 0.99])


@pytest.fixture
async def client(server: NSQDWithHTTP) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url) as http:
        with trio.fail_after(TIMEOUT):
            yield http


async def stats(client: httpx.AsyncClient, query: str = "") -> dict[str, Any]:
    response = await client.get("/stats?format=json" + ("&" + query if query else ""))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    doc: dict[str, Any] = response.json()
    check_document(doc)
    return doc


async def synced(conn: RawConn) -> None:
    """Wait until the server has handled everything sent so far on a subscribed ``conn``."""
    await conn.send(commands.fin(b"0" * 16))  # not in flight: a non-fatal error answers
    assert (await conn.error()).startswith(b"E_FIN_FAILED")


async def test_empty_server(client: httpx.AsyncClient, server: NSQDWithHTTP) -> None:
    doc = await stats(client)
    assert doc["version"] == "1.3.0"
    assert doc["health"] == "OK"
    assert doc["start_time"] == int(server.nsqd.start_time)
    assert doc["topics"] == []
    assert doc["producers"] is None  # a nil Go slice


async def test_counters_follow_operations(server: NSQDWithHTTP, client: httpx.AsyncClient) -> None:
    producer = await RawConn.open(server.tcp)
    await producer.identify(client_id="prod", hostname="prod.host", user_agent="pub/1.0")
    await producer.mpub("t", [b"one", b"two", b"three"])
    consumer = await RawConn.open(server.tcp)
    await consumer.identify(client_id="cons", hostname="cons.host", user_agent="sub/2.0")
    await consumer.sub("t", "c")

    doc = await stats(client)
    [topic] = doc["topics"]
    assert (topic["topic_name"], topic["message_count"], topic["message_bytes"]) == ("t", 3, 11)
    [channel] = topic["channels"]
    assert (channel["client_count"], channel["depth"], channel["message_count"]) == (1, 3, 3)
    [cons] = channel["clients"]
    assert (cons["client_id"], cons["hostname"], cons["user_agent"]) == (
        "cons",
        "cons.host",
        "sub/2.0",
    )
    assert (cons["version"], cons["state"], cons["ready_count"]) == ("V2", 3, 0)
    assert "pub_counts" not in cons
    assert "authed" not in cons
    assert re.fullmatch(r"127\.0\.0\.1:\d+", cons["remote_address"])
    [prod] = doc["producers"]
    assert (prod["client_id"], prod["pub_counts"]) == ("prod", [{"topic": "t", "count": 3}])

    await consumer.send(commands.rdy(3))
    msgs = [await consumer.message() for _ in range(3)]
    await consumer.send(commands.fin(msgs[0].id))
    await consumer.send(commands.req(msgs[1].id, 0))
    redelivered = await consumer.message()
    assert redelivered.id == msgs[1].id
    await synced(consumer)

    channel = (await stats(client))["topics"][0]["channels"][0]
    cons = channel["clients"][0]
    assert (channel["in_flight_count"], channel["requeue_count"], channel["depth"]) == (2, 1, 0)
    assert (cons["finish_count"], cons["requeue_count"], cons["message_count"]) == (1, 1, 4)
    assert (cons["in_flight_count"], cons["ready_count"]) == (2, 3)

    nsqd_channel = server.nsqd.topics["t"].channels["c"]
    nsqd_channel.process_in_flight(server.nsqd.now() + 3600)  # both in-flight messages expire
    channel = (await stats(client))["topics"][0]["channels"][0]
    assert (channel["timeout_count"], channel["requeue_count"]) == (2, 1)

    await client.post("/topic/pause?topic=t")
    await client.post("/channel/pause?topic=t&channel=c")
    [topic] = (await stats(client))["topics"]
    assert topic["paused"] is True
    assert topic["channels"][0]["paused"] is True

    await consumer.aclose()
    await producer.aclose()


async def test_filters_and_include_clients(server: NSQDWithHTTP, client: httpx.AsyncClient) -> None:
    producer = await RawConn.open(server.tcp)
    await producer.pub("a", b"x")
    await producer.pub("b", b"yy")
    consumer = await RawConn.open(server.tcp)
    await consumer.sub("a", "c1")
    server.nsqd.topics["a"].get_channel("c2")

    doc = await stats(client)
    assert [t["topic_name"] for t in doc["topics"]] == ["a", "b"]  # sorted, as nsqd
    assert [c["channel_name"] for c in doc["topics"][0]["channels"]] == ["c1", "c2"]
    assert doc["producers"][0]["pub_counts"] == [
        {"topic": "a", "count": 1},
        {"topic": "b", "count": 1},
    ]

    only_a = await stats(client, "topic=a")
    assert [t["topic_name"] for t in only_a["topics"]] == ["a"]
    assert only_a["producers"][0]["pub_counts"] == [{"topic": "a", "count": 1}]
    one_channel = await stats(client, "topic=a&channel=c2")
    assert [c["channel_name"] for c in one_channel["topics"][0]["channels"]] == ["c2"]
    assert (await stats(client, "topic=nope"))["topics"] is None
    assert (await stats(client, "topic=a&channel=nope"))["topics"] == []

    without = await stats(client, "include_clients=false")
    channel = without["topics"][0]["channels"][0]
    assert (channel["clients"], channel["client_count"]) == (None, 1)
    assert without["producers"] is None
    assert (await stats(client, "include_clients=bogus"))["producers"] is not None

    assert "memory" in await stats(client)
    assert "memory" not in await stats(client, "include_mem=0")
    await consumer.aclose()
    await producer.aclose()


async def test_e2e_processing_latency(server: NSQDWithHTTP, client: httpx.AsyncClient) -> None:
    consumer = await RawConn.open(server.tcp)
    await consumer.sub("t", "c", rdy=10)
    await client.post("/mpub?topic=t", content=b"a\nb")
    for _ in range(2):
        await consumer.send(commands.fin((await consumer.message()).id))
    await synced(consumer)
    [topic] = (await stats(client))["topics"]
    for latency in (
        topic["e2e_processing_latency"],
        topic["channels"][0]["e2e_processing_latency"],
    ):
        assert latency["count"] == 2
        assert [p["quantile"] for p in latency["percentiles"]] == [0.5, 0.99]
        assert all(p["value"] > 0 for p in latency["percentiles"])
    text = (await client.get("/stats?topic=t")).text
    assert re.search(r"e2e%: \d+\.\d(ns|us|ms|s), \d+\.\d(ns|us|ms|s)\n", text)
    await consumer.aclose()


async def test_latency_without_percentiles_is_null(nursery: trio.Nursery, tmp_path: Path) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    server.nsqd.get_topic("t").get_channel("c")
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(base_url=server.url) as http:
            [topic] = (await stats(http))["topics"]
    none = {"count": 0, "percentiles": None}
    assert topic["e2e_processing_latency"] == none
    assert topic["channels"][0]["e2e_processing_latency"] == none


async def test_text_format(server: NSQDWithHTTP, client: httpx.AsyncClient) -> None:
    empty = await client.get("/stats")
    assert empty.headers["content-type"] == "text/plain; charset=utf-8"
    lines = empty.text.split("\n")
    assert re.fullmatch(r"nsqd v1\.3\.0 \(built w/.+\)", lines[0])
    assert re.fullmatch(r"start_time \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)", lines[1])
    assert re.fullmatch(r"uptime [0-9.]+(ns|µs|ms|s)|uptime (\d+h)?(\d+m)?[0-9.]+s", lines[2])
    assert lines[3:6] == ["", "Health: OK", ""]
    assert lines[6] == "Memory:"
    assert all(re.fullmatch(r"   \w+ +\t\d+", line) for line in lines[7:16])
    assert lines[16:] == ["", "Topics: None", "", "Producers: None", ""]

    producer = await RawConn.open(server.tcp)
    await producer.identify(hostname="ph", user_agent="pub")
    await producer.pub("t1", b"body")
    consumer = await RawConn.open(server.tcp)
    await consumer.identify(hostname="ch", user_agent="sub")
    await consumer.sub("t1", "c", rdy=0)
    server.nsqd.get_topic("t2")
    await client.post("/topic/pause?topic=t2")
    text = (await client.get("/stats?include_mem=false")).text
    body = text.split("Health: OK\n", 1)[1]
    cport = consumer.stream.socket.getsockname()[1]
    pport = producer.stream.socket.getsockname()[1]
    expected = [
        "",
        "Topics:",
        "   [t1             ] depth: 0     be-depth: 0     msgs: 1        e2e%: 0.0ns, 0.0ns",
        "      [c                        ] depth: 1     be-depth: 0     inflt: 0    def: 0    "
        "re-q: 0     timeout: 0     msgs: 1        e2e%: 0.0ns, 0.0ns",
        f"        [V2 {f'ch:{cport} sub':<21}] state: 3 inflt: 0    rdy: 0    fin: 0        "
        "re-q: 0        msgs: 0        connected: 0s",
        "",
        "*P [t2             ] depth: 0     be-depth: 0     msgs: 0        e2e%: ",  # no channels
        "",
        "Producers:",
        f"   [V2 {f'ph:{pport} pub':<21}] msgs: 1        topics: t1=1 connected: 0s",
        "",
    ]
    # No FIN yet: the percentiles are 0; "connected" may tick over a second.
    got = re.sub(r"connected: \d+s", "connected: 0s", body).split("\n")
    assert got == expected
    await consumer.aclose()
    await producer.aclose()


async def test_unhealthy_shows_in_stats(server: NSQDWithHTTP, client: httpx.AsyncClient) -> None:
    server.nsqd.set_health("failed to write")
    assert (await stats(client))["health"] == "NOK - failed to write"
    assert "\nHealth: NOK - failed to write\n" in (await client.get("/stats")).text


def test_memory_stats_are_plausible() -> None:
    first = memory_stats()
    import gc

    gc.collect()
    second = memory_stats()
    assert second.gc_total_runs > first.gc_total_runs
    assert second.heap_in_use_bytes > 1024 * 1024
    assert second.heap_objects > 1000
    assert second.gc_pause_usec_100 >= second.gc_pause_usec_99 >= second.gc_pause_usec_95 >= 0


# -- the quantile estimator ----------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.wall_ns = 10**18

    def __call__(self) -> float:
        return self.now


def make_quantile(clock: FakeClock, percentiles: list[float]) -> Quantile:
    return Quantile(10.0, percentiles, clock=clock, wall_clock_ns=lambda: clock.wall_ns)


def test_quantile_percentiles_are_close() -> None:
    clock = FakeClock()
    q = make_quantile(clock, [0.5, 0.9, 0.99, 0.999])
    # Latencies 1..20000 us in a scrambled order.
    for i in range(20000):
        q.insert(clock.wall_ns - ((i * 7919) % 20000 + 1) * 1000)
    result = q.result()
    assert result.count == 20000
    assert result.percentiles is not None
    for p in result.percentiles:
        # Rank error within 1% of n, and within a tenth of the tail above the target.
        allowed_ranks = min(0.01, (1 - p.quantile) / 10) * 20000 + 1
        assert abs(p.value - p.quantile * 20000 * 1000) <= allowed_ranks * 1000, p


def test_quantile_window_slides() -> None:
    clock = FakeClock()
    q = make_quantile(clock, [0.5])
    q.insert(clock.wall_ns - 1000)
    clock.now = 6.0  # into the second half-window: the first sample is still counted
    q.insert(clock.wall_ns - 3000)
    assert q.result().count == 2
    clock.now = 11.0  # the half holding the first sample was reset
    assert q.result() == QuantileResult(1, [Percentile(0.5, 3000.0)])
    clock.now = 100.0  # long idle: nothing left
    result = q.result()
    assert result.count == 0
    assert result.percentiles is not None
    assert result.percentiles[0].value == 0.0


def test_quantile_merge_adds_samples() -> None:
    clock = FakeClock()
    a, b = make_quantile(clock, [0.5]), make_quantile(clock, [0.5])
    for _ in range(100):
        a.insert(clock.wall_ns - 1000)
        b.insert(clock.wall_ns - 3000)
    total = make_quantile(clock, [0.5])
    total.merge(a)
    total.merge(b)
    result = total.result()
    assert result.count == 200
    assert result.percentiles is not None
    assert result.percentiles[0].value in (1000.0, 3000.0)
    assert a.result().count == 100  # merging does not consume


def test_quantile_result_text() -> None:
    assert str(QuantileResult()) == ""
    assert nanoseconds_to_human(999) == "999.0ns"
    assert nanoseconds_to_human(1500) == "1.5us"
    assert nanoseconds_to_human(2_500_000) == "2.5ms"
    assert nanoseconds_to_human(3_000_000_001) == "3.0s"


async def test_reading_stats_does_not_disturb_a_consumer(
    server: NSQDWithHTTP, client: httpx.AsyncClient
) -> None:
    # Reading /stats while a consumer is mid-stream changes nothing it sees.
    consumer = await RawConn.open(server.tcp)
    await consumer.sub("t", "c", rdy=1)
    await client.post("/pub?topic=t", content=b"m")
    await stats(client)
    frame_type, _ = await consumer.read_frame()
    assert frame_type == FrameType.MESSAGE
    await consumer.aclose()
