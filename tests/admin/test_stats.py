"""The admin data layer: decoding lookupd and nsqd JSON, summing rows over nodes (pure)."""

from __future__ import annotations

import json

import msgspec
import pytest

from nsqbox.admin.stats import (
    Latency,
    Percentile,
    TopicStats,
    aggregate_channel,
    aggregate_topic,
    aggregate_topics,
    decode_lookupd_channels,
    decode_lookupd_topics,
    decode_node_info,
    decode_nodes,
    decode_nsqd_stats,
    join_host_port,
    parse_version,
)
from nsqbox.wire.peer_json import PeerJSONError


def _client(client_id: str, connect_ts: int = 1000) -> dict[str, object]:
    return {
        "client_id": client_id,
        "hostname": f"{client_id}.local",
        "version": "V2",
        "remote_address": "127.0.0.1:50000",
        "state": 3,
        "ready_count": 5,
        "in_flight_count": 1,
        "message_count": 9,
        "finish_count": 8,
        "requeue_count": 0,
        "connect_ts": connect_ts,
        "sample_rate": 0,
        "deflate": False,
        "snappy": True,
        "user_agent": "go-nsq/1.1.0",
        "tls": False,
        "tls_cipher_suite": "",
        "tls_version": "",
        "tls_negotiated_protocol": "",
        "tls_negotiated_protocol_is_mutual": False,
    }


def _stats_body(*, message_count: int, depth: int, clients: list[object] | None) -> bytes:
    """What nsqd v1.3.0 answers to /stats?format=json (one topic, one channel)."""
    latency = {"count": 4, "percentiles": [{"quantile": 0.99, "value": 2000}]}
    doc = {
        "version": "1.3.0",
        "health": "OK",
        "start_time": 1,
        "topics": [
            {
                "topic_name": "orders",
                "channels": [
                    {
                        "channel_name": "billing",
                        "depth": depth,
                        "backend_depth": 1,
                        "in_flight_count": 2,
                        "deferred_count": 0,
                        "message_count": message_count,
                        "requeue_count": 1,
                        "timeout_count": 0,
                        "client_count": len(clients or []),
                        "clients": clients,
                        "paused": False,
                        "e2e_processing_latency": latency,
                    }
                ],
                "depth": 0,
                "backend_depth": 0,
                "message_count": message_count,
                "message_bytes": 100,
                "paused": False,
                "e2e_processing_latency": {"count": 0, "percentiles": None},
            }
        ],
        "producers": None,
    }
    return json.dumps(doc).encode()


def test_join_host_port_and_versions() -> None:
    assert join_host_port("127.0.0.1", 4151) == "127.0.0.1:4151"
    assert join_host_port("::1", 4151) == "[::1]:4151"
    assert parse_version("1.3.0") == (1, 3, 0)
    assert parse_version("v1.2.10-alpha") == (1, 2, 10)
    assert parse_version("unknown") == (0, 0, 0)


def test_decode_nodes_pairs_topics_with_tombstones() -> None:
    body = json.dumps(
        {
            "producers": [
                {
                    "remote_address": "127.0.0.1:5555",
                    "hostname": "box",
                    "broadcast_address": "127.0.0.1",
                    "tcp_port": 4150,
                    "http_port": 4151,
                    "version": "1.3.0",
                    "tombstones": [False, True],
                    "topics": ["b", "a"],
                }
            ]
        }
    ).encode()
    [node] = decode_nodes(body)
    assert node.http_address == "127.0.0.1:4151"
    assert node.tcp_address == "127.0.0.1:4150"
    assert [(t.topic, t.tombstoned) for t in node.topics] == [("a", True), ("b", False)]


def test_decode_lookupd_lists_and_info() -> None:
    assert decode_lookupd_topics(b'{"topics":["a","b"]}') == ["a", "b"]
    assert decode_lookupd_topics(b'{"topics":null}') == []
    assert decode_lookupd_channels(b'{"channels":["c"]}') == ["c"]
    info = decode_node_info(
        b'{"version":"1.3.0","broadcast_address":"h","hostname":"h","http_port":1,'
        b'"tcp_port":2,"start_time":3}'
    )
    assert (info.version, info.http_port, info.tcp_port) == ("1.3.0", 1, 2)


