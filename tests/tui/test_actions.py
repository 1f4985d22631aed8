"""Every action of the TUI against a real cluster, checked through the servers' HTTP APIs.

The keys are pressed as a person would (select a row, press the key, answer the modal); the
outcome is read back from nsqd's ``/stats`` and lookupd's ``/lookup``, ``/nodes`` and ``/topics``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from textual.command import CommandPalette
from textual.pilot import Pilot
from textual.widgets import Input, Label

from nsqbox.admin.tui.app import AdminApp
from nsqbox.admin.tui.backend import open_model_backend
from nsqbox.admin.tui.channel import ChannelScreen
from nsqbox.admin.tui.help import HelpScreen
from nsqbox.admin.tui.modals import ConfirmScreen, CreateScreen, PublishScreen
from nsqbox.admin.tui.tail import TailScreen
from nsqbox.admin.tui.topic import TopicScreen
from nsqbox.admin.tui.topics import TopicsScreen
from nsqbox.admin.tui.widgets import StatsTable, StatusLine
from nsqbox.testing.handle import NSQBox

from .conftest import (
    HTTP,
    INTERVAL,
    make_app,
    on_screen,
    open_topic,
    run_app,
    until_true,
    wait_until,
)


async def confirm(pilot: Pilot[Any], app: AdminApp, answer: str = "y") -> str:
    """Answer the confirmation on screen; its message."""
    await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "a confirmation")
    message = str(app.screen.query_one("#message", Label).content)
    await pilot.press(answer)
    return message


async def done(pilot: Pilot[Any], app: AdminApp, count: int) -> None:
    """Wait until ``count`` actions have finished, and check the last one worked."""
    await wait_until(pilot, lambda: len(app.results) >= count, f"{count} actions")
    assert app.results[-1].ok, app.results[-1]


def test_pause_and_unpause_a_topic(nsq: NSQBox) -> None:
    nsq.publish("orders", b"a", node=0)
    nsq.publish("orders", b"b", node=1)
    nsq.wait_for_producers("orders")  # actions reach the nodes lookupd lists
    http = HTTP(nsq)

    async def paused_everywhere(state: bool) -> bool:
        return all([(await http.topics(i))["orders"]["paused"] is state for i in (0, 1)])

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        table = await open_topic(pilot, app, "orders")
        await pilot.press("p")
        assert "channels get none" in await confirm(pilot, app)
        await done(pilot, app, 1)
        assert app.results[0].label == "pause topic orders"
        await until_true(pilot, lambda: paused_everywhere(True), "paused on both nodes")
        await wait_until(pilot, lambda: "paused" in table.cells("orders"), "shown paused")
        await pilot.press("p")  # unpausing needs no confirmation
        await done(pilot, app, 2)
        await until_true(pilot, lambda: paused_everywhere(False), "unpaused")

    run_app(make_app(nsq), body)


def test_no_means_nothing_happens(nsq: NSQBox) -> None:
    nsq.publish("orders", [b"a", b"b"])
    nsq.wait_for_producers("orders")  # actions reach the nodes lookupd lists
    http = HTTP(nsq)

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await open_topic(pilot, app, "orders")
        for key, answer in (("e", "n"), ("ctrl+d", "escape"), ("p", "n")):
            await pilot.press(key)
            await confirm(pilot, app, answer)
            assert isinstance(app.screen, TopicsScreen)
        await pilot.press("ctrl+d", "enter")  # Enter hits the focused button: Cancel
        await on_screen(pilot, app, TopicsScreen)
        assert app.results == []
        topic = (await http.topics(0))["orders"]
        assert (topic["depth"], topic["paused"]) == (2, False)

    run_app(make_app(nsq), body)


def test_empty_a_topic_and_a_channel(nsq: NSQBox) -> None:
    nsq.publish("held", [b"a", b"b", b"c"])  # no channel: the topic holds them
    nsq.wait_for_producers("held")  # actions reach the nodes lookupd lists
    nsq.publish("orders", b"x")
    nsq.wait_for_producers("orders")  # actions reach the nodes lookupd lists
    http = HTTP(nsq)

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await open_topic(pilot, app, "held")
        await pilot.press("e")
        assert "drops the 3 messages queued at the topic" in await confirm(pilot, app)
        await done(pilot, app, 1)
        assert (await http.topics(0))["held"]["depth"] == 0

        await http.post(0, "/channel/create", topic="orders", channel="billing")
        nsq.publish("orders", [b"y", b"z"])
        await open_topic(pilot, app, "orders")
        await pilot.press("enter")
        await on_screen(pilot, app, TopicScreen)
        channels = app.screen.query_one("#channels", StatsTable)
        await wait_until(pilot, lambda: channels.keys == ["billing"], "billing")
        await pilot.press("enter")
        await on_screen(pilot, app, ChannelScreen)
        await pilot.press("e")
        assert "channel's 3 queued messages" in await confirm(pilot, app)
        await done(pilot, app, 2)
        assert app.results[-1].label == "empty channel billing of orders"
        assert (await http.topics(0))["orders"]["channels"]["billing"]["depth"] == 0

    run_app(make_app(nsq), body)


def test_pause_and_delete_a_channel_from_the_topic_view(nsq: NSQBox) -> None:
    nsq.publish("orders", b"x", node=0)
    nsq.wait_for_producers("orders")  # actions reach the nodes lookupd lists
    http = HTTP(nsq)

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        for channel in ("billing", "shipping"):
            await http.post(0, "/channel/create", topic="orders", channel=channel)
        await open_topic(pilot, app, "orders")
        await pilot.press("enter")
        channels = app.screen.query_one("#channels", StatsTable)
        await wait_until(pilot, lambda: channels.keys == ["billing", "shipping"], "channels")
        channels.select("shipping")
        await pilot.press("p")
        await confirm(pilot, app)
        await done(pilot, app, 1)
        stats = (await http.topics(0))["orders"]
        assert stats["channels"]["shipping"]["paused"] is True
        assert (stats["paused"], stats["channels"]["billing"]["paused"]) == (False, False)

        await pilot.press("ctrl+d")
        assert "deletes the channel" in await confirm(pilot, app)
        await done(pilot, app, 2)
        assert set((await http.topics(0))["orders"]["channels"]) == {"billing"}
        await wait_until(pilot, lambda: channels.keys == ["billing"], "shipping gone")
        assert channels.selected_key == "billing"

    run_app(make_app(nsq), body)


def test_delete_a_topic_everywhere(nsq: NSQBox) -> None:
    nsq.publish("orders", b"a", node=0)
    nsq.publish("orders", b"b", node=1)
    nsq.wait_for_producers("orders")  # actions reach the nodes lookupd lists
    nsq.publish("events", b"c", node=0)
    nsq.wait_for_producers("events")  # actions reach the nodes lookupd lists
    http = HTTP(nsq)

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        table = await open_topic(pilot, app, "orders")
        await pilot.press("ctrl+d")
        assert "on every node, and removes it from lookupd" in await confirm(pilot, app)
        await done(pilot, app, 1)
        assert "orders" not in await http.topics(0)
        assert "orders" not in await http.topics(1)
        assert "orders" not in (await http.lookupd("/topics"))["topics"]
        await wait_until(pilot, lambda: table.keys == ["events"], "orders gone from the view")

    run_app(make_app(nsq), body)


def test_tombstone_a_topic_on_one_node(nsq: NSQBox) -> None:
    topic = nsq.name("tomb")  # tombstones outlive the test in lookupd: a name of its own
    nsq.publish(topic, b"a", node=0)
    nsq.publish(topic, b"b", node=1)
    nsq.wait_for_producers(topic)  # actions reach the nodes lookupd lists
    node1 = str(nsq.nsqd_http_addresses[1])
    http = HTTP(nsq)

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await open_topic(pilot, app, topic)
        await pilot.press("enter")
        await on_screen(pilot, app, TopicScreen)
        nodes = app.screen.query_one("#nodes", StatsTable)
        await wait_until(pilot, lambda: len(nodes.keys) == 2, "two nodes")
        await pilot.press("T")  # the channels table has the focus: no node selected yet
        await on_screen(pilot, app, TopicScreen)
        nodes.focus()
        nodes.select(node1)
        await pilot.press("T")
        assert f"stops listing {node1} as a producer" in await confirm(pilot, app)
        await done(pilot, app, 1)
        assert app.results[0].label == f"tombstone topic {topic} on {node1}"
        producers = (await http.lookupd("/lookup", topic=topic))["producers"]
        assert [p["http_port"] for p in producers] == [nsq.nsqd_http_addresses[0].port]
        assert topic not in await http.topics(1)
        assert topic in await http.topics(0)

    run_app(make_app(nsq), body)


def test_create_a_topic_then_a_channel(nsq: NSQBox) -> None:
    nsq.publish("orders", b"x", node=1)
    nsq.wait_for_producers("orders")  # actions reach the nodes lookupd lists
    http = HTTP(nsq)

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        table = await open_topic(pilot, app, "orders")
        await pilot.press("c")
        await on_screen(pilot, app, CreateScreen)
        await pilot.press(*"bad name!", "enter")  # refused by the form, which stays
        assert "invalid topic name" in str(app.screen.query_one("#problem", Label).content)
        app.screen.query_one("#topic", Input).value = "fresh"
        await pilot.press("enter")
        await done(pilot, app, 1)
        assert "fresh" in (await http.lookupd("/topics"))["topics"]
        await wait_until(pilot, lambda: "fresh" in table.keys, "the lookupd-only topic")
        assert "lookupd only" in table.cells("fresh")

        table.select("orders")
        await pilot.press("enter", "c")
        await on_screen(pilot, app, CreateScreen)
        assert app.screen.query_one("#topic", Input).value == "orders"
        await pilot.press(*"audit", "enter")
        await done(pilot, app, 2)
        assert "audit" in (await http.topics(1))["orders"]["channels"]

    run_app(make_app(nsq), body)


def test_publish_a_message(nsq: NSQBox) -> None:
    nsq.publish("orders", b"first", node=1)
    nsq.wait_for_producers("orders")  # actions reach the nodes lookupd lists
    http = HTTP(nsq)

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await open_topic(pilot, app, "orders")
        await pilot.press("P")
        await on_screen(pilot, app, PublishScreen)
        assert app.screen.node == str(nsq.nsqd_http_addresses[1])  # a node that has it
        await pilot.press(*"hello", "enter")
        await done(pilot, app, 1)
        assert (await http.topics(1))["orders"]["message_count"] == 2

    run_app(make_app(nsq), body)


def test_tail_shows_live_messages_through_an_ephemeral_channel(nsq: NSQBox) -> None:
    nsq.publish("orders", b"before", node=0)
    nsq.wait_for_producers("orders")  # actions reach the nodes lookupd lists
    http = HTTP(nsq)

    async def tail_channels() -> list[str]:
        channels = (await http.topics(0))["orders"]["channels"]
        return [c for c in channels if c.endswith("#ephemeral")]

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await http.post(0, "/channel/create", topic="orders", channel="billing")
        await open_topic(pilot, app, "orders")
        await wait_until(pilot, lambda: has_channels(app, "orders"), "billing in the snapshot")
        await pilot.press("l")
        await on_screen(pilot, app, TailScreen)
        tail = app.screen
        await until_true(pilot, lambda: _equals(tail_channels(), [tail.channel]), "its channel")
        await http.publish(0, "orders", b'{"id": 1}')
        await wait_until(pilot, lambda: '{"id": 1}' in tail.text, "the message", lambda: tail.text)
        assert "before" not in tail.text  # billing had it; the tail's channel is new
        await pilot.press("escape")
        await on_screen(pilot, app, TopicsScreen)
        await until_true(pilot, lambda: _equals(tail_channels(), []), "the channel gone")
        assert (await http.topics(0))["orders"]["channels"]["billing"]["depth"] == 2

    run_app(make_app(nsq), body)


def has_channels(app: AdminApp, topic: str) -> bool:
    """Whether the app's snapshot shows channels of ``topic``."""
    row = app.snapshot.topic(topic) if app.snapshot is not None else None
    return row is not None and bool(row.channels)


