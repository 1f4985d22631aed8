"""The Messages view against a real cluster: listing, paging, opening, filtering, republishing
and saving; read-only mode; real nsqd (no peek route).

What the view lists is checked against what was published; that listing changed nothing is
checked through nsqd's ``/stats`` and by consuming afterwards.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.syntax import Syntax
from textual.pilot import Pilot
from textual.widgets import Input, Static

from nsqbox.admin.tui.app import AdminApp
from nsqbox.admin.tui.backend import open_model_backend
from nsqbox.admin.tui.channel import ChannelScreen
from nsqbox.admin.tui.message import MessageScreen
from nsqbox.admin.tui.message_actions import RepublishScreen, SaveScreen
from nsqbox.admin.tui.messages import MessagesScreen
from nsqbox.admin.tui.modals import ConfirmScreen
from nsqbox.admin.tui.navigation import OpenMessages
from nsqbox.admin.tui.topic import TopicScreen
from nsqbox.admin.tui.widgets import StatsTable
from nsqbox.client import Config
from nsqbox.client.blocking import BlockingConsumer
from nsqbox.testing.handle import NSQBox
from tests.compat.differential import real_binary, running

from .conftest import HTTP, INTERVAL, TIMEOUT, make_app, on_screen, open_topic, run_app, wait_until

#: Column indexes of the messages table.
WHERE, ATTEMPTS, BODY = 2, 3, 7


async def listed(pilot: Pilot[Any], app: AdminApp, after: int = 0) -> MessagesScreen:
    """Wait until the Messages view has listed a page more than ``after``; the view."""
    await wait_until(pilot, lambda: isinstance(app.screen, MessagesScreen), "the Messages view")
    screen = app.screen
    assert isinstance(screen, MessagesScreen)
    await wait_until(pilot, lambda: screen.loads > after, f"listing {after + 1}")
    await pilot.pause()
    return screen


async def topic_view(pilot: Pilot[Any], app: AdminApp, topic: str) -> None:
    """Open ``topic``'s view from the Topics view, as a person would (select, Enter)."""
    await open_topic(pilot, app, topic)
    await pilot.press("enter")
    await wait_until(pilot, lambda: isinstance(app.screen, TopicScreen), "topic view")


def column(screen: MessagesScreen, index: int) -> list[str]:
    table = screen.main_table
    return [table.cells(key)[index] for key in table.keys]


async def open_messages(
    pilot: Pilot[Any], app: AdminApp, topic: str, channel: str, nodes: int = 1
) -> None:
    """Show the Messages view of ``channel`` once the app sees it on ``nodes`` nodes."""

    def seen() -> int:
        row = app.snapshot.channel(topic, channel) if app.snapshot is not None else None
        return 0 if row is None else len(row.nodes)

    await wait_until(pilot, lambda: seen() >= nodes, f"channel {channel} of {topic}", seen)
    app.post_message(OpenMessages(topic, channel))


@contextmanager
def real_nsqd_app(tmp_path: Path) -> Iterator[tuple[str, AdminApp]]:
    """A real nsqd (the test is skipped without one) and an app on it alone: its HTTP
    address and the app."""
    binary = real_binary("nsqd")
    if binary is None:
        pytest.skip("no real nsqd to run (set NSQ_BIN)")
    with running([str(binary)], "nsqd", tmp_path / "real") as server:
        address = f"{server.http[0]}:{server.http[1]}"
        factory = partial(open_model_backend, nsqd_http_addresses=[address])
        yield address, AdminApp(factory, interval=INTERVAL, tz=UTC)


async def listed_on_real_nsqd(pilot: Pilot[Any], app: AdminApp, address: str) -> MessagesScreen:
    """Channel c of topic t with a message on the real nsqd at ``address``, then its
    Messages view, listed."""
    async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as client:
        url = f"http://{address}"
        for path in ("/topic/create", "/channel/create"):
            response = await client.post(url + path, params={"topic": "t", "channel": "c"})
            assert response.status_code == 200, response.text
        response = await client.post(f"{url}/pub", params={"topic": "t"}, content=b"x")
        assert response.status_code == 200, response.text
    await open_messages(pilot, app, "t", "c")
    return await listed(pilot, app)


def create_channel(nsq: NSQBox, topic: str, channel: str) -> None:
    """Create ``channel`` of ``topic`` on node 0 (then publish: it gets every message, and
    the handle deletes the topic after the test)."""
    address = nsq.nsqd_http_addresses[0]
    with httpx.Client(timeout=TIMEOUT, trust_env=False) as client:
        for path in ("/topic/create", "/channel/create"):
            response = client.post(
                f"http://{address}{path}", params={"topic": topic, "channel": channel}
            )
            response.raise_for_status()


