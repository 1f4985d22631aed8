"""Admission control and lag: read limits, minimum batches with a delay, idle streams, depth.

The pure parts (:class:`Admission`, the /stats and /lookup parsers) are tested
on their own; the depth probe against real nsqbox nodes; the readers' limits
through Spark itself, observed in ``query.recentProgress`` (Spark reports a
trigger that planned no batch too once ``noDataProgressEventInterval`` is 0).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from nsqbox.spark.admission import Admission, Bounds, lag_report, total_depth
from nsqbox.spark.depth import (
    DepthProbe,
    parse_lookup_http,
    parse_stats_channel,
    parse_stats_depth,
)
from nsqbox.spark.lag import ChannelStats, ConnectionCount, waiting
from nsqbox.spark.options import OptionError, parse_read_options
from nsqbox.testing import NSQBox, NSQBoxFactory
from nsqbox.testing.waiting import poll

from .conftest import TIMEOUT, create_channel, publish
from .session import pyspark_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

CHANNEL = "spark"
needs_limits = pytest.mark.skipif(
    pyspark_version() < (4, 2), reason="read limits need pyspark >= 4.2"
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# -- pure ------------------------------------------------------------------------------------


def test_admission_plans_nothing_while_empty_and_bounds_each_batch() -> None:
    admission = Admission(10.0, FakeClock())
    assert admission.rows(Bounds(100), 0, 100) is None
    assert admission.rows(Bounds(100), 30, 100) == 100  # the depth says "plan", not how much
    assert admission.rows(Bounds(100), 5000, 100) == 100
    assert admission.rows(Bounds(100), None, 100) == 100  # unknown depth: plan, bounded
    assert admission.rows(Bounds(None), 5000, 100) == 5000  # all available
    assert admission.rows(Bounds(None), None, 100) == 100


def test_admission_waits_for_the_minimum_until_the_delay() -> None:
    clock = FakeClock()
    admission = Admission(10.0, clock)
    bounds = Bounds(100, 50)
    assert admission.rows(bounds, 30, 100) is None  # the delay starts now
    clock.now = 9.9
    assert admission.rows(bounds, 49, 100) is None
    assert admission.rows(bounds, 50, 100) == 100  # enough: at once, up to the maximum
    admission.planned()
    clock.now = 15.0
    assert admission.rows(bounds, 10, 100) is None
    clock.now = 20.0
    assert admission.rows(bounds, 10, 100) == 100  # the delay passed since the last batch
    assert admission.rows(bounds, 0, 100) is None  # never an empty batch


def test_total_depth_is_unknown_when_one_node_is() -> None:
    assert total_depth({"a": 3, "b": 4}) == 7
    assert total_depth({"a": 3, "b": None}) is None
    assert total_depth({}) == 0


def test_lag_report_leaves_an_unknown_depth_out_never_zero() -> None:
    both = lag_report({"a:4150": 3, "b:4150": 4})
    assert both == {"depth": 7, "nodes": {"a:4150": 3, "b:4150": 4}}
    assert lag_report({"a:4150": 0}) == {"depth": 0, "nodes": {"a:4150": 0}}
    # the channel not created yet, or no HTTP address: unknown, not a lag of 0
    assert lag_report({"a:4150": None}) == {"nodes": {"a:4150": None}}
    assert lag_report({"a:4150": 5, "b:4150": None}) == {"nodes": {"a:4150": 5, "b:4150": None}}
    assert lag_report({}) is None  # no node known yet: no report


def test_waiting_counts_what_nsqd_sent_the_reader_and_no_batch_holds() -> None:
    ours = [ConnectionCount("10.0.0.5:40001", received=150, buffered=30)]
    # nsqd sent 200 on that connection: 120 are in batches (or handed back), 30 buffered,
    # 50 still on the wire; 70 more wait in the queue
    stats = ChannelStats(70, {"10.0.0.5:40001": 200, "10.0.0.9:5000": 999})
    assert waiting({"n1:4150": stats}, {"n1:4150": ours}) == 70 + 80
    two = [*ours, ConnectionCount("10.0.0.5:40002", received=0, buffered=0)]
    # a connection /stats does not list: the depth and what is buffered, no more
    assert waiting({"n1:4150": stats}, {"n1:4150": two}) == 70 + 30
    assert waiting({"n1:4150": stats, "n2:4150": None}, {"n1:4150": ours}) is None
    assert waiting({"n1:4150": stats, "n2:4150": ChannelStats(5)}, {"n1:4150": ours}) == 155
    assert waiting({}, {}) == 0
    # a dual-stack listener writes an IPv4 client IPv4-mapped
    mapped = ChannelStats(70, {"[::ffff:10.0.0.5]:40001": 200})
    assert waiting({"n1:4150": mapped}, {"n1:4150": ours}) == 150


def test_parsers_read_depth_and_http_ports() -> None:
    stats = {
        "topics": [
            {"topic_name": "t", "channels": [{"channel_name": "c", "depth": 12}, {"depth": 3}]},
            {"topic_name": "u", "channels": [{"channel_name": "c", "depth": 99}]},
        ]
    }
    body = json.dumps(stats).encode()
    assert parse_stats_depth(body, "t", "c") == 12
    assert parse_stats_depth(body, "t", "other") is None
    clients = [{"remote_address": "127.0.0.1:5", "message_count": 9}, {"message_count": -4}]
    stats["topics"][0]["channels"][0]["clients"] = clients
    assert parse_stats_channel(json.dumps(stats).encode(), "t", "c") == ChannelStats(
        12, {"127.0.0.1:5": 9, "": 0}
    )
    lookup = {
        "producers": [
            {"broadcast_address": "h1", "tcp_port": 4150, "http_port": 4151},
            {"broadcast_address": "h2", "tcp_port": 4150, "http_port": 0},  # ignored
        ]
    }
    assert parse_lookup_http(json.dumps(lookup).encode()) == {"h1:4150": "h1:4151"}


def test_options_of_admission() -> None:
    base = {"nsqd": "127.0.0.1:4150", "topic": "t", "channel": "c"}
    options = parse_read_options(
        {**base, "maxMessagesPerTrigger": "500", "minMessagesPerTrigger": "50"}
    )
    assert (options.max_messages_per_batch, options.min_messages_per_trigger) == (500, 50)
    assert options.max_trigger_delay == 900.0
    assert parse_read_options({**base, "maxMessagesPerBatch": "7"}).max_messages_per_batch == 7
    bad = [
        ({"maxMessagesPerTrigger": "5", "maxMessagesPerBatch": "6"}, "disagree"),
        ({"minMessagesPerTrigger": "2000"}, "must not exceed"),
        ({"nsqdHttp": "a:1,b:2"}, "one HTTP address per"),
    ]
    for extra, message in bad:
        with pytest.raises(OptionError, match=message):
            parse_read_options({**base, **extra})


# -- the depth probe, against real nodes ----------------------------------------------------------


def test_probe_asks_each_node_through_nsqd_http_and_lookupd(
    nsqbox_factory: NSQBoxFactory, topic: str
) -> None:
    box = nsqbox_factory(nsqd=2, lookupd=1)
    tcp = [str(a) for a in box.nsqd_tcp_addresses]
    http = [str(a) for a in box.nsqd_http_addresses]
    for node in (0, 1):
        create_channel_on(http[node], topic)
    box.publish(topic, [b"a", b"b", b"c"], node=1)
    wait_depth(http[1], topic, 3)
    by_option = parse_read_options(
        {"nsqd": ",".join(tcp), "nsqdHttp": ",".join(http), "topic": topic, "channel": CHANNEL}
    )
    probe = DepthProbe(by_option.connection, topic, CHANNEL)
    assert probe.depths(tcp) == {tcp[0]: 0, tcp[1]: 3}
    box.wait_for_producers(topic, 2)
    by_lookupd = parse_read_options(
        {"lookupd": str(box.lookupd_http_address), "topic": topic, "channel": CHANNEL}
    )
    probe = DepthProbe(by_lookupd.connection, topic, CHANNEL)
    assert probe.depths(tcp) == {tcp[0]: 0, tcp[1]: 3}
    # a node nobody can tell the HTTP address of, and a channel nobody created: unknown
    assert DepthProbe(by_option.connection, topic, "nobody").depths(tcp) == {
        tcp[0]: None,
        tcp[1]: None,
    }
    unknown = parse_read_options({"nsqd": tcp[0], "topic": topic, "channel": CHANNEL})
    assert DepthProbe(unknown.connection, topic, CHANNEL).depths([tcp[0]]) == {tcp[0]: None}


@pytest.fixture
def real_nsqd(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A real nsqd (``NSQ_BIN``): its TCP and HTTP addresses, answering /ping."""
    import os
    import subprocess
    import urllib.request

    from nsqbox.testing.waiting import poll

    from .standalone import free_port

    nsqd = Path(os.environ.get("NSQ_BIN", "/work/shared/nsq/bin")) / "nsqd"
    if not os.access(nsqd, os.X_OK):
        pytest.skip(f"no real nsqd at {nsqd} (set NSQ_BIN)")
    tcp, http = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    args = [f"--tcp-address={tcp}", f"--http-address={http}", f"--data-path={tmp_path}"]
    with (tmp_path / "nsqd.log").open("wb") as log:
        proc = subprocess.Popen([str(nsqd), *args], stdout=log, stderr=subprocess.STDOUT)
    try:

        def up() -> tuple[bool, None]:
            try:
                with urllib.request.urlopen(f"http://{http}/ping", timeout=5):
                    return True, None
            except OSError:
                return False, None

        poll(up, TIMEOUT, lambda _: "the real nsqd never answered /ping")
        yield tcp, http
    finally:
        proc.kill()
        proc.wait(30)