async def _equals(value: Any, expected: Any) -> bool:
    return bool(await value == expected)


def test_tail_warns_first_on_a_topic_without_channels(nsq: NSQBox) -> None:
    nsq.publish("held", [b"kept-1", b"kept-2"], node=0)
    nsq.wait_for_producers("held")  # actions reach the nodes lookupd lists

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await open_topic(pilot, app, "held")
        await pilot.press("l")
        message = await confirm(pilot, app, "n")
        assert "has no channels" in message
        assert "(2 now)" in message
        assert isinstance(app.screen, TopicsScreen)
        await pilot.press("l")
        await confirm(pilot, app, "y")
        assert isinstance(app.screen, TailScreen)
        tail = app.screen
        await wait_until(pilot, lambda: "kept-2" in tail.text, "the buffered messages")
        assert "kept-1" in tail.text
        assert tail.count == 2

    run_app(make_app(nsq), body)


def test_read_only_hides_every_change(nsq: NSQBox) -> None:
    nsq.publish("held", b"x")
    nsq.wait_for_producers("held")  # actions reach the nodes lookupd lists
    http = HTTP(nsq)

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await open_topic(pilot, app, "held")
        actions = {b.binding.action for b in app.screen.active_bindings.values()}
        assert actions.isdisjoint({"pause", "empty", "delete", "create", "publish"})
        assert {"tail", "filter", "show_view('nodes')"} <= actions
        await pilot.press("p", "e", "ctrl+d", "c", "P")
        await on_screen(pilot, app, TopicsScreen)
        await pilot.press("l")  # tailing a topic without channels would consume
        await on_screen(pilot, app, TopicsScreen)
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert "Pause/Unpause" not in titles
        assert "Tail" in titles
        assert app.results == []
        assert (await http.topics(0))["held"]["depth"] == 1
        assert "READ-ONLY" in app.screen.query_one(StatusLine).text

    run_app(make_app(nsq, read_only=True), body)


