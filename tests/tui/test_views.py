"""The views against a real cluster: the numbers they show are the servers' numbers.

Each test sets the cluster up through its public APIs (publishing, a consumer holding
messages in flight), runs the app headless and waits until the tables show the expected
cells; refreshes every 0.1 s keep them current.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import httpx
import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from nsqbox.admin.tui.app import AdminApp
from nsqbox.admin.tui.backend import open_model_backend
from nsqbox.admin.tui.channel import ChannelScreen
from nsqbox.admin.tui.nodes import NodeScreen, NodesScreen
from nsqbox.admin.tui.topic import TopicScreen
from nsqbox.admin.tui.topics import TopicsScreen
from nsqbox.admin.tui.widgets import StatsTable, StatusLine
from nsqbox.client import Config
from nsqbox.client.blocking import BlockingConsumer
from nsqbox.testing.handle import NSQBox

from .conftest import TIMEOUT, make_app, on_screen, run_app, wait_until


def table(app: AdminApp, selector: str) -> StatsTable:
    """A table of the current view."""
    return app.screen.query_one(selector, StatsTable)


def cell(app: AdminApp, selector: str, key: str, column: str) -> str | None:
    """The text of one cell, or None while the row (or the column) is not there."""
    t = table(app, selector)
    columns = [c.key.value for c in t.ordered_columns]
    if key not in t.keys or column not in columns:
        return None
    return t.cells(key)[columns.index(column)]


def row(app: AdminApp, selector: str, key: str, *columns: str) -> tuple[str | None, ...]:
    """Several cells of one row."""
    return tuple(cell(app, selector, key, c) for c in columns)


def status(app: AdminApp) -> str:
    """The status line's text."""
    return app.screen.query_one(StatusLine).text


@pytest.fixture
def billing(nsq: NSQBox) -> Iterator[BlockingConsumer]:
    """orders/billing on node 0 with one message finished, one requeued and back in flight,
    one queued and one deferred; the consumer stays connected (RDY 1) during the test."""
    config = Config(max_in_flight=1, close_timeout=2.0, read_timeout=TIMEOUT)
    consumer = BlockingConsumer(nsq.nsqd_tcp_addresses[0], "orders", "billing", config=config)
    try:
        nsq.publish("orders", [b"one", b"two", b"three"], node=0)
        nsq.publish("orders", b"later", defer_ms=600_000, node=0)
        messages = consumer.messages(timeout=TIMEOUT)
        next(messages).finish()
        next(messages).requeue(delay=0, backoff=False)
        nsq.wait_for("orders", "billing", in_flight=1, requeue_count=1, deferred=1, depth=1)
        yield consumer
    finally:
        consumer.close()


def test_topics_view_sums_topics_over_nodes(nsq: NSQBox) -> None:
    nsq.publish("orders", [b"a", b"b", b"c"], node=0)
    nsq.publish("orders", [b"d", b"e"], node=1)
    nsq.publish("events", b"x", node=1)

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        assert isinstance(app.screen, TopicsScreen)
        await wait_until(pilot, lambda: table(app, "#topics").keys == ["events", "orders"], "rows")
        columns = ("depth", "messages", "channels", "nodes", "paused")
        assert row(app, "#topics", "orders", *columns) == ("5", "5", "", "2", "")
        assert row(app, "#topics", "events", *columns) == ("1", "1", "", "1", "")
        await wait_until(pilot, lambda: cell(app, "#topics", "orders", "rate") == "0", "a rate")
        assert "2 nodes · 2 topics · every 0.5s · updated " in status(app)

    run_app(make_app(nsq), body)