def mpub_http(http: str, topic: str, bodies: list[bytes]) -> None:
    """``/mpub`` newline-separated ``bodies`` (no newlines in them) on one nsqd."""
    import urllib.request

    request = urllib.request.Request(f"http://{http}/mpub?topic={topic}", b"\n".join(bodies))
    urllib.request.urlopen(request, timeout=10).close()


def test_probe_reads_real_nsqd_stats(real_nsqd: tuple[str, str], topic: str) -> None:
    tcp, http = real_nsqd
    create_channel_on(http, topic)
    mpub_http(http, topic, [b"a", b"b", b"c"])
    wait_depth(http, topic, 3)
    options = parse_read_options(
        {"nsqd": tcp, "nsqdHttp": http, "topic": topic, "channel": CHANNEL}
    )
    assert DepthProbe(options.connection, topic, CHANNEL).depths([tcp]) == {tcp: 3}


def test_simple_reader_counts_its_prefetch_on_real_nsqd(
    real_nsqd: tuple[str, str], topic: str
) -> None:
    """The lag counts what real nsqd sent the reader and no batch holds: matched by the
    connection's address in /stats, read or not."""
    from nsqbox.spark.stream_reader import NSQStreamReader

    tcp, http = real_nsqd
    create_channel_on(http, topic)
    mpub_http(http, topic, [b"m%d" % i for i in range(10)])
    wait_depth(http, topic, 10)
    options = {"nsqd": tcp, "nsqdHttp": http, "topic": topic, "channel": CHANNEL}
    options |= {"maxMessagesPerBatch": "3", "pollTimeout": "200ms"}
    reader = NSQStreamReader(parse_read_options(options))
    try:
        end = reader.initialOffset()
        for read_before in (0, 3, 6, 9):
            rows, new_end = reader.read(end)
            got = sum(b.num_rows for b in rows)
            assert new_end["depth"] == 10 - read_before  # its own rows included
            assert got == min(3, 10 - read_before)
            end = new_end
            # the next batch's worth (the in-flight bound is two batches) reaches the reader
            # before it plans again, unread: nsqd's depth alone would miss it
            wait_in_flight(http, topic, min(6, 10 - read_before))
        rows, idle = reader.read(end)
        assert (list(rows), idle) == ([], {"messages": 10, "depth": 0})  # emptied: 0, once
        rows, again = reader.read(idle)
        assert (list(rows), again) == ([], idle)
        reader.commit(again)
    finally:
        reader.stop()