def test_a_refused_action_is_reported_and_the_app_carries_on(nsq: NSQBox) -> None:
    nsq.publish("orders", b"x", node=0)
    nsq.wait_for_producers("orders")  # actions reach the nodes lookupd lists
    http = HTTP(nsq)

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await open_topic(pilot, app, "orders")
        await pilot.press("P")
        app.screen.query_one("#body", Input).value = "x" * (1024 * 1024 + 1)
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.results) == 1, "the publish")
        (error,) = app.results[0].errors
        assert "got response 413" in error
        assert "MSG_TOO_BIG" in error
        await pilot.press("P", *"fits", "enter")  # the app carries on
        await done(pilot, app, 2)
        assert (await http.topics(0))["orders"]["message_count"] == 2

    run_app(make_app(nsq), body)


def test_a_node_down_fails_its_part_of_an_action(nsq: NSQBox) -> None:
    nsq.publish("orders", b"x", node=0)
    nsq.wait_for_producers("orders")  # actions reach the nodes lookupd lists
    live, dead = str(nsq.nsqd_http_addresses[0]), "127.0.0.1:1"
    http = HTTP(nsq)

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await open_topic(pilot, app, "orders")
        await pilot.press("p")
        await confirm(pilot, app)
        await wait_until(pilot, lambda: len(app.results) == 1, "the pause")
        (error,) = app.results[0].errors
        assert dead in error
        assert (await http.topics(0))["orders"]["paused"] is True  # the live node did it

    factory = partial(open_model_backend, nsqd_http_addresses=[live, dead])
    run_app(AdminApp(factory, interval=INTERVAL), body)


def test_help_and_the_command_palette_list_every_action(nsq: NSQBox) -> None:
    nsq.publish("orders", b"x")
    nsq.wait_for_producers("orders")  # actions reach the nodes lookupd lists

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await open_topic(pilot, app, "orders")
        titles = {c.title for c in app.get_system_commands(app.screen)}
        expected = {"Pause/Unpause", "Empty", "Delete", "Create", "Publish", "Tail"}
        assert expected | {"Filter", "Topics", "Nodes", "Help", "Refresh", "Quit"} <= titles
        await pilot.press("question_mark")
        await on_screen(pilot, app, HelpScreen)
        assert {d for _, d in app.screen.keys} >= expected
        await pilot.press("escape", "colon")
        await on_screen(pilot, app, CommandPalette)
        await pilot.press(*"empty")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await pilot.press("n")
        assert app.results == []

    run_app(make_app(nsq), body)