def test_a_channel_from_memory_to_in_flight_and_nothing_changes(nsq: NSQBox) -> None:
    http = HTTP(nsq)
    bodies = [b'{"n": 1, "tags": ["a"]}', b"plain [/text] [b]", b"\x00\x01\x02binary"]
    create_channel(nsq, "peeked", "c")
    nsq.publish("peeked", bodies)
    nsq.publish("peeked", b"later", defer_ms=60_000)
    config = Config(max_in_flight=1)
    with BlockingConsumer(nsq.addresses.nsqd_tcp[0], "peeked", "c", config=config) as consumer:
        first = next(consumer.messages(timeout=TIMEOUT))
        assert first.body == bodies[0]

        async def body(pilot: Pilot[Any], app: AdminApp) -> None:
            # Topics -> Topic -> Channel -> m, as a person would
            await topic_view(pilot, app, "peeked")
            channels = app.screen.query_one("#channels", StatsTable)
            await wait_until(pilot, lambda: channels.keys == ["c"], "channel c")
            await pilot.press("enter")
            await wait_until(pilot, lambda: isinstance(app.screen, ChannelScreen), "channel")
            await pilot.press("m")
            screen = await listed(pilot, app)
            assert screen.channel == "c"
            assert column(screen, WHERE) == ["memory", "memory", "deferred", "in flight"]
            assert [m.body for m in screen.messages] == [*bodies[1:], b"later", bodies[0]]
            assert column(screen, ATTEMPTS) == ["0", "0", "0", "1"]
            assert screen.messages[-1].id == first.id.decode()
            assert column(screen, BODY)[0] == "plain [/text] [b]"  # not markup
            assert column(screen, BODY)[1].startswith("0x 00 01 02")
            summary = str(screen.query_one("#summary", Static).content)
            assert "held: depth 2, in flight 1, deferred 1" in summary
            assert "last page" in summary

            # Enter opens one: pretty JSON, text, hex
            screen.main_table.select("3")
            await pilot.press("enter")
            await wait_until(pilot, lambda: isinstance(app.screen, MessageScreen), "a message")
            shown = app.screen.query_one("#body", Static).content
            assert isinstance(shown, Syntax)
            assert shown.code == json.dumps(json.loads(bodies[0]), indent=2)
            assert "body: JSON" in str(app.screen.query_one("#kind", Static).content)
            await pilot.press("escape")
            screen.main_table.select("1")
            await pilot.press("enter")
            await wait_until(pilot, lambda: isinstance(app.screen, MessageScreen), "a message")
            assert str(app.screen.query_one("#body", Static).content).startswith(
                "00000000  00 01 02 62 69 6e"
            )
            await pilot.press("escape")

            # / filters by body text
            await pilot.press("slash", *"PLAIN")
            only = [bodies[1].decode()]
            await wait_until(pilot, lambda: column(screen, BODY) == only, "filtered")
            await pilot.press("escape")
            await wait_until(pilot, lambda: len(screen.main_table.keys) == 4, "unfiltered")

            stats = (await http.topics(0))["peeked"]["channels"]["c"]
            assert (stats["depth"], stats["in_flight_count"], stats["deferred_count"]) == (2, 1, 1)

        run_app(make_app(nsq), body)
        # nothing was taken: the consumer gets the queued ones next, in order
        first.finish()
        rest = []
        for message in consumer.messages(timeout=TIMEOUT):
            rest.append(message.body)
            message.finish()
            if len(rest) == 2:
                break
        assert rest == bodies[1:]


def test_a_topic_without_channels_from_the_topic_view(nsq: NSQBox) -> None:
    nsq.publish("unchannelled", [b"one", b"two"])

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await topic_view(pilot, app, "unchannelled")
        await pilot.press("m")
        screen = await listed(pilot, app)
        assert screen.channel is None
        assert [m.body for m in screen.messages] == [b"one", b"two"]
        assert column(screen, WHERE) == ["memory", "memory"]

    run_app(make_app(nsq), body)
    assert nsq.stats().topic("unchannelled").depth == 2