@needs_limits
def test_partitioned_plan_follows_depth_and_limits(
    nsqbox_factory: NSQBoxFactory, topic: str, tmp_path: Path
) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

    from nsqbox.spark.partitioned import NSQPartitionedStreamReader

    box = nsqbox_factory(nsqd=2)
    tcp = [str(a) for a in box.nsqd_tcp_addresses]
    http = [str(a) for a in box.nsqd_http_addresses]
    options = {
        "nsqd": ",".join(tcp),
        "nsqdHttp": ",".join(http),
        "topic": topic,
        "channel": CHANNEL,
        "reader": "partitioned",
        "walPath": str(tmp_path / "wal"),
        "partitionsPerNode": "2",
        "maxMessagesPerTrigger": "100",
        "minMessagesPerTrigger": "40",
        "pollTimeout": "0",
    }
    source = NSQPartitionedStreamReader(parse_read_options(options))
    assert source.getDefaultReadLimit() == ReadMinRows(40)
    start = source.initialOffset()
    # no channel yet (a fresh query's first plan): the depth is unknown, not 0, and the
    # nodes are planned as if they had messages
    first = source.latestOffset(start, ReadMaxRows(100))
    assert first["slots"] == sorted(f"{a}/{i}" for a in tcp for i in (0, 1))
    assert source.reportLatestOffset() == {"nodes": {tcp[0]: None, tcp[1]: None}}
    for node in (0, 1):
        create_channel_on(http[node], topic)
    # both nodes empty: no batch, and the lag says so
    assert source.latestOffset(start, ReadMaxRows(100)) == start
    assert source.reportLatestOffset() == {"depth": 0, "nodes": {tcp[0]: 0, tcp[1]: 0}}
    box.publish(topic, [b"m%02d" % i for i in range(30)], node=1)
    wait_depth(http[1], topic, 30)
    # 30 wait on node 1 only, fewer than the minimum: no batch yet
    assert source.latestOffset(start, ReadMinRows(40)) == start
    # Spark's own maximum: node 1's two slots share it; node 0 has none
    end = source.latestOffset(start, ReadMaxRows(10))
    assert (end["seq"], end["slots"], end["quota"]) == (1, [f"{tcp[1]}/0", f"{tcp[1]}/1"], 5)
    assert source.reportLatestOffset() == {"depth": 30, "nodes": {tcp[0]: 0, tcp[1]: 30}}
    # all available: the whole depth, split over the slots
    assert source.latestOffset(start, ReadAllAvailable())["quota"] == 15
    # more slots than messages: the deepest nodes' slots, one message each
    box.publish(topic, [b"x"], node=0)
    wait_depth(http[0], topic, 1)
    end = source.latestOffset(start, ReadMaxRows(3))
    assert (end["slots"], end["quota"]) == (
        sorted([f"{tcp[1]}/0", f"{tcp[1]}/1", f"{tcp[0]}/0"]),
        1,
    )


