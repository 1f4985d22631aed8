"""statsd: nsqd's metric names, prefix, packet packing, counter deltas, and the UDP loop."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import trio

from nsqbox.nsqd.domain.quantile import Percentile, QuantileResult
from nsqbox.nsqd.domain.stats import ChannelStats, MemStats, Stats, TopicStats
from nsqbox.nsqd.statsd import host_key, pack_lines, render_lines, statsd_prefix
from tests.helpers import RawConn
from tests.http.nsqd_app import TIMEOUT, start_nsqd_http

NO_LATENCY = QuantileResult()


def channel(name: str, *, messages: int = 0, requeues: int = 0, timeouts: int = 0) -> ChannelStats:
    return ChannelStats(name, 4, 1, 2, 3, messages, requeues, timeouts, 5, None, False, NO_LATENCY)


def topic(
    name: str, channels: list[ChannelStats], *, messages: int = 0, size: int = 0
) -> TopicStats:
    return TopicStats(name, channels, 7, 6, messages, size, False, NO_LATENCY)


MEMORY = MemStats(1, 2, 3, 4, 5, 6, 7, 8, 9)


@pytest.mark.parametrize(
    ("prefix", "address", "port", "expected"),
    [
        ("nsq.%s", "host.example.com", 4151, "nsq.host_example_com_4151."),
        ("nsq.%s.", "10.0.0.1", 4151, "nsq.10_0_0_1_4151."),
        ("%s.%s", "::1", 80, "[__1]_80.[__1]_80."),
        ("fixed", "h", 1, "fixed."),
        ("", "h", 1, ""),
    ],
)
def test_prefix(prefix: str, address: str, port: int, expected: str) -> None:
    assert statsd_prefix(prefix, address, port) == expected


def test_host_key() -> None:
    assert host_key("a.b:4151") == "a_b_4151"


def test_lines_are_nsqds_names_with_deltas() -> None:
    first = Stats(
        topics=[
            topic("t", [channel("c", messages=10, requeues=2, timeouts=1)], messages=10, size=50)
        ],
        producers=None,
    )
    lines = render_lines("p.", first, None, MEMORY, None)
    assert lines == [
        "p.topic.t.message_count:10|c",
        "p.topic.t.message_bytes:50|c",
        "p.topic.t.depth:7|g",
        "p.topic.t.backend_depth:6|g",
        "p.topic.t.channel.c.message_count:10|c",
        "p.topic.t.channel.c.depth:4|g",
        "p.topic.t.channel.c.backend_depth:1|g",
        "p.topic.t.channel.c.in_flight_count:2|g",
        "p.topic.t.channel.c.deferred_count:3|g",
        "p.topic.t.channel.c.requeue_count:2|c",
        "p.topic.t.channel.c.timeout_count:1|c",
        "p.topic.t.channel.c.clients:5|g",
        "p.mem.heap_objects:1|g",
        "p.mem.heap_idle_bytes:2|g",
        "p.mem.heap_in_use_bytes:3|g",
        "p.mem.heap_released_bytes:4|g",
        "p.mem.gc_pause_usec_100:5|g",
        "p.mem.gc_pause_usec_99:6|g",
        "p.mem.gc_pause_usec_95:7|g",
        "p.mem.next_gc_bytes:8|g",
        "p.mem.gc_runs:9|c",
    ]
    second = Stats(
        topics=[
            topic(
                "t",
                [channel("c", messages=15, requeues=2, timeouts=4), channel("new", messages=3)],
                messages=15,
                size=80,
            )
        ],
        producers=None,
    )
    later_memory = MemStats(1, 2, 3, 4, 5, 6, 7, 8, 12)
    counters = [
        line for line in render_lines("", second, first, later_memory, MEMORY) if "|c" in line
    ]
    assert counters == [
        "topic.t.message_count:5|c",
        "topic.t.message_bytes:30|c",
        "topic.t.channel.c.message_count:5|c",
        "topic.t.channel.c.requeue_count:0|c",
        "topic.t.channel.c.timeout_count:3|c",
        "topic.t.channel.new.message_count:3|c",
        "topic.t.channel.new.requeue_count:0|c",
        "topic.t.channel.new.timeout_count:0|c",
        "mem.gc_runs:3|c",
    ]


def test_latency_gauges_and_ephemeral_exclusion() -> None:
    latency = QuantileResult(3, [Percentile(0.99, 1234.9), Percentile(0.999, 50.0)])
    stats = Stats(
        topics=[
            TopicStats("t", [channel("c#ephemeral")], 0, 0, 0, 0, False, latency),
            topic("e#ephemeral", [channel("c")]),
        ],
        producers=None,
    )
    lines = render_lines("", stats, None, exclude_ephemeral=True)
    assert "topic.t.e2e_processing_latency_99:1234|g" in lines
    assert "topic.t.e2e_processing_latency_100:50|g" in lines  # Go's %.0f of 99.9
    assert not [line for line in lines if "ephemeral" in line]
    assert any("c#ephemeral" in line for line in render_lines("", stats, None))


def test_packing_never_splits_a_line() -> None:
    lines = [f"metric.{i}:{i}|g" for i in range(100)]
    packets = pack_lines(lines, 64)
    assert all(len(p) <= 64 for p in packets)
    assert b"".join(packets).decode().splitlines() == lines
    assert all(p.endswith(b"\n") for p in packets)
    assert pack_lines(["x" * 100], 64) == [b"x" * 100 + b"\n"]
    assert pack_lines([], 64) == []


async def test_loop_sends_over_udp(nursery: trio.Nursery, tmp_path: Path) -> None:
    receiver = trio.socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with receiver:
        await receiver.bind(("127.0.0.1", 0))
        port = receiver.getsockname()[1]
        server = await start_nsqd_http(
            nursery,
            tmp_path,
            statsd_address=f"127.0.0.1:{port}",
            statsd_interval=0.05,
            statsd_prefix="nsq.%s",
            statsd_udp_packet_size=200,
        )
        producer = await RawConn.open(server.tcp)
        await producer.mpub("t", [b"a", b"b", b"c"])
        server.nsqd.get_topic("t").get_channel("c")
        # nsqd runs statsd_loop itself once --statsd-address is set, from its start: a send
        # may come before the topic or its channel (a second loop here made two senders)
        prefix = f"nsq.127_0_0_1_{server.nsqd.http_port}."

        async def next_lines() -> list[str]:
            data = await receiver.recv(65536)
            assert len(data) <= 200
            return data.decode().splitlines()

        seen: list[str] = []
        with trio.fail_after(TIMEOUT):
            channel_seen = f"{prefix}topic.t.channel.c.clients:0|g"
            while channel_seen not in seen or f"{prefix}mem.gc_runs" not in "".join(seen):
                seen += await next_lines()
            # the first send that saw the topic counted its three messages at once
            assert f"{prefix}topic.t.message_count:3|c" in seen
            assert f"{prefix}topic.t.message_bytes:3|c" in seen
            assert f"{prefix}topic.t.channel.c.clients:0|g" in seen
            assert all(line.startswith(prefix) for line in seen)
            # Counters are deltas: publish two more and wait for the send that saw them.
            await producer.mpub("t", [b"dd", b"ee"])
            while f"{prefix}topic.t.message_count:2|c" not in seen:
                seen += await next_lines()
        assert f"{prefix}topic.t.message_bytes:4|c" in seen
        await producer.aclose()