def test_topics_view_counts_a_message_once_however_many_channels_hold_it(nsq: NSQBox) -> None:
    """A topic's depth is its own queue (0 once it has channels, as nsqadmin shows it); the
    channel columns are the busiest channel's: one DPUB to two channels is 1 deferred, not 2."""
    node0 = nsq.nsqd_http_addresses[0]
    with httpx.Client(timeout=TIMEOUT, trust_env=False) as client:
        client.post(f"http://{node0}/topic/create", params={"topic": "orders"}).raise_for_status()
        for channel in ("billing", "audit"):
            params = {"topic": "orders", "channel": channel}
            client.post(f"http://{node0}/channel/create", params=params).raise_for_status()
    nsq.publish("orders", [b"one", b"two", b"three"], node=0)
    nsq.publish("orders", b"later", defer_ms=600_000, node=0)
    config = Config(max_in_flight=1, close_timeout=2.0, read_timeout=TIMEOUT)
    consumer = BlockingConsumer(nsq.nsqd_tcp_addresses[0], "orders", "billing", config=config)
    try:
        next(consumer.messages(timeout=TIMEOUT))  # held in flight: billing has 2 queued
        nsq.wait_for("orders", "billing", depth=2, in_flight=1, deferred=1)
        nsq.wait_for("orders", "audit", depth=3, in_flight=0, deferred=1)
        columns = ("depth", "channel_depth", "in_flight", "deferred", "messages", "channels")
        expected = ("0", "3", "1", "1", "4", "audit, billing")

        async def body(pilot: Pilot[Any], app: AdminApp) -> None:
            await wait_until(
                pilot,
                lambda: row(app, "#topics", "orders", *columns) == expected,
                "the counts",
                lambda: row(app, "#topics", "orders", *columns),
            )
            legend = app.screen.query_one("#legend", Static).render()
            assert "Topic depth: not yet copied to a channel" in str(legend)
            table(app, "#topics").select("orders")
            await pilot.press("enter")  # the Topic view lists each channel's own counts
            await on_screen(pilot, app, TopicScreen)
            counters = ("depth", "in_flight", "deferred")
            await wait_until(
                pilot, lambda: row(app, "#channels", "audit", *counters) == ("3", "0", "1"), "audit"
            )
            assert row(app, "#channels", "billing", *counters) == ("2", "1", "1")
            assert row(app, "#nodes", str(node0), "depth", "messages") == ("0", "4")

        run_app(make_app(nsq), body)
    finally:
        consumer.close()


def test_topic_and_channel_views_show_the_channel_counters(
    nsq: NSQBox, billing: BlockingConsumer
) -> None:
    nsq.publish("orders", b"elsewhere", node=1)
    node0, node1 = nsq.nsqd_http_addresses

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await wait_until(pilot, lambda: "orders" in table(app, "#topics").keys, "orders")
        table(app, "#topics").select("orders")
        await pilot.press("enter")
        await on_screen(pilot, app, TopicScreen)
        counters = ("depth", "in_flight", "deferred", "requeued", "timed_out", "messages")
        # node 1 made billing too when it created orders (lookupd knew the channel)
        expected = ("2", "1", "1", "1", "0", "5")
        await wait_until(
            pilot,
            lambda: row(app, "#channels", "billing", *counters) == expected,
            "billing",
            lambda: row(app, "#channels", "billing", *counters),
        )
        assert cell(app, "#channels", "billing", "connections") == "1"
        # the finished message gave nsqd an end-to-end latency to report
        assert (cell(app, "#channels", "billing", "e2e") or "").startswith("p99 ")
        assert table(app, "#nodes").keys == sorted([node0, node1])
        assert row(app, "#nodes", node0, "depth", "messages", "channels") == ("0", "4", "1")
        assert row(app, "#nodes", node1, "depth", "messages", "channels") == ("0", "1", "1")

        await pilot.press("enter")  # the cursor is on billing, the only channel
        await on_screen(pilot, app, ChannelScreen)
        await wait_until(pilot, lambda: len(table(app, "#clients").keys) == 1, "the client")
        (key,) = table(app, "#clients").keys
        columns = ("node", "user_agent", "features", "rdy", "in_flight", "finished")
        assert row(app, "#clients", key, *columns) == (
            node0,
            billing.config.user_agent,
            "",
            "1",
            "1",
            "1",
        )
        assert cell(app, "#clients", key, "requeued") == "1"
        assert row(app, "#nodes", node0, "depth", "in_flight", "clients") == ("1", "1", "1")
        assert row(app, "#nodes", node1, "depth", "in_flight", "clients") == ("1", "0", "0")
        assert app.screen.sub_title == "topics / orders / billing"

        await pilot.press("escape")
        await on_screen(pilot, app, TopicScreen)
        await pilot.press("escape")
        await on_screen(pilot, app, TopicsScreen)

    run_app(make_app(nsq), body)


def test_nodes_and_node_views(nsq: NSQBox) -> None:
    nsq.publish("orders", b"a", node=1)
    node0, node1 = nsq.nsqd_http_addresses

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await pilot.press("n")
        await on_screen(pilot, app, NodesScreen)
        await wait_until(pilot, lambda: table(app, "#nodes").keys == sorted([node0, node1]), "")
        await wait_until(pilot, lambda: cell(app, "#nodes", node1, "topics") == "orders", "topic")
        tcp1 = nsq.nsqd_tcp_addresses[1]
        assert row(app, "#nodes", node1, "broadcast", "tcp", "http", "version", "status") == (
            "127.0.0.1",
            str(tcp1.port),
            str(node1.port),
            "1.3.0",
            "ok",
        )
        assert row(app, "#nodes", node1, "depth", "messages", "tombstones") == ("1", "1", "")
        table(app, "#nodes").select(node1)
        await pilot.press("enter")
        await on_screen(pilot, app, NodeScreen)
        await wait_until(pilot, lambda: table(app, "#topics").keys == ["orders"], "its topic")
        assert row(app, "#topics", "orders", "depth", "messages", "tombstoned") == ("1", "1", "")
        await pilot.press("enter")
        await on_screen(pilot, app, TopicScreen)
        await pilot.press("t")  # to the Topics view...
        await on_screen(pilot, app, TopicsScreen)
        await pilot.press("n")  # ...and back to the Node view, where we left it
        await on_screen(pilot, app, TopicScreen)

    run_app(make_app(nsq), body)