def in_flight_at(http: str, topic: str) -> int:
    """The channel CHANNEL's ``in_flight_count`` in one nsqd's /stats."""
    import urllib.request

    query = f"format=json&topic={topic}&channel={CHANNEL}"
    with urllib.request.urlopen(f"http://{http}/stats?{query}", timeout=10) as response:
        stats = json.load(response)
    (entry,) = [t for t in stats["topics"] if t["topic_name"] == topic]
    (channel,) = [c for c in entry["channels"] if c["channel_name"] == CHANNEL]
    return int(channel["in_flight_count"])


def wait_in_flight(http: str, topic: str, expected: int) -> None:
    """Until the channel CHANNEL has ``expected`` messages in flight on one nsqd."""
    from nsqbox.testing.waiting import poll

    poll(
        lambda: ((n := in_flight_at(http, topic)) == expected, n),
        TIMEOUT,
        lambda n: f"{n} in flight on nsqd {http}, not {expected}",
    )


def wait_depth(http: str, topic: str, depth: int) -> None:
    """Until the channel's depth on the nsqd at ``http`` is ``depth``: nsqd copies a message
    from its topic to the channels in a task of its own, after PUB has answered."""
    from nsqbox.testing.waiting import poll

    probe = DepthProbe(
        parse_read_options(
            {"nsqd": "x:1", "nsqdHttp": http, "topic": topic, "channel": CHANNEL}
        ).connection,
        topic,
        CHANNEL,
    )
    poll(
        lambda: ((d := probe.depths(["x:1"])["x:1"]) == depth, d),
        TIMEOUT,
        lambda d: f"the depth of {topic}/{CHANNEL} on {http} stayed {d}, not {depth}",
    )


