"""The plugin's options, addresses, cluster specs and state snapshots (no servers)."""

from __future__ import annotations

import re

import pytest

from nsqbox.nsqd.config import parse_nsqd_args
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.testing.cluster import SpecError, lookupd_options, nsqd_options
from nsqbox.testing.config import (
    _PARSERS,
    Address,
    BoxConfig,
    Cleanup,
    ClusterSpec,
    Mode,
    split_args,
)
from nsqbox.testing.options import OPTIONS, Option
from nsqbox.testing.state import (
    BoxStats,
    ChannelState,
    Expectation,
    TopicState,
)
from nsqbox.testing.subprocess_box import option_flags

# -- options and config ---------------------------------------------------------------


def test_every_option_has_an_ini_key_a_flag_and_a_parser() -> None:
    names = [opt.name for opt in OPTIONS]
    assert len(set(names)) == len(names)
    assert set(names) == set(_PARSERS) == set(BoxConfig.__dataclass_fields__)
    for opt in OPTIONS:
        assert opt.ini == f"nsqbox_{opt.name}"
        assert opt.flag == "--nsqbox-" + opt.name.replace("_", "-")


def test_defaults() -> None:
    config = BoxConfig.resolve(lambda opt: None)
    assert config == BoxConfig()
    assert config.mode is Mode.THREAD
    assert config.cleanup is Cleanup.DELETE
    assert config.spec() == ClusterSpec()
    assert config.noproc_addresses().nsqd_tcp == ("127.0.0.1:4150",)


def test_values_are_parsed() -> None:
    raw = {
        "mode": "subprocess",
        "nsqd_count": "3",
        "lookupd_count": "0",
        "nsqd_args": "--msg-timeout=5s '--log-prefix=[a b] '",
        "timeout": "2.5",
        "cleanup": "empty",
        "nsqd_tcp_address": "a:1, b:2",
        "lookupd_http_address": "",
    }
    config = BoxConfig.resolve(lambda opt: raw.get(opt.name))
    assert config.mode is Mode.SUBPROCESS
    assert config.spec() == ClusterSpec(
        nsqd=3, lookupd=0, nsqd_args=("--msg-timeout=5s", "--log-prefix=[a b] ")
    )
    assert config.timeout == 2.5
    assert config.cleanup is Cleanup.EMPTY
    assert config.nsqd_tcp_address == ("a:1", "b:2")
    assert config.lookupd_http_address == ()


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("mode", "thred", "nsqbox_mode/--nsqbox-mode: 'thred' is not one of"),
        ("nsqd_count", "0", "nsqbox_nsqd_count/--nsqbox-nsqd-count: must be >= 1, got 0"),
        ("timeout", "-1", "nsqbox_timeout/--nsqbox-timeout: must be > 0, got -1"),
        ("start_timeout", "soon", "nsqbox_start_timeout/--nsqbox-start-timeout: could not"),
        ("nsqd_args", "'unclosed", "nsqbox_nsqd_args/--nsqbox-nsqd-args: No closing quotation"),
    ],
    ids=["choice", "count", "positive", "float", "shlex"],
)
def test_bad_values_name_the_option(name: str, value: str, message: str) -> None:
    def lookup(opt: Option) -> str | None:
        return value if opt.name == name else None

    with pytest.raises(ValueError, match="^" + re.escape(message)):
        BoxConfig.resolve(lookup)


def test_noproc_lists_must_pair_up() -> None:
    config = BoxConfig(nsqd_tcp_address=(Address("a:1"), Address("b:2")))
    with pytest.raises(ValueError, match="must list the same nsqds"):
        config.noproc_addresses()


def test_split_args() -> None:
    assert split_args("--a=1 '--b=x y'") == ("--a=1", "--b=x y")
    assert split_args(["--a=1"]) == ("--a=1",)


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [("127.0.0.1:4150", "127.0.0.1", 4150), ("[::1]:4161", "::1", 4161)],
    ids=["v4", "v6"],
)
def test_address(text: str, host: str, port: int) -> None:
    address = Address(text)
    assert address == text
    assert (address.host, address.port, address.pair) == (host, port, (host, port))
    assert address.url == f"http://{text}"
    assert Address.of(host, port) == text


def test_cluster_spec_checks_counts() -> None:
    with pytest.raises(ValueError, match="at least one nsqd"):
        ClusterSpec(nsqd=0)
    with pytest.raises(ValueError, match="lookupd must be >= 0"):
        ClusterSpec(lookupd=-1)


# -- server options from a spec -------------------------------------------------------------