def test_decode_nsqd_stats_tags_rows_with_the_node() -> None:
    body = _stats_body(message_count=10, depth=3, clients=[_client("c1", connect_ts=1000)])
    [topic] = decode_nsqd_stats(body, node="127.0.0.1:4151", hostname="box", now=1010.5)
    assert (topic.node, topic.hostname, topic.topic_name) == ("127.0.0.1:4151", "box", "orders")
    assert topic.e2e_processing_latency == Latency(topic="orders", host="127.0.0.1:4151")
    [channel] = topic.channels
    assert (channel.depth, channel.backend_depth, channel.memory_depth) == (3, 1, 2)
    assert (channel.topic_name, channel.node, channel.nodes) == ("orders", "127.0.0.1:4151", [])
    [client] = channel.clients
    assert client.node == "127.0.0.1:4151"
    assert client.connected == 10 * 10**9
    assert (client.client_id, client.snappy, client.finish_count) == ("c1", True, 8)
    [p] = channel.e2e_processing_latency.percentiles
    assert p == Percentile(0.99, 2000, 2000, 2000, 2000, 4)


def test_decode_nsqd_stats_without_clients_and_empty() -> None:
    [topic] = decode_nsqd_stats(
        _stats_body(message_count=1, depth=0, clients=None), node="n", now=0
    )
    assert topic.channels[0].clients == []
    assert decode_nsqd_stats(b'{"topics":null}', node="n") == []
    with pytest.raises(PeerJSONError):
        decode_nsqd_stats(b"not json", node="n")


def test_aggregate_topic_sums_nodes_and_channels() -> None:
    a = decode_nsqd_stats(
        _stats_body(message_count=10, depth=3, clients=[_client("b")]), node="n2", hostname="h2"
    )[0]
    b = decode_nsqd_stats(
        _stats_body(message_count=5, depth=1, clients=[_client("a")]), node="n1", hostname="h1"
    )[0]
    total = aggregate_topic("orders", [a, b])
    assert (total.node, total.message_count) == ("*", 15)
    assert [n.node for n in total.nodes] == ["n1", "n2"]  # sorted by host
    [channel] = total.channels
    assert channel.node == "*"
    assert (channel.depth, channel.memory_depth, channel.message_count) == (4, 2, 15)
    assert (channel.in_flight_count, channel.requeue_count, channel.client_count) == (4, 2, 2)
    assert [n.node for n in channel.nodes] == ["n1", "n2"]
    assert [c.client_id for c in channel.clients] == ["a", "b"]
    [p] = channel.e2e_processing_latency.percentiles
    assert (p.quantile, p.count, p.average, p.min, p.max) == (0.99, 8, 2000, 2000, 2000)
    assert channel.e2e_processing_latency.count == 8


def test_latency_merge_weighs_averages() -> None:
    def row(value: float, count: int) -> TopicStats:
        latency = Latency(count, [Percentile(0.5, value, value, value, value, count)])
        return TopicStats(node=str(value), e2e_processing_latency=latency)

    merged = aggregate_topic("t", [row(100, 1), row(400, 3)]).e2e_processing_latency
    [p] = merged.percentiles
    assert (p.min, p.max, p.average, p.count) == (100, 400, 325, 4)
    assert (merged.count, merged.host) == (4, "*")


def test_aggregate_paused_if_any_node_is() -> None:
    rows = [TopicStats(node="a", topic_name="t"), TopicStats(node="b", paused=True)]
    assert aggregate_topic("t", rows).paused
    assert aggregate_channel("t", "c", []).paused is False


def test_aggregate_topics_groups_by_name() -> None:
    rows = [TopicStats(node=n, topic_name=t, message_count=1) for n, t in
            [("a", "y"), ("a", "x"), ("b", "y")]]  # fmt: skip
    assert [(t.topic_name, t.message_count) for t in aggregate_topics(rows)] == [("x", 1), ("y", 2)]


def test_rows_encode_as_nsqadmin_json() -> None:
    row = aggregate_topic("t", [])
    keys = list(msgspec.to_builtins(row))
    assert keys == [
        "node", "hostname", "topic_name", "depth", "memory_depth", "backend_depth",
        "message_count", "nodes", "channels", "paused", "e2e_processing_latency",
    ]  # fmt: skip