def test_paging_both_nodes(nsq: NSQBox) -> None:
    http = HTTP(nsq)

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        for node in (0, 1):
            await http.post(node, "/topic/create", topic="pages")
            await http.post(node, "/channel/create", topic="pages", channel="c")
            for i in range(3):
                await http.publish(node, "pages", b"n%d-%d" % (node, i))
        await open_messages(pilot, app, "pages", "c", nodes=2)
        await listed(pilot, app)
        app.pop_screen()
        await app.push_screen(MessagesScreen("pages", "c", limit=2))
        screen = await listed(pilot, app)
        seen = [[m.body for m in screen.messages]]
        assert screen.check_action("previous_page", ()) is None
        while screen.next_cursor is not None:
            loads = screen.loads
            await pilot.press("right_square_bracket")
            screen = await listed(pilot, app, loads)
            seen.append([m.body for m in screen.messages])
        assert sorted(seen[0]) == [b"n0-0", b"n0-1", b"n1-0", b"n1-1"]
        assert sorted(seen[1]) == [b"n0-2", b"n1-2"]
        assert screen.page == 2
        assert screen.check_action("next_page", ()) is None
        loads = screen.loads
        await pilot.press("left_square_bracket")
        screen = await listed(pilot, app, loads)
        assert (screen.page, len(screen.messages)) == (1, 4)
        nodes = {m.node for m in screen.messages}
        assert nodes == {str(a) for a in nsq.nsqd_http_addresses}

    run_app(make_app(nsq), body)


def test_republish_a_copy_and_save_the_list(nsq: NSQBox, tmp_path: Path) -> None:
    http = HTTP(nsq)
    letters = [b"letter 1", "lettre \u00e9".encode()]

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await http.post(0, "/topic/create", topic="dead")
        await http.post(0, "/channel/create", topic="dead", channel="c")
        for letter in letters:
            await http.publish(0, "dead", letter)
        await open_messages(pilot, app, "dead", "c")
        screen = await listed(pilot, app)
        screen.main_table.select("1")
        await pilot.press("R")
        await wait_until(pilot, lambda: isinstance(app.screen, RepublishScreen), "the form")
        await pilot.press(*"replayed", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirmation")
        await pilot.press("y")
        await wait_until(pilot, lambda: len(app.results) == 1, "republished")
        assert app.results[0].ok, app.results[0]
        assert (
            app.results[0].label == f"republish message {screen.messages[1].id} to topic replayed"
        )

        await pilot.press("s")
        await wait_until(pilot, lambda: isinstance(app.screen, SaveScreen), "the save form")
        path = tmp_path / "dead.jsonl"
        app.screen.query_one("#path", Input).value = str(path)
        await pilot.press("enter")
        await wait_until(pilot, path.exists, "the file")
        path.write_text("old")
        await pilot.press("s")
        await wait_until(pilot, lambda: isinstance(app.screen, SaveScreen), "the save form")
        app.screen.query_one("#path", Input).value = str(path)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "overwrite?")
        await pilot.press("y")
        await wait_until(pilot, lambda: path.read_text() != "old", "the file overwritten")
        stats = (await http.topics(0))["dead"]["channels"]["c"]
        assert stats["depth"] == 2

    run_app(make_app(nsq), body)
    lines = [json.loads(line) for line in (tmp_path / "dead.jsonl").read_text().splitlines()]
    assert [base64.b64decode(line["body"]) for line in lines] == letters
    assert [line["text"] for line in lines] == ["letter 1", "lettre \u00e9"]
    assert [(line["state"], line["truncated"], line["size"]) for line in lines] == [
        ("memory", False, 8),
        ("memory", False, 9),
    ]
    assert nsq.consume("replayed", "check") == [letters[1]]


def test_read_only_lists_but_neither_republishes_nor_saves(nsq: NSQBox) -> None:
    nsq.publish("quiet", b"x")
    nsq.publish("quiet", b"not in c", node=1)  # node 1 has the topic, not the channel
    http = HTTP(nsq)

    def on_both_nodes() -> bool:
        topic = app.snapshot.topic("quiet") if app.snapshot is not None else None
        return topic is not None and len(topic.nodes) == 2

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await http.post(0, "/channel/create", topic="quiet", channel="c")
        await wait_until(pilot, on_both_nodes, "topic quiet on both nodes")
        await open_messages(pilot, app, "quiet", "c")
        screen = await listed(pilot, app)
        assert [m.body for m in screen.messages] == [b"x"]
        summary = str(screen.query_one("#summary", Static).content)
        assert f"{nsq.nsqd_http_addresses[1]}: no such channel here" in summary
        assert screen.check_action("republish", ()) is False
        assert screen.check_action("save", ()) is False
        await pilot.press("R", "s")
        assert app.screen is screen  # no form
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, MessageScreen), "a message")
        assert app.screen.check_action("republish", ()) is False
        await pilot.press("R")
        await on_screen(pilot, app, MessageScreen)

    app = make_app(nsq, read_only=True)
    run_app(app, body)


def test_real_nsqd_is_not_supported(tmp_path: Path) -> None:
    with real_nsqd_app(tmp_path) as (address, app):

        async def body(pilot: Pilot[Any], app: AdminApp) -> None:
            screen = await listed_on_real_nsqd(pilot, app, address)
            assert screen.unsupported
            summary = str(screen.query_one("#summary", Static).content)
            assert "not supported by this nsqd" in summary
            assert screen.main_table.keys == []

        run_app(app, body)