def test_nsqd_options_flags_then_fields() -> None:
    spec = ClusterSpec(
        nsqd_args=("--msg-timeout=5s", "--mem-queue-size=7", "--lookupd-tcp-address=x:1"),
        nsqd_options={"mem_queue_size": 9, "max_msg_size": 100},
    )
    opts = nsqd_options(spec, 2, "/data", ["l:1"])
    assert (opts.tcp_address, opts.http_address) == ("127.0.0.1:0", "127.0.0.1:0")
    assert (opts.node_id, opts.data_path) == (3, "/data")
    assert (opts.msg_timeout, opts.mem_queue_size, opts.max_msg_size) == (5.0, 9, 100)
    assert opts.lookupd_tcp_addresses == ["l:1", "x:1"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (ClusterSpec(nsqd_args=("--no-such-flag",)), "bad nsqd flags"),
        (ClusterSpec(nsqd_args=("--msg-timeout=5s", "stray")), "unexpected 'stray'"),
        (ClusterSpec(nsqd_options={"msg_timout": 1.0}), "unknown nsqd option 'msg_timout'"),
        (ClusterSpec(nsqd_options={"node_id": 5000}), "--node-id must be"),
    ],
    ids=["flag", "argument", "field", "invalid"],
)
def test_nsqd_options_errors(spec: ClusterSpec, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        nsqd_options(spec, 0, "/data")


def test_lookupd_options() -> None:
    opts = lookupd_options(ClusterSpec(lookupd_args=("--tombstone-lifetime=2s",)))
    assert (opts.tcp_address, opts.http_address, opts.tombstone_lifetime) == (
        "127.0.0.1:0",
        "127.0.0.1:0",
        2.0,
    )
    with pytest.raises(SpecError, match="bad nsqlookupd flags"):
        lookupd_options(ClusterSpec(lookupd_args=("--nope",)))


def test_option_flags_round_trip() -> None:
    fields = {
        "msg_timeout": 1.5,
        "mem_queue_size": 0,
        "snappy": False,
        "lookupd_tcp_addresses": ["a:1", "b:2"],
        "e2e_processing_latency_percentiles": [0.99, 0.5],
        "log_level": "warn",
    }
    flags = option_flags(fields)
    assert "--msg-timeout=1.5s" in flags
    assert "--snappy=false" in flags
    parsed = parse_nsqd_args(flags, defaults=NSQDOptions()).options
    for key, value in fields.items():
        assert getattr(parsed, key) == value, key
    with pytest.raises(ValueError, match="unknown nsqd option"):
        option_flags({"nope": 1})


# -- snapshots and expectations -------------------------------------------------------------

STATS_DOC = {
    "version": "1.3.0",
    "health": "OK",
    "topics": [
        {
            "topic_name": "orders",
            "depth": 2,
            "message_count": 5,
            "paused": False,
            "channels": [
                {
                    "channel_name": "billing",
                    "depth": 1,
                    "in_flight_count": 2,
                    "deferred_count": 0,
                    "message_count": 3,
                    "requeue_count": 1,
                    "timeout_count": 0,
                    "client_count": 1,
                    "paused": False,
                }
            ],
        }
    ],
}


def test_stats_from_nsqd_json() -> None:
    stats = BoxStats.from_stats_json(STATS_DOC)
    assert stats.topic("orders") == TopicState(
        "orders",
        depth=2,
        message_count=5,
        channels={"billing": ChannelState("billing", 1, 2, 0, 3, 1, 0, 1)},
    )
    assert stats.channel("orders", "nope") is None
    assert stats.channel("nope", "billing") is None
    # NSQ before 1.0 wrapped every reply in {"status_code": ..., "data": ...}
    assert BoxStats.from_stats_json({"status_code": 200, "data": STATS_DOC}) == stats


def test_merge_sums_nodes() -> None:
    one = BoxStats.from_stats_json(STATS_DOC)
    two = BoxStats({"orders": TopicState("orders", 1, 1, channels={}), "x": TopicState("x")})
    merged = BoxStats.merge([one, one, two])
    orders = merged.topic("orders")
    assert orders is not None
    assert (orders.depth, orders.message_count) == (5, 11)
    assert orders.channels["billing"] == ChannelState("billing", 2, 4, 0, 6, 2, 0, 2)
    assert set(merged.topics) == {"orders", "x"}


def test_expectation_words() -> None:
    stats = BoxStats.from_stats_json(STATS_DOC)
    exists = Expectation("orders", "billing")
    assert exists.describe() == "channel 'billing' of topic 'orders' to exist"
    assert exists.met(stats)
    depth = Expectation("orders", "billing", {"depth": 0, "clients": 1})
    assert not depth.met(stats)
    assert depth.timeout_message(2, stats) == (
        "nsqbox: timed out after 2s waiting for channel 'billing' of topic 'orders' to have "
        "depth=0, clients=1; last seen: depth=1, in_flight=2, deferred=0, message_count=3, "
        "requeue_count=1, timeout_count=0, clients=1"
    )
    assert Expectation("nope", "c").last_seen(stats) == "no topic 'nope' (topics: ['orders'])"
    assert Expectation("orders", "c").last_seen(stats) == (
        "topic 'orders' has no channel 'c' (channels: ['billing']; topic depth=2)"
    )
    assert Expectation("orders", counts={"depth": 2}).met(stats)
    assert Expectation("orders").last_seen(stats) == (
        "depth=2, message_count=5, channels=['billing']"
    )


def test_expectation_refuses_unknown_counts() -> None:
    with pytest.raises(TypeError, match=r"cannot wait for clients of a topic \(give channel"):
        Expectation("orders", counts={"clients": 1})
    with pytest.raises(TypeError, match="cannot wait for bogus of a channel"):
        Expectation("orders", "c", {"bogus": 1})