def test_filter_narrows_the_rows_and_esc_clears_it(nsq: NSQBox) -> None:
    for topic in ("orders", "orders-dlq", "events"):
        nsq.publish(topic, b"x")

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        topics = table(app, "#topics")
        await wait_until(pilot, lambda: len(topics.keys) == 3, "three topics")
        await pilot.press("slash", "o", "r", "d")
        await wait_until(pilot, lambda: topics.keys == ["orders", "orders-dlq"], "filtered")
        assert "filter: ord" in status(app)
        await pilot.press("enter")  # back to the table, the filter stays
        assert topics.has_focus
        assert topics.keys == ["orders", "orders-dlq"]
        await pilot.press("escape")
        await wait_until(pilot, lambda: len(topics.keys) == 3, "all topics again")
        assert isinstance(app.screen, TopicsScreen)

    run_app(make_app(nsq), body)


def test_tables_update_in_place_and_keep_the_cursor(nsq: NSQBox) -> None:
    nsq.publish("b-topic", b"x")
    nsq.publish("c-topic", b"x")

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        topics = table(app, "#topics")
        await wait_until(pilot, lambda: topics.keys == ["b-topic", "c-topic"], "two topics")
        await pilot.press("down")
        assert topics.selected_key == "c-topic"
        nsq.publish("c-topic", [b"y", b"z"])  # a cell changes: updated in place
        await wait_until(pilot, lambda: cell(app, "#topics", "c-topic", "depth") == "3", "depth")
        assert (topics.selected_key, topics.cursor_row) == ("c-topic", 1)
        nsq.publish("a-topic", b"x")  # a row comes before it: the cursor follows its row
        await wait_until(pilot, lambda: len(topics.keys) == 3, "three topics")
        assert (topics.selected_key, topics.cursor_row) == ("c-topic", 2)

    run_app(make_app(nsq), body)


def test_a_node_that_does_not_answer_shows_as_an_error(nsq: NSQBox) -> None:
    nsq.publish("orders", b"x")
    dead = "127.0.0.1:1"

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await wait_until(pilot, lambda: table(app, "#topics").keys == ["orders"], "orders")
        await wait_until(pilot, lambda: f"✗ {dead}: " in status(app), "the error")
        assert "1 node · 1 topic" in status(app)

    live = str(nsq.nsqd_http_addresses[0])
    factory = partial(open_model_backend, nsqd_http_addresses=[live, dead])
    run_app(AdminApp(factory, interval=0.1), body)


def test_no_cluster_at_all_is_shown_not_raised() -> None:
    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await wait_until(pilot, lambda: "✗ 127.0.0.1:1: " in status(app), "the error")
        assert app.snapshot is not None
        assert app.snapshot.nodes == ()

    factory = partial(open_model_backend, lookupd_http_addresses=["127.0.0.1:1"])
    run_app(AdminApp(factory, interval=0.1), body)


def test_the_topic_view_opens_on_its_channels_and_tab_moves_between_its_tables(
    nsq: NSQBox,
) -> None:
    # what docs/tui.md says: the channels table has the focus, Tab and Shift+Tab move it
    nsq.publish("orders", b"a", node=0)
    nsq.wait_for_producers("orders")

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        topics = table(app, "#topics")
        await wait_until(pilot, lambda: "orders" in topics.keys, "the topic")
        topics.select("orders")
        await pilot.press("enter")
        await on_screen(pilot, app, TopicScreen)
        nodes, channels = table(app, "#nodes"), table(app, "#channels")
        await wait_until(pilot, lambda: channels.has_focus, "the channels table focused")
        await pilot.press("tab")
        await wait_until(pilot, lambda: nodes.has_focus, "Tab: the nodes table", app.focused)
        await pilot.press("tab")
        await wait_until(pilot, lambda: channels.has_focus, "Tab: channels again", app.focused)
        await pilot.press("shift+tab")
        await wait_until(pilot, lambda: nodes.has_focus, "Shift+Tab: nodes", app.focused)

    run_app(make_app(nsq), body)