def create_channel_on(http: str, topic: str) -> None:
    """Create ``topic`` and its channel CHANNEL on one nsqd."""
    import urllib.request

    for path in (f"topic/create?topic={topic}", f"channel/create?topic={topic}&channel={CHANNEL}"):
        request = urllib.request.Request(f"http://{http}/{path}", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()


# -- through Spark ---------------------------------------------------------------------------------


@pytest.fixture
def every_trigger_reported(spark: SparkSession) -> Iterator[None]:
    """Spark reports a progress for every trigger, batch or not (default: every 10 s idle)."""
    key = "spark.sql.streaming.noDataProgressEventInterval"
    old = spark.conf.get(key, None)
    spark.conf.set(key, "0")
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, old)


def start_query(
    spark: SparkSession,
    box: NSQBox,
    topic: str,
    tmp_path: Path,
    trigger: str = "100 milliseconds",
    **options: object,
) -> StreamingQuery:
    reader = (
        spark.readStream.format("nsq")
        .option("nsqd", box.nsqd_tcp_address)
        .option("nsqdHttp", box.nsqd_http_address)
        .option("topic", topic)
        .option("channel", CHANNEL)
        .option("pollTimeout", "100ms")
    )
    for key, value in options.items():
        reader = reader.option(key, value)  # type: ignore[arg-type]
    return (
        reader.load()
        .writeStream.format("memory")
        .queryName(topic)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime=trigger)
        .start()
    )


def batches(query: StreamingQuery) -> list[dict[str, Any]]:
    """The progress of each trigger that ran a batch (rows read), in order."""
    return [p for p in query.recentProgress if p["numInputRows"] > 0]


def wait_rows(spark: SparkSession, query: StreamingQuery, topic: str, n: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while spark.sql(f"SELECT count(*) AS n FROM {topic}").collect()[0].n < n:
        assert query.exception() is None
        assert time.monotonic() < deadline, f"fewer than {n} rows in {TIMEOUT}s"
        time.sleep(0.1)


def partitioned(tmp_path: Path) -> dict[str, object]:
    return {"reader": "partitioned", "walPath": str(tmp_path / "wal")}


READERS = [pytest.param("simple", id="simple"), pytest.param("partitioned", id="partitioned")]


def reader_options(kind: str, tmp_path: Path) -> dict[str, object]:
    return partitioned(tmp_path) if kind == "partitioned" else {}


@needs_limits
@pytest.mark.parametrize("kind", READERS)
def test_max_messages_per_trigger_bounds_every_batch(
    spark: SparkSession, nsqbox: NSQBox, topic: str, tmp_path: Path, kind: str
) -> None:
    create_channel(nsqbox, topic, CHANNEL)
    publish(nsqbox, topic, [b"m%04d" % i for i in range(750)])
    query = start_query(
        spark, nsqbox, topic, tmp_path, maxMessagesPerTrigger=200, **reader_options(kind, tmp_path)
    )
    try:
        wait_rows(spark, query, topic, 750)
    finally:
        query.stop()
    sizes = [p["numInputRows"] for p in batches(query)]
    assert sum(sizes) == 750
    assert max(sizes) <= 200
    assert len(sizes) >= 4


@needs_limits
@pytest.mark.usefixtures("every_trigger_reported")
@pytest.mark.parametrize("kind", READERS)
def test_min_messages_per_trigger_waits_for_its_rows_then_for_the_delay(
    spark: SparkSession, nsqbox: NSQBox, topic: str, tmp_path: Path, kind: str
) -> None:
    create_channel(nsqbox, topic, CHANNEL)
    publish(nsqbox, topic, [b"a%03d" % i for i in range(30)])
    query = start_query(
        spark,
        nsqbox,
        topic,
        tmp_path,
        minMessagesPerTrigger=50,
        maxTriggerDelay="6s",
        **reader_options(kind, tmp_path),
    )
    try:
        # 30 wait, fewer than 50: triggers come and go without a batch ...
        deadline = time.monotonic() + TIMEOUT
        while len(query.recentProgress) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert not batches(query)
        # ... until there are 50: one batch of all 60, at once (well before the delay)
        publish(nsqbox, topic, [b"b%03d" % i for i in range(30)])
        wait_rows(spark, query, topic, 60)
        assert [p["numInputRows"] for p in batches(query)] == [60]
        # then 10, fewer than 50: they wait for the delay since the last batch, then come
        publish(nsqbox, topic, [b"c%03d" % i for i in range(10)])
        wait_rows(spark, query, topic, 70)
    finally:
        query.stop()
    first, second = batches(query)
    waited = _timestamp(second["timestamp"]) - _timestamp(first["timestamp"])
    assert second["numInputRows"] == 10
    assert waited >= 5.5  # the 6 s delay, less a trigger's jitter


def _timestamp(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@needs_limits
@pytest.mark.usefixtures("every_trigger_reported")
def test_an_idle_partitioned_stream_plans_no_batch(
    spark: SparkSession, nsqbox: NSQBox, topic: str, tmp_path: Path
) -> None:
    from nsqbox.spark.wal import WriteAheadLog

    create_channel(nsqbox, topic, CHANNEL)
    query = start_query(spark, nsqbox, topic, tmp_path, **partitioned(tmp_path))
    try:
        deadline = time.monotonic() + TIMEOUT
        while len(query.recentProgress) < 60:  # sixty triggers
            assert query.exception() is None
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        query.stop()
    assert not batches(query)
    # Spark's first batch of a new query goes from no offset to the initial one (nothing to
    # read: no partition); after it, trigger after trigger plans nothing
    first, *later = query.recentProgress
    assert json.loads(first["sources"][0]["endOffset"]) == {"seq": 0, "slots": []}
    assert len(later) >= 59
    assert {p["batchId"] for p in later} == {1}
    assert not any("addBatch" in p["durationMs"] for p in later)
    assert WriteAheadLog(tmp_path / "wal").sequences() == []  # no task ever staged


def lag(progress: dict[str, Any]) -> int | None:
    """The depth a batch's progress reports: the partitioned reader's latest offset, the
    simple reader's end offset (as in docs/spark.md's listener)."""
    source = progress["sources"][0]
    for key in ("latestOffset", "endOffset"):
        offset = json.loads(source[key]) if source.get(key) else None
        if isinstance(offset, dict) and "depth" in offset:
            return int(offset["depth"])
    return None


@needs_limits
@pytest.mark.usefixtures("every_trigger_reported")
@pytest.mark.parametrize("kind", READERS)
def test_lag_in_last_progress_while_a_backlog_drains(
    spark: SparkSession, nsqbox: NSQBox, topic: str, tmp_path: Path, kind: str
) -> None:
    n = 1000
    create_channel(nsqbox, topic, CHANNEL)
    publish(nsqbox, topic, [b"l%04d" % i for i in range(n)])
    wait_depth(str(nsqbox.nsqd_http_address), topic, n)
    # a batch every half second at most: the backlog drains over seconds, read meanwhile
    query = start_query(
        spark,
        nsqbox,
        topic,
        tmp_path,
        "500 milliseconds",
        maxMessagesPerTrigger=200,
        **reader_options(kind, tmp_path),
    )
    seen: list[int] = []
    try:
        deadline = time.monotonic() + TIMEOUT
        while sum(p["numInputRows"] for p in batches(query)) < n:
            assert query.exception() is None
            assert time.monotonic() < deadline
            progress = query.lastProgress
            if progress and progress["numInputRows"]:
                depth = lag(progress)
                assert depth is not None
                if not seen or seen[-1] != depth:
                    seen.append(depth)
            time.sleep(0.05)
        # drained: the next trigger's progress says so, batch or not, and so do the two after
        drained_at = max(i for i, p in enumerate(query.recentProgress) if p["numInputRows"])

        def three_more() -> tuple[bool, int]:
            assert query.exception() is None
            return len(query.recentProgress) > drained_at + 3, len(query.recentProgress)

        poll(three_more, TIMEOUT, lambda n: f"only {n} progress reports after the drain")
    finally:
        query.stop()
    assert seen  # read while it drained
    assert seen[0] > seen[-1]
    after, *idle = query.recentProgress[drained_at + 1 : drained_at + 4]
    assert (after["numInputRows"], lag(after)) == (0, 0)
    # the simple reader planned one empty batch to say so; then, as the partitioned one, none
    assert [(lag(p), "addBatch" in p["durationMs"]) for p in idle] == [(0, False), (0, False)]
    # each batch's progress says how many waited when it was planned, its own included:
    # with the simple reader, what it prefetched too (in flight for it, in no batch yet)
    read_before = 0
    for progress in batches(query):
        assert lag(progress) == n - read_before
        read_before += progress["numInputRows"]
